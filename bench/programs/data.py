"""The 8x8 digits (shipped with scikit-learn) as float32 pixels in [0, 1] and int32 labels; a random
stand-in of the same shape where scikit-learn is absent (timings do not depend on the pixel values)."""
import numpy as np


def digits() -> tuple[np.ndarray, np.ndarray]:
  try:
    from sklearn.datasets import load_digits
  except ImportError:
    rng = np.random.default_rng(0)
    return rng.random((1797, 64), dtype=np.float32), rng.integers(0, 10, 1797).astype(np.int32)
  d = load_digits()
  return (d.data / 16.0).astype(np.float32), d.target.astype(np.int32)


def batches(x: np.ndarray, size: int, seed: int = 0):
  """i -> the i-th of 64 fixed random batches of rows of x."""
  idx = np.random.default_rng(seed).integers(0, len(x), size=(64, size))
  return lambda i: x[idx[i % len(idx)]]
