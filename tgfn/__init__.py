"""tgfn: JAX-style function transforms on a tinygrad-style compiler. See README.md and docs/."""
from tgfn import numpy  # noqa: F401
from tgfn.array import Array, device_put  # noqa: F401
from tgfn.device import Device  # noqa: F401
from tgfn.dtype import DType, dtypes  # noqa: F401

bool_ = dtypes.bool
int8, int16, int32, int64 = dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64
uint8, uint16, uint32, uint64 = dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64
float16, bfloat16, float32, float64 = dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64
