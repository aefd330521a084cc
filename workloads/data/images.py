"""Image classification data: CIFAR-100 / CIFAR-10 (python archives) and Fashion-MNIST (IDX).

Datasets load into `ImageArrays`: uint8 NCHW images and int64 labels, kept as uint8 until a
batch is drawn. `DeviceImageLoader` puts the whole split on the training device once and draws
batches there (random crop with 4-pixel zero padding + horizontal flip, done on the batch, no
DataLoader worker processes). `EvalSet` holds fixed evaluation batches and reports test loss
and top-1 accuracy.

CIFAR archives are checked against their md5 *before* anything in them is unpickled, and the
pickles are read with an unpickler that only admits the classes a numpy array needs.
Formats, URLs and checksums: shared/DATA.md.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import pickle
import struct
import tarfile
import tempfile
import urllib.request
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

FASHION_MNIST_DIR = "/usr/share/datasets/fashion-mnist"
DATA_DIR_ENV = "HPT_DATA_DIR"
LABEL_KINDS = ("fine", "coarse")
SPLITS = ("train", "test")


class DatasetNotFoundError(FileNotFoundError):
    """The dataset files are not where we looked; the message says how to get them."""


class ChecksumError(ValueError):
    """A downloaded or local archive does not have the expected md5."""


@dataclass(frozen=True)
class CifarSpec:
    name: str
    url: str
    md5: str
    size: int | None
    folder: str
    members: dict[str, tuple[str, ...]]  # split -> member file names inside `folder`
    num_classes: dict[str, int]  # label kind -> classes
    label_keys: dict[str, str]  # label kind -> dict key
    mean: tuple[float, ...]
    std: tuple[float, ...]

    @property
    def filename(self) -> str:
        return self.url.rsplit("/", 1)[-1]


CIFAR: dict[str, CifarSpec] = {
    "cifar100": CifarSpec(
        name="cifar100",
        url="https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz",
        md5="eb9058c3a382ffc7106e4002c42a8d85",
        size=169_001_437,
        folder="cifar-100-python",
        members={"train": ("train",), "test": ("test",)},
        num_classes={"fine": 100, "coarse": 20},
        label_keys={"fine": "fine_labels", "coarse": "coarse_labels"},
        mean=(0.5071, 0.4865, 0.4409),
        std=(0.2673, 0.2564, 0.2762),
    ),
    "cifar10": CifarSpec(
        name="cifar10",
        url="https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",
        md5="c58f30108f718f92721af3b95e74349a",
        size=170_498_071,
        folder="cifar-10-batches-py",
        members={"train": tuple(f"data_batch_{i}" for i in range(1, 6)), "test": ("test_batch",)},
        num_classes={"fine": 10},
        label_keys={"fine": "labels"},
        mean=(0.4914, 0.4822, 0.4465),
        std=(0.2470, 0.2435, 0.2616),
    ),
}

# Fashion-MNIST after zero-padding 28x28 -> 32x32 (computed on the 60k training images).
FASHION_MNIST_MEAN = (0.2190,)
FASHION_MNIST_STD = (0.3318,)
FASHION_MNIST_FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}

DATASETS = ("cifar100", "cifar10", "fashion_mnist")


@dataclass(frozen=True)
class ImageArrays:
    """One split: uint8 images (N, C, H, W), int64 labels (N,). Treat the tensors as read-only
    (loads are cached and shared)."""

    images: Tensor
    labels: Tensor
    num_classes: int
    mean: tuple[float, ...]
    std: tuple[float, ...]
    name: str = ""
    split: str = ""

    def __post_init__(self) -> None:
        if self.images.dtype != torch.uint8 or self.images.ndim != 4:
            raise ValueError(
                f"images must be uint8 (N, C, H, W), got {self.images.dtype} {tuple(self.images.shape)}"
            )
        if self.labels.dtype != torch.int64 or self.labels.shape != (self.images.shape[0],):
            raise ValueError(
                f"labels must be int64 of shape ({self.images.shape[0]},), got "
                f"{self.labels.dtype} {tuple(self.labels.shape)}"
            )
        if len(self.mean) != self.channels or len(self.std) != self.channels:
            raise ValueError(f"mean/std need {self.channels} entries, got {self.mean} / {self.std}")

    @property
    def channels(self) -> int:
        return self.images.shape[1]

    @property
    def image_size(self) -> int:
        return self.images.shape[2]

    def __len__(self) -> int:
        return self.images.shape[0]


# ---------------------------------------------------------------- files, checksums, download


def default_root(name: str) -> Path:
    if name == "fashion_mnist":
        return Path(FASHION_MNIST_DIR)
    base = os.environ.get(DATA_DIR_ENV) or Path.home() / ".cache" / "hptransfer" / "datasets"
    return Path(base)


def file_md5(path: str | Path, chunk: int = 1 << 20) -> str:
    h = hashlib.md5()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def _how_to_get(name: str, root: Path) -> str:
    if name == "fashion_mnist":
        return (
            f"Fashion-MNIST IDX files not found in {root}. Get them with "
            f"`apt-get install dataset-fashion-mnist` (Debian/Ubuntu; installs {FASHION_MNIST_DIR}), "
            f"or put train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz "
            f"and t10k-labels-idx1-ubyte.gz (from https://github.com/zalandoresearch/fashion-mnist) "
            f"in a directory and pass it as root."
        )
    spec = CIFAR[name]
    return (
        f"{name}: archive {root / spec.filename} not found. Download {spec.url} (md5 {spec.md5}) "
        f"and put it at {root / spec.filename}, e.g. `mkdir -p {root} && curl -o {root / spec.filename} "
        f"{spec.url}`, or run "
        f"`python -m workloads.data.images download {name} --root {root}` on a machine with internet. "
        f"root defaults to ${DATA_DIR_ENV} or ~/.cache/hptransfer/datasets."
    )


def download(
    name: str, root: str | Path | None = None, *, url: str | None = None, md5: str | None = None
) -> Path:
    """Download a CIFAR archive into `root`, verifying its md5; returns its path.

    Streams to a temporary file in `root`, hashes while writing, and renames only when the md5
    matches, so a failed or corrupted download never leaves a file behind under the real name.
    An existing file with the right md5 is kept.
    """
    spec = _cifar_spec(name)
    root = Path(root) if root is not None else default_root(name)
    url = url or spec.url
    md5 = (md5 or spec.md5).lower()
    dest = root / spec.filename
    if dest.exists() and file_md5(dest) == md5:
        return dest
    root.mkdir(parents=True, exist_ok=True)
    h = hashlib.md5()
    fd, tmp = tempfile.mkstemp(dir=root, prefix=spec.filename + ".", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=60) as resp:
            while block := resp.read(1 << 20):
                h.update(block)
                out.write(block)
        got = h.hexdigest()
        if got != md5:
            raise ChecksumError(
                f"{name}: download from {url} has md5 {got}, expected {md5}; the file was discarded. "
                f"Retry, or fetch it by hand and check `md5sum {spec.filename}`."
            )
        os.replace(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return dest


def _cifar_spec(name: str) -> CifarSpec:
    if name not in CIFAR:
        raise ValueError(f"dataset {name!r} has no archive to download; use one of {sorted(CIFAR)}")
    return CIFAR[name]


# ---------------------------------------------------------------- CIFAR python archives

_ALLOWED_GLOBALS = {
    ("numpy.core.multiarray", "_reconstruct"): ("numpy._core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"): ("numpy._core.multiarray", "_reconstruct"),
    ("numpy", "ndarray"): ("numpy", "ndarray"),
    ("numpy", "dtype"): ("numpy", "dtype"),
    ("_codecs", "encode"): ("_codecs", "encode"),  # how protocol 2 spells Python-3 bytes
}


class _ArrayUnpickler(pickle.Unpickler):
    """Admits only what a dict of lists, strings and numpy arrays needs."""

    def find_class(self, module: str, name: str) -> Any:
        target = _ALLOWED_GLOBALS.get((module, name))
        if target is None:
            raise pickle.UnpicklingError(f"refusing to load global {module}.{name} from a dataset pickle")
        return super().find_class(*target)


def _unpickle(raw: bytes, encoding: str = "latin1") -> dict[str, Any]:
    obj = _ArrayUnpickler(io.BytesIO(raw), encoding=encoding).load()
    if not isinstance(obj, dict):
        raise ValueError(f"expected a dict in the CIFAR pickle, got {type(obj).__name__}")
    # encoding="bytes" (or Python-3 bytes keys) gives b"data"; "latin1" gives "data": accept both.
    return {k.decode("latin1") if isinstance(k, bytes) else k: v for k, v in obj.items()}


def _read_cifar_archive(
    spec: CifarSpec, path: Path, md5: str, encoding: str = "latin1"
) -> dict[str, dict[str, np.ndarray]]:
    got = file_md5(path)
    if got != md5.lower():
        raise ChecksumError(
            f"{spec.name}: {path} has md5 {got}, expected {md5.lower()}; refusing to unpickle it. "
            f"The file is corrupt, truncated or not the {spec.name} archive: delete it and download "
            f"{spec.url} again."
        )
    wanted = {f"{spec.folder}/{m}": (split, m) for split, ms in spec.members.items() for m in ms}
    parts: dict[str, dict[str, dict[str, Any]]] = {split: {} for split in spec.members}
    with tarfile.open(path, "r:gz") as tar:
        for member in tar:
            if member.name in wanted and member.isfile():
                split, m = wanted[member.name]
                f = tar.extractfile(member)
                assert f is not None
                parts[split][m] = _unpickle(f.read(), encoding)
    out: dict[str, dict[str, np.ndarray]] = {}
    for split, members in spec.members.items():
        missing = [m for m in members if m not in parts[split]]
        if missing:
            raise ValueError(f"{spec.name}: {path} lacks members {[f'{spec.folder}/{m}' for m in missing]}")
        dicts = [parts[split][m] for m in members]
        arrays: dict[str, np.ndarray] = {}
        data = np.concatenate([np.asarray(d["data"], dtype=np.uint8) for d in dicts])
        if data.ndim != 2 or data.shape[1] != 3 * 32 * 32:
            raise ValueError(f"{spec.name} {split}: data has shape {data.shape}, expected (N, 3072)")
        arrays["images"] = data.reshape(-1, 3, 32, 32)  # R plane, G plane, B plane; row-major
        for kind, key in spec.label_keys.items():
            labels = np.concatenate([np.asarray(d[key], dtype=np.int64) for d in dicts])
            if labels.shape != (data.shape[0],):
                raise ValueError(
                    f"{spec.name} {split}: {key} has {labels.shape[0]} labels for {data.shape[0]} images"
                )
            if labels.size and (labels.min() < 0 or labels.max() >= spec.num_classes[kind]):
                raise ValueError(f"{spec.name} {split}: {key} outside 0..{spec.num_classes[kind] - 1}")
            arrays[kind] = labels
        out[split] = arrays
    return out


_CACHE: OrderedDict[tuple, dict[str, dict[str, np.ndarray]]] = OrderedDict()
_CACHE_SIZE = 2


def _load_cifar(name: str, root: Path, split: str, label_kind: str, md5: str | None) -> ImageArrays:
    spec = CIFAR[name]
    if label_kind not in spec.label_keys:
        raise ValueError(
            f"label_kind={label_kind!r} is invalid for {name}: use one of {list(spec.label_keys)}"
        )
    path = root if root.is_file() else root / spec.filename
    if not path.is_file():
        raise DatasetNotFoundError(_how_to_get(name, root))
    st = path.stat()
    key = (name, str(path.resolve()), st.st_mtime_ns, st.st_size, (md5 or spec.md5).lower())
    if key in _CACHE:
        _CACHE.move_to_end(key)
    else:
        _CACHE[key] = _read_cifar_archive(spec, path, md5 or spec.md5)
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    arrays = _CACHE[key][split]
    return ImageArrays(
        images=torch.from_numpy(arrays["images"]),
        labels=torch.from_numpy(arrays[label_kind]),
        num_classes=spec.num_classes[label_kind],
        mean=spec.mean,
        std=spec.std,
        name=name,
        split=split,
    )


# ---------------------------------------------------------------- Fashion-MNIST (IDX)


def read_idx(path: str | Path) -> np.ndarray:
    """Read an IDX file (optionally gzipped): big-endian header, magic 0x0000TTNN."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0:
        raise ValueError(f"{path}: not an IDX file (bad magic {raw[:4].hex()})")
    dtypes = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
    if raw[2] not in dtypes:
        raise ValueError(f"{path}: unknown IDX type code {raw[2]:#x}")
    ndim = raw[3]
    dims = struct.unpack(f">{ndim}I", raw[4 : 4 + 4 * ndim])
    dtype = np.dtype(dtypes[raw[2]])
    expected = int(np.prod(dims)) * dtype.itemsize
    body = raw[4 + 4 * ndim :]
    if len(body) != expected:
        raise ValueError(f"{path}: header says {dims} ({expected} bytes) but body has {len(body)} bytes")
    return np.frombuffer(body, dtype=dtype).reshape(dims).astype(dtype.newbyteorder("="))


def _find(root: Path, stem: str) -> Path | None:
    for candidate in (root / f"{stem}.gz", root / stem):
        if candidate.is_file():
            return candidate
    return None


def _load_fashion_mnist(root: Path, split: str, label_kind: str) -> ImageArrays:
    if label_kind != "fine":
        raise ValueError(f"label_kind={label_kind!r} is invalid for fashion_mnist: it has only 'fine' labels")
    img_stem, lbl_stem = FASHION_MNIST_FILES[split]
    img_path, lbl_path = _find(root, img_stem), _find(root, lbl_stem)
    if img_path is None or lbl_path is None:
        raise DatasetNotFoundError(_how_to_get("fashion_mnist", root))
    images = read_idx(img_path)
    labels = read_idx(lbl_path).astype(np.int64)
    if images.ndim != 3 or images.dtype != np.uint8 or labels.shape != (images.shape[0],):
        raise ValueError(
            f"fashion_mnist {split}: images {images.shape}/{images.dtype}, labels {labels.shape}"
        )
    if labels.size and (labels.min() < 0 or labels.max() > 9):
        raise ValueError(f"fashion_mnist {split}: labels outside 0..9")
    h, w = images.shape[1:]
    ph, pw = max(0, 32 - h), max(0, 32 - w)
    t = torch.from_numpy(images).unsqueeze(1)
    t = F.pad(t, (pw // 2, pw - pw // 2, ph // 2, ph - ph // 2))  # zero pad 28 -> 32
    return ImageArrays(
        images=t.contiguous(),
        labels=torch.from_numpy(labels),
        num_classes=10,
        mean=FASHION_MNIST_MEAN,
        std=FASHION_MNIST_STD,
        name="fashion_mnist",
        split=split,
    )


def load_image_dataset(
    name: str,
    root: str | Path | None = None,
    split: str = "train",
    label_kind: str = "fine",
    *,
    md5: str | None = None,
) -> ImageArrays:
    """Load one split of `name` ("cifar100", "cifar10", "fashion_mnist") as uint8 NCHW + int64 labels.

    `root`: the directory holding the archive / IDX files (a CIFAR archive path also works);
    default `$HPT_DATA_DIR` or ~/.cache/hptransfer/datasets for CIFAR, /usr/share/datasets/fashion-mnist
    for Fashion-MNIST. `md5` overrides the expected archive checksum (tests with small archives).
    Raises `DatasetNotFoundError` (a FileNotFoundError) saying how to get missing data, and
    `ChecksumError` before unpickling an archive whose md5 is wrong.
    """
    if name not in DATASETS:
        raise ValueError(f"dataset name={name!r} is unknown: use one of {list(DATASETS)}")
    if split not in SPLITS:
        raise ValueError(f"split={split!r} is invalid: use one of {list(SPLITS)}")
    if label_kind not in LABEL_KINDS:
        raise ValueError(f"label_kind={label_kind!r} is invalid: use one of {list(LABEL_KINDS)}")
    root_path = Path(root).expanduser() if root is not None else default_root(name)
    if name == "fashion_mnist":
        return _load_fashion_mnist(root_path, split, label_kind)
    return _load_cifar(name, root_path, split, label_kind, md5)


# ---------------------------------------------------------------- on-device batches


def _normalizer(arrays: ImageArrays, device: torch.device) -> tuple[Tensor, Tensor]:
    mean = torch.tensor(arrays.mean, dtype=torch.float32, device=device).view(1, -1, 1, 1)
    std = torch.tensor(arrays.std, dtype=torch.float32, device=device).view(1, -1, 1, 1)
    # x/255 - mean) / std == x * (1/(255 std)) - mean/std
    return 1.0 / (255.0 * std), -mean / std


def crop_flip(images: Tensor, dy: Tensor, dx: Tensor, flip: Tensor, pad: int = 4) -> Tensor:
    """Random crop with `pad` zero padding and horizontal flip, for a whole batch at once.

    images (B, C, H, W) any dtype; dy, dx (B,) integer offsets in [0, 2*pad]; flip (B,) bool.
    Output pixel (i, j) of image b is padded[b, :, dy[b] + i, dx[b] + j'] with j' = W-1-j when
    flipped. One gather, no per-sample Python.
    """
    b, c, h, w = images.shape
    padded = F.pad(images, (pad, pad, pad, pad))
    ar_h = torch.arange(h, device=images.device)
    ar_w = torch.arange(w, device=images.device)
    rows = dy.view(b, 1) + ar_h.view(1, h)  # (B, H)
    cols_idx = torch.where(flip.view(b, 1), (w - 1 - ar_w).view(1, w), ar_w.view(1, w))
    cols = dx.view(b, 1) + cols_idx  # (B, W)
    hp, wp = h + 2 * pad, w + 2 * pad
    flat = (rows.view(b, h, 1) * wp + cols.view(b, 1, w)).view(b, 1, h * w).expand(b, c, h * w)
    return padded.view(b, c, hp * wp).gather(2, flat).view(b, c, h, w)


class DeviceImageLoader:
    """Endless shuffled batches drawn on `device` from a uint8 copy of the split kept there.

    Each epoch is a fresh permutation (the last incomplete batch of an epoch is dropped); with
    `augment`, every image gets a random crop (pad 4) and a horizontal flip with probability 1/2.
    All randomness comes from one CPU generator seeded with `seed`, so the batch stream is the
    same on any device; `state_dict()` / `load_state_dict()` resume it exactly.
    """

    def __init__(
        self,
        arrays: ImageArrays,
        batch_size: int,
        device: str | torch.device = "cpu",
        augment: bool = True,
        seed: int = 0,
        pad: int = 4,
    ) -> None:
        if batch_size < 1 or batch_size > len(arrays):
            raise ValueError(f"batch_size={batch_size} is invalid: use 1..{len(arrays)} (the split size)")
        self.device = torch.device(device)
        self.batch_size = batch_size
        self.augment = augment
        self.pad = pad
        self.images = arrays.images.to(self.device)
        self.labels = arrays.labels.to(self.device)
        self.scale, self.shift = _normalizer(arrays, self.device)
        self.generator = torch.Generator().manual_seed(seed)
        self.epoch = 0
        self._perm = torch.randperm(len(arrays), generator=self.generator)
        self._pos = 0

    def __len__(self) -> int:
        """Batches per epoch."""
        return self.images.shape[0] // self.batch_size

    def __iter__(self) -> DeviceImageLoader:
        return self

    def __next__(self) -> tuple[Tensor, Tensor]:
        return self.next_batch()

    def next_batch(self) -> tuple[Tensor, Tensor]:
        n, bs = self.images.shape[0], self.batch_size
        if self._pos + bs > n:
            self.epoch += 1
            self._perm = torch.randperm(n, generator=self.generator)
            self._pos = 0
        idx_cpu = self._perm[self._pos : self._pos + bs]
        self._pos += bs
        idx = idx_cpu.to(self.device, non_blocking=True)
        x = self.images.index_select(0, idx)
        if self.augment:
            r = torch.randint(0, 2 * self.pad + 1, (2, bs), generator=self.generator)
            flip = torch.rand(bs, generator=self.generator) < 0.5
            x = crop_flip(x, r[0].to(self.device), r[1].to(self.device), flip.to(self.device), self.pad)
        return torch.addcmul(self.shift, x.float(), self.scale), self.labels.index_select(0, idx)

    def state_dict(self) -> dict[str, Any]:
        return {
            "generator": self.generator.get_state(),
            "perm": self._perm.clone(),
            "pos": self._pos,
            "epoch": self.epoch,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.generator.set_state(state["generator"])
        self._perm = state["perm"].clone()
        self._pos = int(state["pos"])
        self.epoch = int(state["epoch"])


@dataclass(frozen=True)
class EvalResult:
    loss: float  # mean cross-entropy per image
    accuracy: float  # top-1, in [0, 1]
    count: int


class EvalSet:
    """Fixed evaluation batches: the first `num_batches * batch_size` images of the split in order
    (all of it when `num_batches` is None), no augmentation, kept as uint8 on `device`."""

    def __init__(
        self,
        arrays: ImageArrays,
        batch_size: int,
        device: str | torch.device = "cpu",
        num_batches: int | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size={batch_size} is invalid: use a positive integer")
        if num_batches is not None and num_batches < 1:
            raise ValueError(f"num_batches={num_batches} is invalid: use a positive integer or None (all)")
        n = len(arrays) if num_batches is None else min(len(arrays), num_batches * batch_size)
        self.device = torch.device(device)
        self.batch_size = batch_size
        self.images = arrays.images[:n].to(self.device)
        self.labels = arrays.labels[:n].to(self.device)
        self.scale, self.shift = _normalizer(arrays, self.device)

    def __len__(self) -> int:
        return -(-self.images.shape[0] // self.batch_size)

    def batches(self) -> list[tuple[Tensor, Tensor]]:
        return list(self)

    def __iter__(self) -> Iterator[tuple[Tensor, Tensor]]:
        for i in range(0, self.images.shape[0], self.batch_size):
            x = self.images[i : i + self.batch_size]
            yield torch.addcmul(self.shift, x.float(), self.scale), self.labels[i : i + self.batch_size]

    @torch.no_grad()
    def evaluate(self, model: nn.Module) -> EvalResult:
        """Test loss and top-1 accuracy of `model` (put in eval mode, then restored)."""
        was_training = model.training
        model.eval()
        loss_sum = torch.zeros((), dtype=torch.float64, device=self.device)
        correct = torch.zeros((), dtype=torch.int64, device=self.device)
        try:
            for x, y in self:
                logits = model(x)
                loss_sum += F.cross_entropy(logits.float(), y, reduction="sum").double()
                correct += (logits.argmax(dim=1) == y).sum()
        finally:
            model.train(was_training)
        n = self.images.shape[0]
        return EvalResult(loss=loss_sum.item() / n, accuracy=correct.item() / n, count=n)


def eval_batches(
    arrays: ImageArrays, batch_size: int, device: str | torch.device = "cpu", num_batches: int | None = None
) -> EvalSet:
    """Fixed evaluation batches (see `EvalSet`)."""
    return EvalSet(arrays, batch_size, device, num_batches)


# ---------------------------------------------------------------- command line


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m workloads.data.images")
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("download", help="download a CIFAR archive with md5 verification")
    d.add_argument("name", choices=sorted(CIFAR))
    d.add_argument("--root", default=None)
    i = sub.add_parser("info", help="load a dataset and print its shapes")
    i.add_argument("name", choices=DATASETS)
    i.add_argument("--root", default=None)
    args = p.parse_args(argv)
    try:
        if args.cmd == "download":
            print(download(args.name, args.root))
        else:
            for split in SPLITS:
                a = load_image_dataset(args.name, args.root, split)
                print(f"{args.name} {split}: images {tuple(a.images.shape)} labels {tuple(a.labels.shape)} "
                      f"classes {a.num_classes}")
    except (DatasetNotFoundError, ChecksumError) as e:
        print(f"error: {e}")
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = [
    "CIFAR",
    "DATASETS",
    "ChecksumError",
    "DatasetNotFoundError",
    "DeviceImageLoader",
    "EvalResult",
    "EvalSet",
    "ImageArrays",
    "crop_flip",
    "download",
    "eval_batches",
    "file_md5",
    "load_image_dataset",
    "read_idx",
]
