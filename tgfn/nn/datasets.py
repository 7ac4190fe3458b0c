"""Small datasets for examples and tests, as tgfn Arrays: images are float32 in [0, 1] with shape
(n, height, width), labels int32 with shape (n,). Each loader returns (x_train, y_train, x_test, y_test).

- `digits()`: the 8x8 handwritten digits that ship inside scikit-learn (no download; scikit-learn is an
  optional dependency: `pip install -e '.[examples]'`).
- `mnist(path)`: MNIST (or a drop-in like Fashion-MNIST) from the four IDX files in a local folder.
"""
from __future__ import annotations

import gzip
import math
import os
import zlib
from pathlib import Path
from typing import Union

import numpy as np

import tgfn.numpy as tnp
from tgfn.array import Array

Split = tuple[Array, Array, Array, Array]


def _as_arrays(x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray, y_test: np.ndarray,
               scale: float) -> Split:
  def images(x: np.ndarray) -> Array: return tnp.asarray((x / scale).astype(np.float32))
  def labels(y: np.ndarray) -> Array: return tnp.asarray(y.astype(np.int32))
  return images(x_train), labels(y_train), images(x_test), labels(y_test)


def digits() -> Split:
  """scikit-learn's 1797 8x8 digit images (pixels 0..16, scaled here to [0, 1]) and their labels 0..9.

  The split is fixed: a permutation drawn with NumPy's generator from seed 0 puts 359 samples (20%) in
  the test set and 1438 in the training set. A shuffled split, not the last 20%: the samples are
  ordered by writer, so a tail split would test on unseen writers only. Raises ImportError naming the
  install command if scikit-learn is missing."""
  try:
    from sklearn.datasets import load_digits
  except ImportError as e:
    raise ImportError("tgfn.nn.datasets.digits() reads the digits that ship with scikit-learn, which is not "
                      "installed: pip install -e '.[examples]' (or pip install scikit-learn)") from e
  data = load_digits()
  n_train = len(data.target) - len(data.target) // 5
  order = np.random.default_rng(0).permutation(len(data.target))
  x, y = data.images[order], data.target[order]
  return _as_arrays(x[:n_train], y[:n_train], x[n_train:], y[n_train:], scale=16.0)


# IDX: a 4-byte magic (two zero bytes, a type code, the number of dimensions), one big-endian uint32 per
# dimension, then the values in row-major order. MNIST uses unsigned bytes (type code 0x08).
_UBYTE = 0x08
_MNIST_FILES = {"train_images": ("train-images-idx3-ubyte", 3),
                "train_labels": ("train-labels-idx1-ubyte", 1),
                "test_images": ("t10k-images-idx3-ubyte", 3),
                "test_labels": ("t10k-labels-idx1-ubyte", 1)}


def _read_idx(path: Path, ndim: int) -> np.ndarray:
  """The uint8 array in the IDX file `path` (gzip-compressed if it ends in .gz), which must have `ndim`
  dimensions; raises ValueError if the magic number or the size does not match."""
  raw = path.read_bytes()
  if path.suffix == ".gz":
    try:
      raw = gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as e:  # not gzip, truncated, or corrupted
      raise ValueError(f"{path}: not a valid gzip file: {e}") from None
  magic = bytes([0, 0, _UBYTE, ndim])
  if raw[:4] != magic:
    raise ValueError(f"{path}: not an idx{ndim}-ubyte file: magic number {raw[:4].hex()}, "
                     f"expected {magic.hex()}")
  head = 4 + 4 * ndim
  if len(raw) < head: raise ValueError(f"{path}: {len(raw)} bytes is too short for an idx{ndim} header")
  shape = tuple(int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim))
  if len(raw) - head != math.prod(shape):
    raise ValueError(f"{path}: the header gives shape {shape}, {math.prod(shape)} bytes of data, "
                     f"but the file holds {len(raw) - head}")
  return np.frombuffer(raw, np.uint8, offset=head).reshape(shape)


def _find(folder: Path, stem: str) -> Path:
  for name in (stem, stem + ".gz"):
    if (folder / name).is_file(): return folder / name
  raise FileNotFoundError(f"{folder}: no {stem} or {stem}.gz (mnist() needs the four standard IDX files: "
                          f"{', '.join(s for s, _ in _MNIST_FILES.values())}, each optionally .gz)")


def mnist(path: Union[str, os.PathLike]) -> Split:
  """MNIST from the folder `path`, which holds train-images-idx3-ubyte, train-labels-idx1-ubyte,
  t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte, each plain or gzipped (`.gz`; the plain file wins if
  both exist). Nothing is downloaded. Pixels 0..255 are scaled to [0, 1]; images keep their IDX shape
  (n, 28, 28 for MNIST). Raises FileNotFoundError for a missing file and ValueError for a bad magic
  number, a size that does not match the header, or image and label counts that differ."""
  folder = Path(path)
  arrays = {key: _read_idx(_find(folder, stem), ndim) for key, (stem, ndim) in _MNIST_FILES.items()}
  for split in ("train", "test"):
    images, labels = arrays[f"{split}_images"], arrays[f"{split}_labels"]
    if len(images) != len(labels):
      raise ValueError(f"{folder}: the {split} set has {len(images)} images but {len(labels)} labels")
  return _as_arrays(arrays["train_images"], arrays["train_labels"], arrays["test_images"],
                    arrays["test_labels"], scale=255.0)
