"""Next-token prediction with the GPT-2 model on a char corpus or GPT-2-BPE token shards."""

from __future__ import annotations

import torch
from torch import nn

from workloads.config import GPT2Workload
from workloads.data.shards import load_split
from workloads.data.text import LMBatches, TokenSplits, char_corpus
from workloads.models.gpt2 import GPT2, GPT2Config
from workloads.parametrization import ForwardMultipliers
from workloads.tasks import Batch, Task

GPT2_VOCAB = 50257


def _token_splits(wl: GPT2Workload) -> TokenSplits:
    if wl.dataset == "shakespeare_char":
        return char_corpus("shakespeare")
    if wl.dataset == "shards":
        if not wl.data_path:
            raise ValueError("workload.data_path is required when workload.dataset is 'shards'")
        return TokenSplits(load_split(wl.data_path, "train"), load_split(wl.data_path, "val"), GPT2_VOCAB)
    raise ValueError(f"workload.dataset={wl.dataset!r}: choose 'shakespeare_char' or 'shards'")


class LanguageModelTask(Task):
    kind = "gpt2"
    item_unit = "tokens"

    def __init__(self, config, device: str) -> None:
        super().__init__(config, device)
        self.wl: GPT2Workload = config.workload
        splits = _token_splits(self.wl)
        self.vocab_size = splits.vocab_size
        self.train = LMBatches(splits.train, self.wl.batch_size, self.wl.seq_len, config.seed, device)
        val = LMBatches(splits.val, self.wl.batch_size, self.wl.seq_len, seed=0, device=device)
        self.eval_set = val.fixed(self.wl.eval_batches)

    def build_model(self, multipliers: ForwardMultipliers) -> nn.Module:
        cfg = GPT2Config(
            vocab_size=self.vocab_size,
            seq_len=self.wl.seq_len,
            width=self.config.width,
            depth=self.config.depth,
            head_dim=self.wl.head_dim,
            tied_embeddings=self.wl.tied_embeddings,
            bias=self.wl.bias,
            residual_multiplier=multipliers.residual,
            output_multiplier=multipliers.output,
            attn_scale=self.wl.head_dim ** (-multipliers.attn_scale_power),
        )
        return GPT2(cfg).to(self.device)

    def train_batch(self, step: int) -> Batch:
        return self.train.batch(step)

    def items_per_step(self) -> int:
        return self.wl.batch_size * self.wl.seq_len

    @torch.no_grad()
    def evaluate(self, model: nn.Module) -> dict[str, float]:
        was_training = model.training
        model.eval()
        losses = [self.loss(model, batch).item() for batch in self.eval_set]
        model.train(was_training)
        return {"val_loss": sum(losses) / len(losses)}
