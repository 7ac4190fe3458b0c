"""Programs the MPI tests start under mpirun (python tests/distributed/mpi_program.py <case>)."""
import os
import sys

import numpy as np

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
  if case == "exact":  # every dtype crosses the processes unchanged: no detour through another dtype
    print(f"process {me}: inexact {_inexact_collectives(me)}", flush=True)
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


def _members(dtype: str) -> np.ndarray:
  """One row per member of the 4 (2 per process): values at the edge of what the dtype holds exactly."""
  m = np.arange(4)[:, None]
  if dtype == "bool": return np.concatenate([m % 2 == 0, m < 0], axis=1)
  if np.dtype(dtype).kind in "iu":  # near a quarter of the largest value, where float64 is 512 apart (int64)
    info = np.iinfo(dtype)
    return np.concatenate([info.max // 4 - 2 * m - 1, info.min // 4 + 3 * m + 1], axis=1).astype(dtype)
  if dtype == "complex64": return (np.concatenate([m, -m], axis=1) + 1j * (2 ** 20 + m)).astype(dtype)
  return np.concatenate([2.0 ** 5 + m, -(2.0 ** 4) - m], axis=1)  # sums that float16 and bfloat16 hold exactly


def _inexact_collectives(me: int) -> list[str]:
  """The (dtype, collective) pairs whose result across the processes differs from NumPy's, or that fail."""
  wide = {"b": "int64", "i": "int64", "u": "uint64", "f": "float64", "c": "complex128"}  # (a bool's byte 0 or 1)
  bad = []
  for dtype in ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
                "bfloat16", "float32", "float64", "complex64"):
    members = _members(dtype if dtype != "bfloat16" else "float32")  # (NumPy has no bfloat16)
    exact = members.astype(wide[members.dtype.kind])
    x = tnp.asarray(members[2 * me:2 * me + 2].astype(exact.dtype)).astype(dtype)
    wants = {"psum": exact.max(0) if dtype == "bool" else members.sum(0, dtype=members.dtype).astype(exact.dtype),
             "all_gather": exact}
    if dtype != "complex64": wants.update(pmax=exact.max(0), pmin=exact.min(0))
    for name, want in wants.items():
      try:
        got = tgfn.pmap(lambda v: getattr(lax, name)(v, "i"), "i")(x).astype(exact.dtype).numpy()
        if got.dtype != want.dtype or not (got == want).all(): bad.append(f"{dtype} {name}: {got[0].tolist()}")
      except Exception as e:  # noqa: BLE001 (listed, so every dtype is tried)
        bad.append(f"{dtype} {name}: {type(e).__name__}: {e}")
  return bad


if __name__ == "__main__":
  sys.exit(main(sys.argv[1]))
