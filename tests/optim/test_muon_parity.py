"""Our Muon against torch.optim.Muon (small matrices: bf16 matmul is very slow on this CPU)."""

from __future__ import annotations

import pytest
import torch

from workloads.optim import Muon


def _run(opt_cls_kwargs, shape, steps, seed=0):
    cls, kwargs = opt_cls_kwargs
    gen = torch.Generator().manual_seed(seed)
    w = torch.nn.Parameter(torch.randn(shape, generator=gen))
    opt = cls([w], **kwargs)
    for _ in range(steps):
        w.grad = torch.randn(shape, generator=gen)
        opt.step()
    return w.detach()


@pytest.mark.parametrize("shape", [(16, 24), (24, 16)])
@pytest.mark.parametrize("adjust", [None, "original", "match_rms_adamw"])
@pytest.mark.parametrize("nesterov", [True, False])
def test_muon_equals_torch_muon_bf16(shape, adjust, nesterov):
    common = dict(lr=0.02, weight_decay=0.1, momentum=0.9, nesterov=nesterov)
    ours = _run((Muon, dict(common, adjust_lr=adjust, ns_dtype=torch.bfloat16)), shape, 5)
    ref = _run((torch.optim.Muon, dict(common, adjust_lr_fn=adjust)), shape, 5)
    assert torch.equal(ours, ref)


def test_muon_fp32_default_on_cpu_matches_bf16_within_bf16_tolerance():
    common = dict(lr=0.02, weight_decay=0.1)
    ours = Muon([torch.nn.Parameter(torch.zeros(2, 2))])
    assert ours.param_groups[0]["ns_dtype"] is None  # resolves to fp32 on CPU
    start = _run((Muon, dict(common, lr=0.0)), (32, 48), 1)
    fp32 = _run((Muon, common), (32, 48), 5)
    bf16 = _run((torch.optim.Muon, common), (32, 48), 5)
    d_fp32, d_bf16 = fp32 - start, bf16 - start
    cos = (d_fp32 * d_bf16).sum() / (d_fp32.norm() * d_bf16.norm())
    assert cos > 0.999
    assert (d_fp32 - d_bf16).abs().max() < 0.02 * d_bf16.abs().max()  # bf16 has 8 mantissa bits
    assert not torch.equal(fp32, bf16)  # fp32 really ran in fp32
