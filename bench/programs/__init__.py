"""Ordinary research programs written once against JAX's API and run on JAX or tgfn by passing the module:
each program module has `CONFIG` and `build(jax, cfg) -> Program`. See bench/real_programs.py."""
