"""Text corpora as token tensors, with a deterministic train/val split and seeded batches."""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import torch

VAL_FRACTION = 0.1


def read_corpus(name: str = "shakespeare") -> str:
    """A corpus committed to the package (see workloads/data/corpora/ATTRIBUTION.txt)."""
    path = resources.files("workloads.data") / "corpora" / f"{name}.txt.gz"
    if not path.is_file():
        raise FileNotFoundError(f"no committed corpus named {name!r} (expected {path})")
    return gzip.decompress(path.read_bytes()).decode("ascii")


class CharTokenizer:
    """Char-level: the vocabulary is the sorted set of characters of the corpus."""

    def __init__(self, text: str) -> None:
        self.chars = sorted(set(text))
        self.index = {c: i for i, c in enumerate(self.chars)}

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> list[int]:
        return [self.index[c] for c in text]

    def decode(self, ids: list[int]) -> str:
        return "".join(self.chars[i] for i in ids)


@dataclass
class TokenSplits:
    train: torch.Tensor  # 1-D int64
    val: torch.Tensor
    vocab_size: int


@lru_cache(maxsize=2)
def char_corpus(name: str = "shakespeare") -> TokenSplits:
    """Train/val token tensors of a committed corpus; cached, since a reused Ray worker runs many
    trials on it (callers must not modify the tensors in place)."""
    text = read_corpus(name)
    tok = CharTokenizer(text)
    ids = torch.tensor(tok.encode(text), dtype=torch.int64)
    cut = int(len(ids) * (1 - VAL_FRACTION))  # the last 10% is validation: no overlap
    return TokenSplits(train=ids[:cut], val=ids[cut:], vocab_size=tok.vocab_size)


class LMBatches:
    """Random (x, y) windows from a token tensor; a seeded generator makes them reproducible.

    `batch(step)` depends only on (seed, step), so a resumed trial sees the same data stream.
    """

    def __init__(self, tokens: torch.Tensor, batch_size: int, seq_len: int, seed: int, device: str) -> None:
        if len(tokens) <= seq_len + 1:
            raise ValueError(f"corpus has {len(tokens)} tokens, fewer than seq_len+1={seq_len + 1}")
        self.tokens = tokens.to(device)
        self.batch_size = batch_size
        self.seq_len = seq_len
        self.seed = seed
        self.device = device
        self._offsets = torch.arange(seq_len + 1, device=device)

    def batch(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        gen = torch.Generator().manual_seed(self.seed * 1_000_003 + step)
        starts = torch.randint(0, len(self.tokens) - self.seq_len - 1, (self.batch_size,), generator=gen)
        window = self.tokens[starts.to(self.device)[:, None] + self._offsets]
        return window[:, :-1], window[:, 1:]

    def fixed(self, n_batches: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Held-out batches that are the same for every trial (seeded independently of the trial)."""
        return [self.batch(10_000_000 + i) for i in range(n_batches)]
