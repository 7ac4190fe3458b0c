"""`import tgfn.numpy as tnp`: the jax.numpy-shaped function surface. Every function returns a lazy
`Array`; see docs/numpy.md for what differs from NumPy and JAX."""
from tgfn.array import Array as ndarray  # noqa: F401
from tgfn.dtype import dtypes as _dtypes
from tgfn.ops.creation import *  # noqa: F401,F403
from tgfn.ops.elementwise import *  # noqa: F401,F403
from tgfn.ops.indexing import *  # noqa: F401,F403
from tgfn.ops.linalg import *  # noqa: F401,F403
from tgfn.ops.reduction import *  # noqa: F401,F403
from tgfn.ops.shape import *  # noqa: F401,F403
from tgfn.dtype import result_type, to_dtype as dtype  # noqa: F401
# breadth composed from the modules above (the lax/surface issue)
from tgfn.ops.math_extra import *  # noqa: F401,F403
from tgfn.ops.sorting import *  # noqa: F401,F403
from tgfn.ops.reduction_extra import *  # noqa: F401,F403
from tgfn.ops.arrays_extra import *  # noqa: F401,F403
from tgfn.ops import fft, linalg_decomp as linalg  # noqa: F401  (tnp.fft, tnp.linalg)
from tgfn.ops.linalg_decomp import cross  # noqa: F401

bool_ = _dtypes.bool
int8, int16, int32, int64 = _dtypes.int8, _dtypes.int16, _dtypes.int32, _dtypes.int64
uint8, uint16, uint32, uint64 = _dtypes.uint8, _dtypes.uint16, _dtypes.uint32, _dtypes.uint64
float16, bfloat16, float32, float64 = _dtypes.float16, _dtypes.bfloat16, _dtypes.float32, _dtypes.float64
pi, e, inf, nan = 3.141592653589793, 2.718281828459045, float("inf"), float("nan")
newaxis = None

# the Python array API standard's surface and NumPy's dtype limits (tgfn/ops/dtype_info.py, array_api.py)
from tgfn.ops.dtype_info import *  # noqa: F401,F403,E402
from tgfn.ops.array_api import *  # noqa: F401,F403,E402
from tgfn.ops.array_api import __array_namespace_info__  # noqa: F401,E402
from tgfn.ops.complex_math import *  # noqa: F401,F403,E402  (after array_api: its real/imag/conj are these)
__array_api_version__ = "2024.12"
