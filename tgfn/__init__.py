"""tgfn: JAX-style function transforms on a tinygrad-style compiler. See README.md and docs/."""
from tgfn import numpy  # noqa: F401
from tgfn.array import Array, device_put  # noqa: F401
from tgfn.device import Device  # noqa: F401
from tgfn.dtype import DType, dtypes  # noqa: F401

bool_ = dtypes.bool
int8, int16, int32, int64 = dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64
uint8, uint16, uint32, uint64 = dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64
float16, bfloat16, float32, float64 = dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64
from tgfn import tree, tree_util  # noqa: F401,E402
from tgfn.transforms.api import (grad, hessian, jacfwd, jacrev, jvp, linearize, stop_gradient,  # noqa: F401,E402
                                 value_and_grad, vjp, vmap)
from tgfn.transforms.custom import custom_jvp, custom_vjp  # noqa: F401,E402
from tgfn.transforms.trace import ConcretizationError  # noqa: F401,E402
from tgfn.transforms.jit import jit  # noqa: F401,E402
from tgfn.transforms.jaxpr import make_jaxpr  # noqa: F401,E402
from tgfn.transforms.shapes import ShapeDtypeStruct, block_until_ready, eval_shape  # noqa: F401,E402
from tgfn.tensor import Tensor  # noqa: F401,E402
from tgfn import random  # noqa: F401,E402
from tgfn import lax  # noqa: F401,E402
from tgfn.transforms.checkpoint import checkpoint, checkpoint_name, checkpoint_policies, remat  # noqa: F401,E402


def __getattr__(name: str) -> object:
  # tgfn.nn and tgfn.scipy load on first use, as jax.nn and jax.scipy are there after `import jax`
  if name in ("nn", "scipy"):
    import importlib
    return importlib.import_module(f"tgfn.{name}")
  raise AttributeError(f"module 'tgfn' has no attribute {name!r}")
