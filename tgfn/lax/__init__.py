"""`tgfn.lax`: JAX's lax surface. Structured control flow (control_flow.py, over the sub-graph nodes of
tgfn/uop/body.py, docs/lax.md) and primitives composed from tgfn's own (docs/lax-primitives.md).
Re-exports only."""
from tgfn.lax.control_flow import associative_scan, cond, fori_loop, map, scan, switch, while_loop  # noqa: F401,A004
from tgfn.lax.primitives import *  # noqa: F401,F403
from tgfn.lax.conv import *  # noqa: F401,F403
from tgfn.lax.special import *  # noqa: F401,F403
from tgfn.lax.slicing import *  # noqa: F401,F403
from tgfn.lax.collectives import *  # noqa: F401,F403,E402


from tgfn.viz.locations import name_the_user_line_in  # noqa: E402  (last: wraps what is defined above)
name_the_user_line_in(globals())
