"""Programs the MPI tests start under mpirun (python tests/distributed/mpi_program.py <case>)."""
import os
import sys

import tgfn
import tgfn.numpy as tnp
from tgfn import lax


def main(case: str) -> int:
  tgfn.distributed.initialize()
  me = tgfn.process_index()
  psum = tgfn.pmap(lambda v: lax.psum(v, "i"), "i")
  if case == "collectives":  # each process maps over its devices; the axis spans both processes
    n = tgfn.local_device_count()
    x = tnp.arange(n * 3, dtype=tnp.float32).reshape(n, 3) + 100 * me
    total = psum(x).numpy()
    index = tgfn.pmap(lambda v: v * 0 + lax.axis_index("i"), "i")(x).numpy()[:, 0]
    gathered = tgfn.pmap(lambda v: lax.all_gather(v, "i"), "i")(x).numpy()
    # vmap over a batch of such inputs: the batch axis stays in front of what the processes gather
    batch = tnp.stack([x, 2 * x])
    each = tgfn.vmap(tgfn.pmap(lambda v: lax.all_gather(v, "i"), "i"))(batch).numpy()
    vmap_ok = bool((each[1] == 2 * each[0]).all() and (each[0] == gathered).all())
    print(f"process {me}: psum {total[0].tolist()} index {index.tolist()} gathered {gathered.shape} vmap {vmap_ok}",
          flush=True)
    return 0
  if case == "grads":  # derivatives through collectives that span the processes: every one is 8x
    n = tgfn.local_device_count()  # 2 members per process, 4 in all; each derivative below is 8 x
    x = tnp.arange(n * 3, dtype=tnp.float32).reshape(n, 3) / 10 + me
    outside_psum = tgfn.grad(lambda x: psum(x * x).sum())(x)
    gathered = tgfn.pmap(lambda v: lax.all_gather(v, "i"), "i")
    outside_gather = tgfn.grad(lambda x: (gathered(x) ** 2).sum())(x)
    inside_gather = tgfn.pmap(tgfn.grad(lambda v: (lax.all_gather(v, "i") ** 2).sum()), "i")(x)
    errors = {name: float(tnp.abs(g - 8 * x).max()) for name, g in
              (("psum", outside_psum), ("all_gather", outside_gather), ("all_gather inside", inside_gather))}
    # pmax: the derivative of the 4 members' results goes to the member holding the maximum (process 1's last)
    top = tgfn.grad(lambda x: tgfn.pmap(lambda v: lax.pmax(v, "i"), "i")(x).sum())(x).numpy()
    want_top = [[0.0] * 3] * (n - 1) + [[4.0 * me] * 3]
    # forward mode: the tangent of each member's psum of x * x is the sum over all 4 members of 2 x t
    _, tangent = tgfn.jvp(lambda x: psum(x * x), (x,), (tnp.ones_like(x),))
    errors["psum jvp"] = float(tnp.abs(tangent[0] - 2 * (psum(x)[0])).max())
    print(f"process {me}: errors {errors} pmax {top.tolist() == want_top}", flush=True)
    return 0
  if case == "mismatch":  # the processes bring different shapes
    try:
      psum(tnp.ones((1, 2 + me))).numpy()
    except ValueError as e:
      print(f"process {me}: ValueError: {e}", flush=True)
      return 3
    return 0
  if case == "dies":  # process 1 leaves before the collective
    if me == 1: os._exit(0)
    psum(tnp.ones((1, 2))).numpy()
    return 0
  raise SystemExit(f"unknown case {case}")


if __name__ == "__main__":
  sys.exit(main(sys.argv[1]))
