"""GPT-2 model, roles, the committed corpus, token shards and the offline GPT-2 BPE."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from orchestrator.cli import main
from workloads.data.shards import load_split, read_shard, write_shard
from workloads.data.text import char_corpus
from workloads.data.tokenizers import gpt2_encoding
from workloads.models.gpt2 import GPT2, GPT2Config
from workloads.roles import MissingRoleError, Role, check_roles, named_roles, tag_module


def test_gpt2_shapes_roles_and_heads():
    model = GPT2(GPT2Config(vocab_size=50, seq_len=16, width=128, depth=3, head_dim=32))
    assert model.blocks[0].attn.n_head == 4 and len(model.blocks) == 3
    logits = model(torch.randint(0, 50, (2, 16)))
    assert logits.shape == (2, 16, 50)
    roles = {name: role for name, _, role in named_roles(model)}
    assert roles["wte.weight"] is Role.EMBEDDING and roles["lm_head.weight"] is Role.OUTPUT
    assert roles["blocks.0.attn.c_attn.weight"] is Role.HIDDEN and roles["blocks.0.ln_1.weight"] is Role.VECTOR


def test_width_must_be_a_multiple_of_head_dim():
    with pytest.raises(ValueError, match="width=100 is not a multiple of head_dim=64"):
        GPT2Config(vocab_size=10, seq_len=8, width=100, depth=1)


def test_tied_embeddings_share_one_tensor():
    model = GPT2(GPT2Config(vocab_size=50, seq_len=8, width=64, depth=1, tied_embeddings=True))
    assert model.lm_head.weight is model.wte.weight
    assert sum(1 for _ in named_roles(model)) == len(list(model.parameters()))


def test_residual_multiplier_scales_branches():
    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=20, seq_len=8, width=64, depth=1, residual_multiplier=0.0)
    model = GPT2(cfg)
    x = torch.randint(0, 20, (1, 8))
    # with branches switched off the output depends only on the embeddings
    h = model.wte(x) + model.wpe(torch.arange(8))
    expected = model.lm_head(model.ln_f(h))
    assert torch.allclose(model(x), expected, atol=1e-6)


def test_untagged_parameter_fails_the_role_check():
    model = nn.Sequential(tag_module(nn.Linear(4, 4), Role.HIDDEN), nn.Linear(4, 2))
    with pytest.raises(MissingRoleError, match=r"'1.weight'.*has no role"):
        check_roles(model)


def test_corpus_split_is_deterministic_and_disjoint():
    a, b = char_corpus(), char_corpus()
    assert torch.equal(a.train, b.train) and torch.equal(a.val, b.val)
    assert len(a.train) > 900_000 and len(a.val) > 90_000 and 60 < a.vocab_size < 100


def test_gpt2_bpe_works_offline():
    enc = gpt2_encoding()
    assert enc.encode("hello world") == [31373, 995]
    assert enc.n_vocab == 50257


def test_shard_round_trip_and_bad_magic(tmp_path):
    tokens = np.arange(1000, dtype=np.int64) % 50257
    write_shard(str(tmp_path / "train_000000.bin"), tokens)
    assert np.array_equal(np.asarray(read_shard(str(tmp_path / "train_000000.bin"))), tokens)
    (tmp_path / "val_000000.bin").write_bytes(b"\0" * 2048)
    with pytest.raises(ValueError, match="not a token shard"):
        load_split(str(tmp_path), "val")


def test_hpt_data_prepare_tokenizes_offline(tmp_path, capsys):
    text = tmp_path / "t.txt"
    text.write_text("hello world\n" * 200)
    assert main(["data", "prepare", str(text), "--out", str(tmp_path / "shards")]) == 0
    train, val = load_split(str(tmp_path / "shards"), "train"), load_split(str(tmp_path / "shards"), "val")
    assert train[:2].tolist() == [31373, 995] and len(train) + len(val) == 200 * 3 + 1
    assert "train" in capsys.readouterr().out
