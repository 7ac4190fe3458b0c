"""tgfn.nn.datasets: the MNIST IDX loader on small files written here (plain and gzipped) and its errors,
and scikit-learn's digits (skipped when scikit-learn is missing)."""
from __future__ import annotations

import gzip
import sys

import numpy as np
import pytest

import tgfn
from tgfn.nn import datasets

STEMS = {"train_images": "train-images-idx3-ubyte", "train_labels": "train-labels-idx1-ubyte",
         "test_images": "t10k-images-idx3-ubyte", "test_labels": "t10k-labels-idx1-ubyte"}


def idx_bytes(values: np.ndarray, magic: bytes = b"") -> bytes:
  """An IDX file of uint8 `values`: magic 00 00 08 ndim, big-endian uint32 dims, the bytes."""
  magic = magic or bytes([0, 0, 0x08, values.ndim])
  return magic + b"".join(d.to_bytes(4, "big") for d in values.shape) + values.astype(np.uint8).tobytes()


def write_mnist(folder, gz: bool, n_train: int = 5, n_test: int = 3, **override: bytes) -> dict:
  rng = np.random.default_rng(0)
  hosts = {"train_images": rng.integers(0, 256, (n_train, 4, 3)),
           "train_labels": rng.integers(0, 10, n_train),
           "test_images": rng.integers(0, 256, (n_test, 4, 3)),
           "test_labels": rng.integers(0, 10, n_test)}
  for key, stem in STEMS.items():
    blob = override.get(key) or idx_bytes(hosts[key])
    if gz: (folder / f"{stem}.gz").write_bytes(gzip.compress(blob))
    else: (folder / stem).write_bytes(blob)
  return hosts


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gz"])
def test_mnist_reads_idx_files(gz: bool, tmp_path) -> None:
  hosts = write_mnist(tmp_path, gz)
  x_train, y_train, x_test, y_test = datasets.mnist(tmp_path)
  for images, labels, split in ((x_train, y_train, "train"), (x_test, y_test, "test")):
    assert isinstance(images, tgfn.Array) and images.dtype is tgfn.float32 and labels.dtype is tgfn.int32
    np.testing.assert_allclose(images.numpy(), hosts[f"{split}_images"] / 255.0, rtol=1e-6)
    np.testing.assert_array_equal(labels.numpy(), hosts[f"{split}_labels"])
  assert x_train.shape == (5, 4, 3) and y_test.shape == (3,)


def test_mnist_errors(tmp_path) -> None:
  images = np.zeros((5, 4, 3))
  write_mnist(tmp_path, gz=False, train_labels=idx_bytes(images))  # an image file where labels belong
  with pytest.raises(ValueError, match=r"train-labels-idx1-ubyte: not an idx1-ubyte file: magic number "
                                       r"00000803, expected 00000801"):
    datasets.mnist(tmp_path)
  write_mnist(tmp_path, gz=False, test_images=idx_bytes(images)[:-1])
  with pytest.raises(ValueError, match=r"t10k-images-idx3-ubyte: the header gives shape \(5, 4, 3\), "
                                       r"60 bytes of data, but the file holds 59"):
    datasets.mnist(tmp_path)
  write_mnist(tmp_path, gz=False, test_images=idx_bytes(images))
  with pytest.raises(ValueError, match="the test set has 5 images but 3 labels"):
    datasets.mnist(tmp_path)
  (tmp_path / STEMS["test_images"]).unlink()
  with pytest.raises(FileNotFoundError, match="no t10k-images-idx3-ubyte or t10k-images-idx3-ubyte.gz"):
    datasets.mnist(tmp_path)
  (tmp_path / f"{STEMS['test_images']}.gz").write_bytes(b"not gzip at all")
  with pytest.raises(ValueError, match=r"t10k-images-idx3-ubyte\.gz: not a valid gzip file"):
    datasets.mnist(tmp_path)
  (tmp_path / f"{STEMS['test_images']}.gz").write_bytes(gzip.compress(b"\x00\x00\x08"))
  with pytest.raises(ValueError, match="not an idx3-ubyte file"):
    datasets.mnist(tmp_path)
  (tmp_path / f"{STEMS['test_images']}.gz").write_bytes(gzip.compress(bytes([0, 0, 8, 3, 0, 0])))
  with pytest.raises(ValueError, match="6 bytes is too short for an idx3 header"):
    datasets.mnist(tmp_path)


def test_digits() -> None:
  pytest.importorskip("sklearn")
  x_train, y_train, x_test, y_test = datasets.digits()
  assert x_train.shape == (1438, 8, 8) and x_test.shape == (359, 8, 8)
  assert y_train.shape == (1438,) and y_test.shape == (359,)
  assert x_train.dtype is tgfn.float32 and y_train.dtype is tgfn.int32
  for x, y in ((x_train.numpy(), y_train.numpy()), (x_test.numpy(), y_test.numpy())):
    assert x.min() == 0.0 and x.max() == 1.0
    assert sorted(set(y.tolist())) == list(range(10))  # every class on both sides of the split
  again = datasets.digits()  # the split is fixed
  np.testing.assert_array_equal(again[3].numpy(), y_test.numpy())


def test_digits_without_sklearn_says_how_to_install(monkeypatch) -> None:
  monkeypatch.setitem(sys.modules, "sklearn.datasets", None)  # makes the import fail
  with pytest.raises(ImportError, match=r"pip install -e '\.\[examples\]'"):
    datasets.digits()
