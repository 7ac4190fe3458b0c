import numpy as np

import tgfn.numpy as tnp
from tests.conftest import assert_close


def test_fused_sum_matches_numpy(device):
  a = np.arange(12, dtype=np.float32).reshape(3, 4)
  x = tnp.array(a)
  assert_close((x * x + 1).sum(1), (a * a + 1).sum(1))
  assert x.device == device
