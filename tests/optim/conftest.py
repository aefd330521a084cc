from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread():
    # the machine is shared: keep every optimizer test on one core
    prev = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(prev)


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)
