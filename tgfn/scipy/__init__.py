"""`tgfn.scipy`: the parts of `jax.scipy` tgfn has: `special`, `stats.norm` and `linalg`. See docs/scipy.md."""
from tgfn.scipy import linalg, special, stats  # noqa: F401
