"""`tgfn.lax`: JAX's lax surface, composed from tgfn's primitives (see docs/lax-primitives.md)."""
from tgfn.lax.primitives import *  # noqa: F401,F403
from tgfn.lax.conv import *  # noqa: F401,F403
from tgfn.lax.special import *  # noqa: F401,F403
from tgfn.lax.slicing import *  # noqa: F401,F403
