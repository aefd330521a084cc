"""Training throughput (tokens/s) of our GPT-2 trial step vs a plain nanoGPT-style loop.

Width 256, depth 4, seq 256, batch 16, AdamW, CPU, fixed torch threads. "Ours" is the real trial
path (task data, recipe init, per-parameter groups from the builder, LR schedule, grad norm);
"plain" is a straightforward model + torch.optim.AdamW with one param group, written here.
Ours must not be slower: the ratio printed is plain_time / ours_time (>= 1.0 means not slower).

    python benchmarks/bench_trial.py [--threads 2] [--steps 10]
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F
from torch import nn

from workloads.config import TrialConfig
from workloads.optim import ParamSpec, build_optimizer
from workloads.parametrization import apply_init, make_recipe, resolve
from workloads.schedule import lr_factor
from workloads.tasks import make_task

WIDTH, DEPTH, SEQ, BATCH, HEAD = 256, 4, 256, 16, 64


class PlainBlock(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d, bias=False), nn.LayerNorm(d, bias=False)
        self.qkv, self.proj = nn.Linear(d, 3 * d, bias=False), nn.Linear(d, d, bias=False)
        self.fc, self.out = nn.Linear(d, 4 * d, bias=False), nn.Linear(4 * d, d, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class PlainGPT(nn.Module):
    def __init__(self, vocab: int) -> None:
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, WIDTH), nn.Embedding(SEQ, WIDTH)
        self.blocks = nn.Sequential(*[PlainBlock(WIDTH, WIDTH // HEAD) for _ in range(DEPTH)])
        self.ln_f, self.head = nn.LayerNorm(WIDTH, bias=False), nn.Linear(WIDTH, vocab, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        return self.head(self.ln_f(self.blocks(x)))


def time_steps(step_fn, steps: int, warmup: int = 3) -> float:
    for i in range(warmup):
        step_fn(i)
    t0 = time.perf_counter()
    for i in range(warmup, warmup + steps):
        step_fn(i)
    return (time.perf_counter() - t0) / steps


def bench_ours(steps: int) -> float:
    config = TrialConfig.model_validate({
        "workload": {"kind": "gpt2", "seq_len": SEQ, "batch_size": BATCH, "steps": 1000, "head_dim": HEAD},
        "width": WIDTH, "depth": DEPTH, "optimizer": {"name": "adamw", "lr": 1e-3},
    })
    task = make_task(config, "cpu")
    recipe = make_recipe(config.parametrization, WIDTH, DEPTH)
    model = task.build_model(recipe.forward_multipliers())
    resolved = resolve(model, recipe, "adam")
    apply_init(resolved)
    specs = [ParamSpec(rp.name, rp.param, rp.role.value, rp.rule.lr_mult, rp.rule.wd_mult, rp.rule.eps_mult)
             for rp in resolved]
    opt = build_optimizer("adamw", specs, lr=1e-3)
    peaks = [g["lr"] for g in opt.param_groups]
    params = list(model.parameters())

    def step(i: int) -> None:
        for g, peak in zip(opt.param_groups, peaks, strict=True):
            g["lr"] = peak * lr_factor(i, 1000, config.workload.schedule)
        loss = task.loss(model, task.train_batch(i))
        loss.backward()
        if i % config.workload.log_every == 0:  # the trial takes the grad norm at logged steps
            torch.nn.utils.get_total_norm([p.grad for p in params if p.grad is not None]).item()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return time_steps(step, steps)


def bench_plain(steps: int, vocab: int) -> float:
    model = PlainGPT(vocab)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
    data = torch.randint(0, vocab, (1_000_000,))

    def step(i: int) -> None:
        starts = torch.randint(0, len(data) - SEQ - 1, (BATCH,))
        window = data[starts[:, None] + torch.arange(SEQ + 1)]
        logits = model(window[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, vocab), window[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return time_steps(step, steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    tokens = BATCH * SEQ
    ours_runs, plain_runs = [], []
    for _ in range(args.repeats):  # interleaved, to spread noise from other processes evenly
        ours_runs.append(bench_ours(args.steps))
        plain_runs.append(bench_plain(args.steps, vocab=76))
    ours, plain = min(ours_runs), min(plain_runs)
    ratios = sorted(p / o for o, p in zip(ours_runs, plain_runs, strict=True))
    print(f"GPT-2 width {WIDTH} depth {DEPTH} seq {SEQ} batch {BATCH}, AdamW, CPU, {args.threads} threads, "
          f"{args.repeats} interleaved repeats x {args.steps} steps")
    print(f"{'':8s} {'s/step':>8s} {'tokens/s':>10s}   (best repeat)")
    print(f"{'ours':8s} {ours:8.3f} {tokens / ours:10.0f}")
    print(f"{'plain':8s} {plain:8.3f} {tokens / plain:10.0f}")
    print(f"ratio ours/plain throughput: best {plain / ours:.3f}x, median of repeats "
          f"{ratios[len(ratios) // 2]:.3f}x, range {ratios[0]:.3f}-{ratios[-1]:.3f} (target >= 1.0)")

if __name__ == "__main__":
    main()
