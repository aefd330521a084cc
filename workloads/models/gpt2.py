"""nanoGPT-style pre-LayerNorm decoder with width/depth knobs and the forward multipliers that
width/depth parametrizations set (residual branch, output logits, attention scale)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from workloads.roles import Role, check_roles, tag, tag_module


@dataclass(frozen=True)
class GPT2Config:
    vocab_size: int
    seq_len: int
    width: int  # n_embd
    depth: int  # n_layer
    head_dim: int = 64
    tied_embeddings: bool = False
    bias: bool = False
    residual_multiplier: float = 1.0  # every attention and MLP branch: x + m * F(LN x)
    output_multiplier: float = 1.0  # logits = m * W_out h
    attn_scale: float | None = None  # q.k multiplier; None -> 1/sqrt(head_dim)

    def __post_init__(self) -> None:
        if self.width % self.head_dim != 0:
            raise ValueError(
                f"width={self.width} is not a multiple of head_dim={self.head_dim}: "
                f"heads = width / head_dim must be whole; choose a width in "
                f"{[self.head_dim * k for k in (1, 2, 4, 8)]}... or change head_dim"
            )
        for name in ("vocab_size", "seq_len", "width", "depth", "head_dim"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)} must be >= 1")

    @property
    def n_head(self) -> int:
        return self.width // self.head_dim


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: GPT2Config) -> None:
        super().__init__()
        self.n_head = cfg.n_head
        self.head_dim = cfg.head_dim
        self.scale = cfg.attn_scale if cfg.attn_scale is not None else 1.0 / math.sqrt(cfg.head_dim)
        self.c_attn = tag_module(nn.Linear(cfg.width, 3 * cfg.width, bias=cfg.bias), Role.HIDDEN)
        self.c_proj = tag_module(nn.Linear(cfg.width, cfg.width, bias=cfg.bias), Role.HIDDEN)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.n_head, self.head_dim).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.scale)
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))


class MLP(nn.Module):
    def __init__(self, cfg: GPT2Config) -> None:
        super().__init__()
        self.c_fc = tag_module(nn.Linear(cfg.width, 4 * cfg.width, bias=cfg.bias), Role.HIDDEN)
        self.c_proj = tag_module(nn.Linear(4 * cfg.width, cfg.width, bias=cfg.bias), Role.HIDDEN)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(F.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, cfg: GPT2Config) -> None:
        super().__init__()
        self.ln_1 = tag_module(nn.LayerNorm(cfg.width, bias=cfg.bias), Role.VECTOR)
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = tag_module(nn.LayerNorm(cfg.width, bias=cfg.bias), Role.VECTOR)
        self.mlp = MLP(cfg)
        self.branch_multiplier = cfg.residual_multiplier

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        m = self.branch_multiplier
        if m == 1.0:  # skip a full-activation multiply in the common case
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))
        x = x + m * self.attn(self.ln_1(x))
        return x + m * self.mlp(self.ln_2(x))


class GPT2(nn.Module):
    def __init__(self, cfg: GPT2Config) -> None:
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.width)
        tag(self.wte.weight, Role.EMBEDDING, in_out=True)
        self.wpe = nn.Embedding(cfg.seq_len, cfg.width)
        tag(self.wpe.weight, Role.EMBEDDING, in_out=True)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.depth))
        self.ln_f = tag_module(nn.LayerNorm(cfg.width, bias=cfg.bias), Role.VECTOR)
        self.lm_head = nn.Linear(cfg.width, cfg.vocab_size, bias=False)
        if cfg.tied_embeddings:
            self.lm_head.weight = self.wte.weight  # role stays `embedding`
        else:
            tag(self.lm_head.weight, Role.OUTPUT)
        self.output_multiplier = cfg.output_multiplier
        self._default_init()
        check_roles(self)

    def _default_init(self) -> None:
        # nanoGPT's defaults; a parametrization recipe re-initializes every matrix anyway.
        for module in self.modules():
            if isinstance(module, nn.Linear | nn.Embedding):
                nn.init.normal_(module.weight, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        t = idx.shape[1]
        pos = torch.arange(t, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return logits if self.output_multiplier == 1.0 else self.output_multiplier * logits
