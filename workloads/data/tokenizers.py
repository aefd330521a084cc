"""GPT-2 BPE that works offline: the r50k_base ranks file is vendored (MIT, see LICENSE file)."""

from __future__ import annotations

import gzip
import hashlib
import os
import tempfile
from functools import lru_cache
from importlib import resources

GPT2_RANKS_SHA256 = "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"
# tiktoken's r50k_base split pattern (= GPT-2).
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
EOT = 50256


@lru_cache(maxsize=1)
def gpt2_encoding():  # -> tiktoken.Encoding
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    packed = resources.files("workloads.data") / "tokenizers" / "gpt2.tiktoken.gz"
    raw = gzip.decompress(packed.read_bytes())
    if hashlib.sha256(raw).hexdigest() != GPT2_RANKS_SHA256:
        raise RuntimeError(f"vendored GPT-2 BPE file {packed} is corrupted (sha256 mismatch)")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "gpt2.tiktoken")
        with open(path, "wb") as f:
            f.write(raw)
        ranks = load_tiktoken_bpe(path, expected_hash=GPT2_RANKS_SHA256)
    return tiktoken.Encoding(
        name="gpt2",
        pat_str=GPT2_PATTERN,
        mergeable_ranks=ranks,
        special_tokens={"<|endoftext|>": EOT},
        explicit_n_vocab=50257,
    )
