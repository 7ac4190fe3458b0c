"""tgfn: JAX-style function transforms on a tinygrad-style compiler. See README.md and docs/."""
from tgfn import numpy  # noqa: F401
from tgfn.array import Array, device_put  # noqa: F401
from tgfn.device import Device, wait_for_optimized_kernels  # noqa: F401
from tgfn.dtype import DType, dtypes  # noqa: F401
from tgfn import helpers  # noqa: F401
from tgfn.helpers import Context, settings  # noqa: F401

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
from tgfn.instances import device_count, devices, local_device_count, local_devices  # noqa: F401,E402
from tgfn import distributed  # noqa: F401,E402
from tgfn.distributed import process_count, process_index  # noqa: F401,E402
from tgfn import sharding  # noqa: F401,E402
from tgfn.transforms.shard_map import shard_map  # noqa: F401,E402
from tgfn.transforms.pmap import pmap  # noqa: F401,E402
from tgfn import config  # noqa: F401,E402
if settings.SOURCE_LINES:  # every node remembers the user's line that built it (errors, DEBUG_NANS and VIZ name it)
  from tgfn.viz.locations import turn_on as _remember_lines
  _remember_lines()
if settings.VIZ:  # VIZ=1: record everything and serve the page (tgfn/viz/)
  from tgfn.viz import enable as _enable_viz
  _enable_viz()


def backends() -> list:
  """The backends tgfn knows (CPU, PYTHON, LLVM, OPENCL, CUDA): whether each can run here, and if not why and
  what to install (tgfn_drivers.Backend records). `DEV=<name>` selects one."""
  from tgfn_drivers import backends as known
  return known()


def __getattr__(name: str) -> object:
  # tgfn.nn and tgfn.scipy load on first use, as jax.nn and jax.scipy are there after `import jax`
  if name in ("nn", "scipy"):
    import importlib
    return importlib.import_module(f"tgfn.{name}")
  raise AttributeError(f"module 'tgfn' has no attribute {name!r}")
