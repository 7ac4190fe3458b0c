"""tgfn.lax: structured control flow (and, from other modules, lax primitives). Re-exports only."""
from tgfn.lax.control_flow import associative_scan, cond, fori_loop, map, scan, switch, while_loop  # noqa: F401,A004
