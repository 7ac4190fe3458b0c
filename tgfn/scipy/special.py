"""`tgfn.scipy.special`: the functions live in tgfn/ops/special.py (composed from IR ops; see there and
docs/scipy.md for the methods and the measured accuracy)."""
from tgfn.ops.special import *  # noqa: F401,F403
from tgfn.ops.special import __all__  # noqa: F401
