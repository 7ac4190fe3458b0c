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
    print(f"process {me}: psum {total[0].tolist()} index {index.tolist()} gathered {gathered.shape}", flush=True)
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
