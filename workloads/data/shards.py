"""nanoGPT / modded-nanogpt `.bin` token shards: a 256 x int32 header (magic 20240520,
version 1, token count) followed by uint16 tokens. The format FineWeb-Edu shards come in."""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable, Iterator

import numpy as np
import torch

MAGIC = 20240520
VERSION = 1
HEADER_INTS = 256


def write_shard(path: str, tokens: np.ndarray | list[int]) -> None:
    arr = np.asarray(tokens)
    if arr.size and (arr.min() < 0 or arr.max() >= 2**16):
        raise ValueError("token ids must fit in uint16 (vocabulary < 65536)")
    header = np.zeros(HEADER_INTS, dtype=np.int32)
    header[:3] = (MAGIC, VERSION, arr.size)
    tmp = f"{path}.tmp"
    with open(tmp, "wb") as f:
        f.write(header.tobytes())
        f.write(arr.astype(np.uint16).tobytes())
    os.replace(tmp, path)


def read_shard(path: str) -> np.ndarray:
    header = np.fromfile(path, dtype=np.int32, count=HEADER_INTS)
    if header.size < 3 or header[0] != MAGIC or header[1] != VERSION:
        raise ValueError(f"{path}: not a token shard (magic {MAGIC}, version {VERSION} expected)")
    ntok = int(header[2])
    tokens = np.memmap(path, dtype=np.uint16, mode="r", offset=HEADER_INTS * 4, shape=(ntok,))
    return tokens


def shard_paths(directory: str, split: str) -> list[str]:
    paths = sorted(glob.glob(os.path.join(directory, f"*{split}*.bin")))
    if not paths:
        raise FileNotFoundError(
            f"no '*{split}*.bin' token shards in {directory!r}; create them with "
            f"`hpt data prepare TEXT_FILE --out {directory}`"
        )
    return paths


def load_split(directory: str, split: str) -> torch.Tensor:
    """All shards of a split as one int64 tensor (fine for CPU-sized data; clusters stream)."""
    arrays = [np.asarray(read_shard(p), dtype=np.int64) for p in shard_paths(directory, split)]
    return torch.from_numpy(np.concatenate(arrays))


def _chunks(ids: Iterable[int], size: int) -> Iterator[list[int]]:
    buf: list[int] = []
    for i in ids:
        buf.append(i)
        if len(buf) == size:
            yield buf
            buf = []
    if buf:
        yield buf


def prepare(text_path: str, out_dir: str, shard_tokens: int = 10_000_000, val_fraction: float = 0.1) -> dict:
    """Tokenize a text file with the GPT-2 BPE (offline) into train/val shards."""
    from workloads.data.tokenizers import EOT, gpt2_encoding

    enc = gpt2_encoding()
    with open(text_path, encoding="utf-8") as f:
        text = f.read()
    ids = enc.encode_ordinary(text) + [EOT]
    cut = int(len(ids) * (1 - val_fraction))
    os.makedirs(out_dir, exist_ok=True)
    written = {"train": 0, "val": 0}
    for split, part in (("val", ids[cut:]), ("train", ids[:cut])):
        for k, chunk in enumerate(_chunks(part, shard_tokens)):
            write_shard(os.path.join(out_dir, f"{split}_{k:06d}.bin"), chunk)
            written[split] += len(chunk)
    return written
