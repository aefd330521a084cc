"""Every registered optimizer trains a tiny GPT-2 for 30 steps on a learnable token pattern."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from workloads.models.gpt2 import GPT2, GPT2Config
from workloads.optim import REGISTRY, ParamSpec, build_optimizer
from workloads.roles import is_in_out, named_roles

VOCAB, SEQ, BATCH, STEPS = 32, 16, 8, 30

# name -> (lr, hparams): a workable point for this toy, not a tuned optimum
SETTINGS: dict[str, tuple[float, dict]] = {
    "adamw": (3e-3, {}),
    "lion": (1e-3, {}),
    "muon": (0.02, {"adam_lr": 3e-3}),
    "moga": (0.5, {"adam_lr": 3e-3}),
    "moga_col": (0.25, {"adam_lr": 3e-3}),
    "moga_sign": (0.5, {"adam_lr": 3e-3}),
    "muown": (3e-3, {}),
    "orscale": (3e-3, {}),
    "scion": (0.05, {}),
    "scion_unconstrained": (0.01, {}),
    "projected_scion": (0.01, {}),
}


def _batches(seed: int = 0):
    # next token = perm[token]: a fixed bigram map a 2-layer model learns quickly
    gen = torch.Generator().manual_seed(seed)
    perm = torch.randperm(VOCAB, generator=gen)
    for _ in range(STEPS):
        x = torch.empty(BATCH, SEQ + 1, dtype=torch.long)
        x[:, 0] = torch.randint(0, VOCAB, (BATCH,), generator=gen)
        for t in range(SEQ):
            x[:, t + 1] = perm[x[:, t]]
        yield x[:, :-1], x[:, 1:]


def test_settings_cover_the_registry():
    assert set(SETTINGS) == set(REGISTRY)


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_registry_optimizer_trains_tiny_gpt2(name):
    torch.manual_seed(0)
    model = GPT2(GPT2Config(vocab_size=VOCAB, seq_len=SEQ, width=64, depth=2, head_dim=32))
    specs = [ParamSpec(n, p, role.value, in_out=is_in_out(p)) for n, p, role in named_roles(model)]
    lr, hp = SETTINGS[name]
    opt = build_optimizer(name, specs, lr=lr, weight_decay=0.0, **hp)
    losses = []
    for x, y in _batches():
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert all(torch.isfinite(torch.tensor(losses)))
    start, end = losses[0], sum(losses[-5:]) / 5
    assert end < 0.7 * start, f"{name}: loss {start:.3f} -> {end:.3f} ({[round(v, 2) for v in losses]})"
