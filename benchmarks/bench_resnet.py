"""Images/s of an 8-block pre-activation ResNet fed by the device-resident loader vs by
`torch.utils.data.DataLoader` with the usual per-sample transforms.

    .venv/bin/python benchmarks/bench_resnet.py [--steps 10] [--threads 1] [--workers 0 2]

Both pipelines do the same augmentation (random crop with 4-pixel zero padding, horizontal
flip, to float, normalize) on the same uint8 data (CIFAR-100 shaped, 3x32x32, or a real
dataset with --dataset). The DataLoader path does it per sample in `__getitem__` on an HWC
array (what torchvision's RandomCrop/RandomHorizontalFlip/ToTensor/Normalize do) and collates;
the device path gathers a whole batch at once where the model lives.

Prints two tables: the input pipeline alone (batches/s with no model) and end-to-end training
(forward + backward + AdamW step), and the device/DataLoader ratios.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Iterator

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from workloads.data.images import DeviceImageLoader, ImageArrays, load_image_dataset  # noqa: E402
from workloads.models.resnet import ResNet, ResNetConfig  # noqa: E402


class PerSampleDataset(Dataset):
    """The torchvision-style recipe, one image at a time."""

    def __init__(self, arrays: ImageArrays, seed: int = 0) -> None:
        self.hwc = arrays.images.permute(0, 2, 3, 1).contiguous().numpy()  # as torchvision keeps CIFAR
        self.labels = arrays.labels.numpy()
        self.mean = torch.tensor(arrays.mean).view(-1, 1, 1)
        self.std = torch.tensor(arrays.std).view(-1, 1, 1)
        self.seed = seed

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        img = torch.from_numpy(self.hwc[i]).permute(2, 0, 1)  # ToTensor's HWC -> CHW
        padded = F.pad(img, (4, 4, 4, 4))  # RandomCrop(32, padding=4)
        dy, dx = np.random.randint(0, 9, 2)
        img = padded[:, dy : dy + 32, dx : dx + 32]
        if np.random.rand() < 0.5:  # RandomHorizontalFlip
            img = img.flip(-1)
        x = img.float().div_(255)  # ToTensor
        x = x.sub_(self.mean).div_(self.std)  # Normalize
        return x, int(self.labels[i])


def dataloader_batches(
    arrays: ImageArrays, batch_size: int, workers: int, device: torch.device
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    loader = DataLoader(
        PerSampleDataset(arrays),
        batch_size=batch_size,
        shuffle=True,
        drop_last=True,
        num_workers=workers,
        persistent_workers=workers > 0,
        pin_memory=device.type == "cuda",
    )
    while True:
        for x, y in loader:
            yield x.to(device, non_blocking=True), y.to(device, non_blocking=True)


def device_batches(
    arrays: ImageArrays, batch_size: int, device: torch.device
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    loader = DeviceImageLoader(arrays, batch_size, device, augment=True, seed=0)
    while True:
        yield loader.next_batch()


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def throughput(
    batches: Iterator[tuple[torch.Tensor, torch.Tensor]],
    step: Callable[[torch.Tensor, torch.Tensor], None],
    steps: int,
    warmup: int,
    batch_size: int,
    device: torch.device,
) -> float:
    for _ in range(warmup):
        step(*next(batches))
    _sync(device)
    t0 = time.perf_counter()
    for _ in range(steps):
        step(*next(batches))
    _sync(device)
    return steps * batch_size / (time.perf_counter() - t0)


def synthetic(n: int, seed: int = 0) -> ImageArrays:
    g = torch.Generator().manual_seed(seed)
    return ImageArrays(
        images=torch.randint(0, 256, (n, 3, 32, 32), generator=g, dtype=torch.uint8),
        labels=torch.randint(0, 100, (n,), generator=g),
        num_classes=100,
        mean=(0.5071, 0.4865, 0.4409),
        std=(0.2673, 0.2564, 0.2762),
        name="synthetic-cifar100-shape",
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", default="synthetic", help="synthetic | cifar100 | cifar10 | fashion_mnist")
    p.add_argument("--root", default=None)
    p.add_argument("--n", type=int, default=10_000, help="images in the synthetic set")
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--steps", type=int, default=10, help="timed training steps per pipeline")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--loader-steps", type=int, default=50, help="timed batches for the pipeline-only table")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads of the training process")
    p.add_argument("--workers", type=int, nargs="+", default=[0, 2], help="DataLoader num_workers to try")
    p.add_argument("--base-channels", type=int, default=16)
    p.add_argument("--width", type=int, default=1)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = p.parse_args(argv)

    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    arrays = synthetic(args.n) if args.dataset == "synthetic" else load_image_dataset(args.dataset, args.root)
    cfg = ResNetConfig(
        width=args.width,
        depth=8,
        base_channels=args.base_channels,
        num_classes=arrays.num_classes,
        in_channels=arrays.channels,
        residual_multiplier=1 / 8,
    )
    torch.manual_seed(0)
    model = ResNet(cfg).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def train_step(x: torch.Tensor, y: torch.Tensor) -> None:
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    def no_model(x: torch.Tensor, y: torch.Tensor) -> None:
        pass

    print(
        f"# {arrays.name or args.dataset}: {len(arrays)} images {tuple(arrays.images.shape[1:])}, "
        f"ResNet depth 8 {cfg.blocks_per_stage} channels {cfg.stage_channels}, batch {args.batch_size}, "
        f"device {device}, torch threads {args.threads}, cpu count {os.cpu_count()}, torch {torch.__version__}"
    )
    bs = args.batch_size
    pipelines: list[tuple[str, Callable[[], Iterator[tuple[torch.Tensor, torch.Tensor]]]]] = [
        ("device-resident loader", lambda: device_batches(arrays, bs, device))
    ]
    for w in args.workers:
        pipelines.append((f"DataLoader, num_workers={w}", lambda w=w: dataloader_batches(arrays, bs, w, device)))

    tables: list[list[tuple[str, float]]] = []
    for title, step, steps in (
        ("input pipeline only (no model)", no_model, args.loader_steps),
        ("end-to-end training (fwd + bwd + AdamW)", train_step, args.steps),
    ):
        print(f"\n## {title}\n\n| pipeline | images/s | device / this |\n|---|---:|---:|")
        rates = []
        for name, make in pipelines:
            batches = make()
            rates.append((name, throughput(batches, step, steps, args.warmup, bs, device)))
            del batches
        ref = rates[0][1]
        for name, rate in rates:
            print(f"| {name} | {rate:,.0f} | {ref / rate:.2f}x |")
        tables.append(rates)
    print("\n## per batch (ms): input pipeline alone / whole training step\n")
    for (name, pipe), (_, e2e) in zip(*tables, strict=True):
        print(f"- {name}: {1e3 * bs / pipe:.1f} / {1e3 * bs / e2e:.1f}")
    best_dl = max(rate for _, rate in tables[1][1:]) if len(tables[1]) > 1 else tables[1][0][1]
    print(f"\nend-to-end ratio, device loader vs best DataLoader: {tables[1][0][1] / best_dl:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
