"""Image data: CIFAR python archives (tiny fakes in the exact format), Fashion-MNIST IDX, the
on-device loader and the fixed evaluation set. No dataset is needed; the real Fashion-MNIST
check runs only where the Debian package is installed."""

from __future__ import annotations

import gzip
import hashlib
import io
import pickle
import struct
import tarfile
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from workloads.data import images as im
from workloads.data.images import (
    ChecksumError,
    DatasetNotFoundError,
    DeviceImageLoader,
    EvalSet,
    ImageArrays,
    crop_flip,
    load_image_dataset,
)

torch.set_num_threads(1)


# ------------------------------------------------------------------ writing the exact formats


class Py2Pickler(pickle._Pickler):  # type: ignore[misc,name-defined]
    """Writes protocol-2 pickles the way Python 2 + numpy 1.x wrote CIFAR: every string is a
    Python-2 `str` (BINSTRING), numpy arrays via numpy.core.multiarray._reconstruct."""

    dispatch = pickle._Pickler.dispatch.copy()  # type: ignore[attr-defined]

    def _save_py2_str(self, obj: bytes) -> None:
        n = len(obj)
        if n < 256:
            self.write(pickle.SHORT_BINSTRING + bytes([n]) + obj)
        else:
            self.write(pickle.BINSTRING + struct.pack("<i", n) + obj)
        self.memoize(obj)

    def save_bytes(self, obj: bytes) -> None:
        self._save_py2_str(obj)

    def save_str(self, obj: str) -> None:
        self._save_py2_str(obj.encode("latin1"))

    dispatch[bytes] = save_bytes
    dispatch[str] = save_str

    def save_global(self, obj: object, name: str | None = None) -> None:
        if obj is np._core.multiarray._reconstruct:
            self.write(pickle.GLOBAL + b"numpy.core.multiarray\n_reconstruct\n")
            self.memoize(obj)
            return
        super().save_global(obj, name)


def py2_pickle(obj: object) -> bytes:
    buf = io.BytesIO()
    Py2Pickler(buf, protocol=2).dump(obj)
    return buf.getvalue()


def py3_bytes_keys_pickle(obj: dict) -> bytes:
    return pickle.dumps({k.encode(): v for k, v in obj.items()}, protocol=2)


def _cifar_split(rng: np.random.Generator, n: int, name: str) -> dict:
    fine = rng.integers(0, 100, n)
    return {
        "filenames": [f"img_{i}.png" for i in range(n)],
        "batch_label": f"{name} batch 1 of 1",
        "fine_labels": [int(v) for v in fine],
        "coarse_labels": [int(v) // 5 for v in fine],
        "data": rng.integers(0, 256, (n, 3072), dtype=np.uint8),
    }


def _add(tar: tarfile.TarFile, name: str, data: bytes | None) -> None:
    info = tarfile.TarInfo(name)
    if data is None:
        info.type = tarfile.DIRTYPE
        info.mode = 0o755
        tar.addfile(info)
    else:
        info.size = len(data)
        info.mode = 0o644
        tar.addfile(info, io.BytesIO(data))


def write_fake_cifar100(
    path: Path, n_train: int = 40, n_test: int = 12, dumps=py2_pickle, seed: int = 0
) -> tuple[str, dict]:
    """cifar-100-python.tar.gz with all members in the real order; returns (md5, splits)."""
    rng = np.random.default_rng(seed)
    splits = {"train": _cifar_split(rng, n_train, "training"), "test": _cifar_split(rng, n_test, "testing")}
    meta = {"fine_label_names": [f"f{i}" for i in range(100)], "coarse_label_names": [f"c{i}" for i in range(20)]}
    with tarfile.open(path, "w:gz") as tar:
        _add(tar, "cifar-100-python", None)
        _add(tar, "cifar-100-python/file.txt~", b"")
        _add(tar, "cifar-100-python/train", dumps(splits["train"]))
        _add(tar, "cifar-100-python/test", dumps(splits["test"]))
        _add(tar, "cifar-100-python/meta", dumps(meta))
    return hashlib.md5(path.read_bytes()).hexdigest(), splits


def write_fake_cifar10(path: Path, n_per_batch: int = 6) -> str:
    rng = np.random.default_rng(1)

    def batch(label: str) -> dict:
        return {
            "batch_label": label,
            "labels": [int(v) for v in rng.integers(0, 10, n_per_batch)],
            "data": rng.integers(0, 256, (n_per_batch, 3072), dtype=np.uint8),
            "filenames": [f"x{i}.png" for i in range(n_per_batch)],
        }

    with tarfile.open(path, "w:gz") as tar:
        _add(tar, "cifar-10-batches-py", None)
        for i in range(1, 6):
            _add(tar, f"cifar-10-batches-py/data_batch_{i}", py2_pickle(batch(f"training batch {i} of 5")))
        _add(tar, "cifar-10-batches-py/test_batch", py2_pickle(batch("testing batch 1 of 1")))
        _add(tar, "cifar-10-batches-py/batches.meta", py2_pickle({"label_names": [str(i) for i in range(10)]}))
        _add(tar, "cifar-10-batches-py/readme.html", b"<html></html>")
    return hashlib.md5(path.read_bytes()).hexdigest()


def write_idx(path: Path, array: np.ndarray) -> None:
    code = {np.dtype(np.uint8): 0x08}[array.dtype]
    header = bytes([0, 0, code, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    with gzip.open(path, "wb") as f:
        f.write(header + array.tobytes())


def write_fake_fashion_mnist(root: Path, n_train: int = 30, n_test: int = 10) -> dict:
    rng = np.random.default_rng(2)
    out = {}
    for split, prefix, n in (("train", "train", n_train), ("test", "t10k", n_test)):
        imgs = rng.integers(1, 256, (n, 28, 28), dtype=np.uint8)
        labels = rng.integers(0, 10, n).astype(np.uint8)
        write_idx(root / f"{prefix}-images-idx3-ubyte.gz", imgs)
        write_idx(root / f"{prefix}-labels-idx1-ubyte.gz", labels)
        out[split] = (imgs, labels)
    return out


# ------------------------------------------------------------------ CIFAR


def test_fake_cifar100_loads_with_shapes_layout_and_label_ranges(tmp_path: Path) -> None:
    md5, splits = write_fake_cifar100(tmp_path / "cifar-100-python.tar.gz")
    for split, n in (("train", 40), ("test", 12)):
        fine = load_image_dataset("cifar100", tmp_path, split, md5=md5)
        assert fine.images.shape == (n, 3, 32, 32) and fine.images.dtype == torch.uint8
        assert fine.labels.shape == (n,) and fine.labels.dtype == torch.int64
        assert fine.num_classes == 100 and 0 <= fine.labels.min() and fine.labels.max() < 100
        raw = splits[split]["data"]
        # R plane, then G, then B, each 32x32 row-major
        assert torch.equal(fine.images[3, 1, 5], torch.from_numpy(raw[3, 1024 + 5 * 32 : 1024 + 6 * 32]))
        assert fine.labels.tolist() == splits[split]["fine_labels"]
        coarse = load_image_dataset("cifar100", tmp_path, split, "coarse", md5=md5)
        assert coarse.num_classes == 20 and coarse.labels.max() < 20
        assert coarse.labels.tolist() == splits[split]["coarse_labels"]
        assert torch.equal(coarse.images, fine.images)
    # the archive path itself also works as root
    direct = load_image_dataset("cifar100", tmp_path / "cifar-100-python.tar.gz", "test", md5=md5)
    assert len(direct) == 12


@pytest.mark.parametrize("encoding", ["latin1", "bytes"])
def test_both_key_styles_of_python2_pickles(tmp_path: Path, encoding: str) -> None:
    split = _cifar_split(np.random.default_rng(5), 4, "training")
    raw = py2_pickle(split)
    assert raw[:2] == b"\x80\x02"  # protocol 2
    plain = pickle.loads(raw, encoding=encoding)
    assert (b"data" if encoding == "bytes" else "data") in plain  # the two key styles really differ
    d = im._unpickle(raw, encoding)
    assert set(d) >= {"data", "fine_labels", "coarse_labels", "filenames", "batch_label"}
    assert np.array_equal(d["data"], split["data"])


def test_python3_bytes_keys_archive_loads(tmp_path: Path) -> None:
    md5, splits = write_fake_cifar100(tmp_path / "cifar-100-python.tar.gz", dumps=py3_bytes_keys_pickle, seed=3)
    a = load_image_dataset("cifar100", tmp_path, "train", md5=md5)
    assert a.labels.tolist() == splits["train"]["fine_labels"]
    assert torch.equal(a.images.reshape(40, -1), torch.from_numpy(splits["train"]["data"]))


class _Boom:
    def __reduce__(self) -> tuple:
        return (Path.touch, (Path(self.target),))

    def __init__(self, target: str) -> None:
        self.target = target


def test_wrong_md5_is_refused_before_unpickling(tmp_path: Path) -> None:
    marker = tmp_path / "unpickled"
    evil = pickle.dumps({"data": _Boom(str(marker))}, protocol=2)
    path = tmp_path / "cifar-100-python.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        _add(tar, "cifar-100-python", None)
        for m in ("train", "test", "meta"):
            _add(tar, f"cifar-100-python/{m}", evil)
    # default expected md5 is the real archive's: this file does not match it
    with pytest.raises(ChecksumError, match="refusing to unpickle") as err:
        load_image_dataset("cifar100", tmp_path, "train")
    assert "eb9058c3a382ffc7106e4002c42a8d85" in str(err.value) and str(path) in str(err.value)
    assert not marker.exists()
    # even with a matching checksum, only numpy-array globals are admitted
    with pytest.raises(pickle.UnpicklingError, match="refusing to load global"):
        load_image_dataset("cifar100", tmp_path, "train", md5=hashlib.md5(path.read_bytes()).hexdigest())
    assert not marker.exists()


def test_corrupted_archive_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "cifar-100-python.tar.gz"
    md5, _ = write_fake_cifar100(path)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(ChecksumError, match=f"expected {md5}"):
        load_image_dataset("cifar100", tmp_path, "test", md5=md5)


def test_missing_dataset_says_how_to_get_it(tmp_path: Path) -> None:
    with pytest.raises(DatasetNotFoundError) as err:
        load_image_dataset("cifar100", tmp_path / "nowhere", "train")
    assert isinstance(err.value, FileNotFoundError)
    msg = str(err.value)
    assert "https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz" in msg
    assert str(tmp_path / "nowhere" / "cifar-100-python.tar.gz") in msg and "eb9058c3" in msg
    with pytest.raises(DatasetNotFoundError, match="apt-get install dataset-fashion-mnist"):
        load_image_dataset("fashion_mnist", tmp_path, "train")


def test_download_verifies_md5(tmp_path: Path) -> None:
    src = tmp_path / "src" / "cifar-100-python.tar.gz"
    src.parent.mkdir()
    md5, _ = write_fake_cifar100(src, n_train=5, n_test=5)
    root = tmp_path / "data"
    with pytest.raises(ChecksumError, match="discarded"):
        im.download("cifar100", root, url=src.as_uri())  # the real md5 does not match the fake
    assert list(root.iterdir()) == []  # nothing left behind, not even the .part file
    got = im.download("cifar100", root, url=src.as_uri(), md5=md5)
    assert got == root / "cifar-100-python.tar.gz" and im.file_md5(got) == md5
    assert len(load_image_dataset("cifar100", root, "test", md5=md5)) == 5


def test_cifar10_same_code_path(tmp_path: Path) -> None:
    md5 = write_fake_cifar10(tmp_path / "cifar-10-python.tar.gz")
    train = load_image_dataset("cifar10", tmp_path, "train", md5=md5)
    test = load_image_dataset("cifar10", tmp_path, "test", md5=md5)
    assert train.images.shape == (30, 3, 32, 32) and test.images.shape == (6, 3, 32, 32)
    assert train.num_classes == 10 and train.labels.max() < 10
    with pytest.raises(ValueError, match="label_kind"):
        load_image_dataset("cifar10", tmp_path, "train", "coarse", md5=md5)


def test_bad_arguments_name_the_field() -> None:
    with pytest.raises(ValueError, match="name='mnist'"):
        load_image_dataset("mnist", None, "train")
    with pytest.raises(ValueError, match="split='val'"):
        load_image_dataset("cifar100", None, "val")


# ------------------------------------------------------------------ Fashion-MNIST


def test_fashion_mnist_idx_is_padded_to_32(tmp_path: Path) -> None:
    raw = write_fake_fashion_mnist(tmp_path)
    a = load_image_dataset("fashion_mnist", tmp_path, "train")
    assert a.images.shape == (30, 1, 32, 32) and a.num_classes == 10 and a.channels == 1
    assert torch.equal(a.images[:, 0, 2:30, 2:30], torch.from_numpy(raw["train"][0]))
    assert a.images[:, :, :2].sum() == 0 and a.images[:, :, :, 30:].sum() == 0
    assert a.labels.tolist() == raw["train"][1].tolist()
    assert len(load_image_dataset("fashion_mnist", tmp_path, "test")) == 10


def test_idx_header_mismatch_is_an_error(tmp_path: Path) -> None:
    p = tmp_path / "bad-idx3-ubyte"
    p.write_bytes(bytes([0, 0, 8, 3]) + struct.pack(">3I", 2, 28, 28) + b"\0" * 100)
    with pytest.raises(ValueError, match="header says"):
        im.read_idx(p)


@pytest.mark.skipif(not Path(im.FASHION_MNIST_DIR).is_dir(), reason="dataset-fashion-mnist not installed")
def test_real_fashion_mnist_if_installed() -> None:
    a = load_image_dataset("fashion_mnist", None, "test")
    assert a.images.shape == (10000, 1, 32, 32)
    assert torch.equal(a.labels.bincount(), torch.full((10,), 1000))


# ------------------------------------------------------------------ loader and evaluation


def _arrays(n: int = 50, c: int = 3, seed: int = 0) -> ImageArrays:
    g = torch.Generator().manual_seed(seed)
    return ImageArrays(
        images=torch.randint(0, 256, (n, c, 32, 32), generator=g, dtype=torch.uint8),
        labels=torch.randint(0, 10, (n,), generator=g),
        num_classes=10,
        mean=(0.5,) * c,
        std=(0.25,) * c,
    )


def test_crop_flip_matches_per_sample_reference() -> None:
    x = torch.randint(0, 256, (6, 3, 32, 32), dtype=torch.uint8)
    dy = torch.tensor([0, 8, 4, 3, 0, 8])
    dx = torch.tensor([0, 8, 4, 7, 8, 0])
    flip = torch.tensor([False, True, False, True, True, False])
    out = crop_flip(x, dy, dx, flip)
    padded = torch.nn.functional.pad(x, (4, 4, 4, 4))
    for b in range(6):
        ref = padded[b, :, dy[b] : dy[b] + 32, dx[b] : dx[b] + 32]
        if flip[b]:
            ref = ref.flip(-1)
        assert torch.equal(out[b], ref)
    assert torch.equal(out[2], x[2])  # offset 4, no flip: the identity


def test_loader_batches_are_normalized_deterministic_and_cover_epochs() -> None:
    a = _arrays()
    plain = DeviceImageLoader(a, 10, augment=False, seed=0)
    x, y = plain.next_batch()
    assert x.shape == (10, 3, 32, 32) and x.dtype == torch.float32 and y.dtype == torch.int64
    # each row is one stored image, normalized with the dataset's mean/std
    idx = [int(torch.nonzero((a.images.float() / 255 - 0.5).div(0.25).sub(x[i]).abs().amax((1, 2, 3)) < 1e-5)[0])
           for i in range(10)]
    assert a.labels[idx].tolist() == y.tolist()
    seen = set(idx)
    for _ in range(4):
        xb, yb = plain.next_batch()
        seen |= {int(torch.nonzero((a.images.float() / 255 - 0.5).div(0.25).sub(xb[i]).abs()
                                    .amax((1, 2, 3)) < 1e-5)[0]) for i in range(10)}
    assert seen == set(range(50)) and plain.epoch == 0  # one epoch = a permutation
    plain.next_batch()
    assert plain.epoch == 1

    l1, l2, l3 = (DeviceImageLoader(a, 8, augment=True, seed=s) for s in (7, 7, 8))
    for _ in range(8):  # crosses an epoch boundary
        (x1, y1), (x2, y2), (x3, _) = l1.next_batch(), l2.next_batch(), l3.next_batch()
        assert torch.equal(x1, x2) and torch.equal(y1, y2)
    assert not torch.equal(x1, x3)


def test_loader_state_dict_resumes_exactly() -> None:
    a = _arrays()
    ref = DeviceImageLoader(a, 16, seed=3)
    for _ in range(2):
        ref.next_batch()
    state = ref.state_dict()
    expected = [ref.next_batch() for _ in range(4)]
    resumed = DeviceImageLoader(a, 16, seed=99)
    resumed.load_state_dict(state)
    for (xe, ye), (xr, yr) in zip(expected, (resumed.next_batch() for _ in range(4)), strict=True):
        assert torch.equal(xe, xr) and torch.equal(ye, yr)


def test_augmentation_keeps_pixels_of_the_image() -> None:
    a = _arrays(n=20)
    loader = DeviceImageLoader(a, 20, augment=True, seed=1)
    x, y = loader.next_batch()
    pad_value = (0 - 0.5) / 0.25
    # a crop of a padded image: every pixel is either padding or a pixel of some stored image
    assert ((x == pad_value).float().mean(dim=(1, 2, 3)) < 0.5).all()


def test_eval_set_reports_loss_and_accuracy() -> None:
    a = _arrays(n=45)

    class Constant(nn.Module):
        def __init__(self, cls: int) -> None:
            super().__init__()
            self.cls = cls

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            logits = torch.zeros(x.shape[0], 10)
            logits[:, self.cls] = 1e-3
            return logits

    ev = EvalSet(a, batch_size=20)
    assert len(ev) == 3 and sum(x.shape[0] for x, _ in ev) == 45
    res = ev.evaluate(Constant(3))
    assert res.count == 45
    assert res.accuracy == pytest.approx((a.labels == 3).float().mean().item())
    assert res.loss == pytest.approx(np.log(10), abs=1e-3)
    assert len(im.eval_batches(a, 20, num_batches=2).batches()) == 2


def test_command_line_info_and_missing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_fake_fashion_mnist(tmp_path)
    assert im.main(["info", "fashion_mnist", "--root", str(tmp_path)]) == 0
    assert "fashion_mnist train: images (30, 1, 32, 32)" in capsys.readouterr().out
    assert im.main(["info", "cifar100", "--root", str(tmp_path)]) == 2
    assert "cifar-100-python.tar.gz" in capsys.readouterr().out
