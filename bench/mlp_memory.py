"""Peak memory of the jitted MLP training step of bench/mlp_step.py, tgfn vs JAX.

(a) The plan, exact, without running. For tgfn, from the CompiledGraph of
    `tgfn.jit(step, donate_argnums=0).lower(params, x, y).graph`:
      inputs         the input slots (`graph.slots[:graph.n_inputs]`): parameters and batch
      constants      Buffers in `graph.fixed` that no kernel writes (captured constants)
      intermediates  Buffers in `graph.fixed` that a kernel writes, counted once per unique Buffer
                     object (the planner lets intermediates whose lifetimes do not overlap share one);
                     also shown: what they would take with one buffer each
      outputs        the output slots, split into those that take over a donated input's memory
                     (`graph.donation`) and those allocated fresh on every call
      planned peak   inputs + constants + intermediates + fresh outputs: every byte a call can touch
    For JAX, the same step's `jax.jit(...).lower(...).compile().memory_analysis()`: arguments,
    temporaries (XLA's buffer assignment), outputs, and the bytes of outputs aliased to donated
    arguments; planned peak = arguments + temporaries + outputs - aliased.

(b) Measured: process peak RSS growth while running the step. Each framework runs in its OWN
    subprocess (so neither sees the other's memory, and imports are paid before the baseline):
      baseline       ru_maxrss (resource.getrusage(RUSAGE_SELF)) right after importing the framework
                     and creating the parameters and the batch as framework arrays. Just before it the
                     peak is reset (5 > /proc/self/clear_refs, Linux >= 4.0) where possible: otherwise
                     it still holds the import's transient peak and, since exec keeps it, the RSS of
                     the parent that started the worker -- which would hide the growth. The workers are
                     also started before the parent imports tgfn or JAX, to keep that parent small.
                     Before the baseline, garbage is collected and glibc's malloc_trim(0) returns freed
                     heap pages, so that memory freed while creating the data is not silently reused.
      warm-up        ru_maxrss after the first step (trace + compile + run) and `--steps` more,
                     minus the baseline. This includes the compiler's own memory (large for XLA),
                     and Python objects the trace and the compiled graph keep.
      steady state   where the kernel allows it (Linux >= 4.0): after the warm-up the peak is reset by
                     writing 5 to /proc/self/clear_refs, `--steps` more steps run, and the reported
                     figure is VmHWM minus VmRSS just before those steps: the extra memory a step
                     needs once everything is compiled (freed heap memory is trimmed first, so that
                     per-call temporaries count even if the allocator would recycle them). Memory a
                     framework keeps allocated between calls (tgfn's planned intermediates) is not
                     in this figure but in the warm-up one and in "RSS held after the run".
    RSS counts pages touched, at 4 KiB granularity, of everything in the process; numbers under a
    few hundred KiB are noise.

Run: python bench/mlp_memory.py [--steps 3]
"""
import common  # noqa: F401  (first: removes OPENBLAS_* before numpy is imported)

import argparse
import ctypes
import gc
import json
import resource
import subprocess
import sys


from common import import_peer, machine_info
from mlp_step import JaxRunner, TgfnRunner, make_problem

MiB = 1024 * 1024


def fmt(nbytes: float) -> str: return f"{nbytes / MiB:.2f} MiB" if nbytes >= MiB else f"{nbytes / 1024:.1f} KiB"


# -------------------------------------------------------------------------------------------- (a) plan

def tgfn_plan() -> dict:
  P, X, Y = make_problem()
  r = TgfnRunner(P, X, Y)
  g = r.jstep.lower(r.p, r.x, r.y).graph
  nbytes = lambda s: g.slots[s].size * g.slots[s].dtype.itemsize  # noqa: E731
  n_params = len(P)
  written = {step.slots[0] for step in g.steps}
  inter_slots = [s for s in g.fixed if s in written]
  const_slots = [s for s in g.fixed if s not in written]
  unique_inter = {id(g.fixed[s]): g.fixed[s] for s in inter_slots}
  unique_const = {id(g.fixed[s]): g.fixed[s] for s in const_slots}
  outs = list(dict.fromkeys(g.output_slots))
  donated = [s for s in outs if s in g.donation]
  fresh = [s for s in outs if s >= g.n_inputs and s not in g.fixed and s not in g.donation]
  plan = {
    "params": sum(nbytes(s) for s in range(n_params)),
    "batch": sum(nbytes(s) for s in range(n_params, g.n_inputs)),
    "constants": sum(b.nbytes for b in unique_const.values()),
    "intermediates": sum(b.nbytes for b in unique_inter.values()),
    "intermediates_unshared": sum(nbytes(s) for s in inter_slots),
    "n_intermediate_slots": len(inter_slots), "n_intermediate_buffers": len(unique_inter),
    "outputs": sum(nbytes(s) for s in outs),
    "outputs_donated": sum(nbytes(s) for s in donated), "n_outputs_donated": len(donated),
    "outputs_fresh": sum(nbytes(s) for s in fresh), "n_outputs_fresh": len(fresh), "n_outputs": len(outs),
    "kernels": len(g.kernels),
  }
  # which parameters were not donated (their update allocates fresh memory every call)
  names = sorted(P)  # dict leaves flatten by sorted key
  donors = set(g.donation.values())
  plan["not_donated"] = [names[i] for i in range(n_params) if i not in donors]
  plan["peak"] = plan["params"] + plan["batch"] + plan["constants"] + plan["intermediates"] + plan["outputs_fresh"]
  return plan


def jax_plan() -> dict:
  P, X, Y = make_problem()
  r = JaxRunner(P, X, Y)
  m = r.jstep.lower(r.state, r.x, r.y).compile().memory_analysis()
  if m is None: return {}
  out = {"arguments": m.argument_size_in_bytes, "temporaries": m.temp_size_in_bytes,
         "outputs": m.output_size_in_bytes, "aliased": m.alias_size_in_bytes}
  out["peak"] = out["arguments"] + out["temporaries"] + out["outputs"] - out["aliased"]
  return out


# ------------------------------------------------------------------------------------ (b) RSS worker

def _status_kib() -> dict:
  d = {}
  try:
    with open("/proc/self/status") as f:
      for line in f:
        if line.startswith(("VmRSS:", "VmHWM:")):
          k, v = line.split(":")
          d[k] = int(v.split()[0])
  except OSError:
    pass
  return d


def _maxrss_kib() -> int:
  m = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
  return m // 1024 if sys.platform == "darwin" else m  # bytes on macOS, KiB on Linux


def _release_free_memory() -> None:
  """Collect garbage and hand freed heap memory back to the OS (glibc malloc_trim), so pages freed before
  the baseline are not silently reused afterwards, which would hide growth."""
  gc.collect()
  try:
    ctypes.CDLL(None).malloc_trim(0)
  except (OSError, AttributeError):
    pass


def _reset_peak() -> bool:
  try:
    with open("/proc/self/clear_refs", "w") as f: f.write("5")
    return True
  except OSError:
    return False


def rss_worker(name: str, steps: int) -> None:
  mod, desc = import_peer(name)
  if mod is None:
    print(json.dumps({"skip": desc}))
    return
  P, X, Y = make_problem()
  r = {"tgfn": TgfnRunner, "jax": JaxRunner}[name](P, X, Y)
  if name == "tgfn":
    for v in [*r.p.values(), r.x, r.y]: v.block_until_ready()
  else:
    r.jax.block_until_ready((r.state, r.x, r.y))
  del P, X, Y
  _release_free_memory()
  # Start the peak from here: without the reset, ru_maxrss would still hold the import's transient peak
  # (and, on Linux, the parent's RSS at the time it started this process).
  reset = _reset_peak()
  base = _maxrss_kib()
  rss0 = _status_kib().get("VmRSS")
  for _ in range(1 + steps): r.step()
  warm = _maxrss_kib()
  res = {"desc": desc, "reset_at_baseline": reset, "baseline_maxrss_kib": base, "baseline_rss_kib": rss0, "warm_maxrss_kib": warm,
         "steps": steps}
  _release_free_memory()  # memory the warm-up freed must be touched anew to count
  if _reset_peak():
    before = _status_kib()["VmRSS"]
    for _ in range(steps): r.step()
    st = _status_kib()
    res.update(steady_before_rss_kib=before, steady_hwm_kib=st["VmHWM"], steady_after_rss_kib=st["VmRSS"])
  res["loss"] = r.last_loss()
  print(json.dumps(res))


def run_worker(name: str, steps: int) -> dict:
  try:
    out = subprocess.run([sys.executable, __file__, "--worker", name, "--steps", str(steps)],
                         capture_output=True, text=True, timeout=600)
  except subprocess.TimeoutExpired:
    return {"skip": "worker timed out after 600 s"}
  lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
  if out.returncode != 0 or not lines:
    tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
    return {"skip": f"worker failed (rc {out.returncode}): {tail[:200]}"}
  return json.loads(lines[-1])


# ----------------------------------------------------------------------------------------------- main

def main():
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--steps", type=int, default=3, help="steps after the first (and again for steady state)")
  ap.add_argument("--worker", choices=["tgfn", "jax"], help=argparse.SUPPRESS)
  args = ap.parse_args()
  if args.worker: return rss_worker(args.worker, args.steps)

  print("mlp_memory: peak memory of the jitted 784-512-512-10 MLP SGD step (batch 256, float32, params donated)")
  print(machine_info())

  # (b) first, while this process is small (a worker's ru_maxrss starts at least at its parent's RSS)
  res = {name: run_worker(name, args.steps) for name in ("tgfn", "jax")}

  print("\n(a) planned memory, from the compiled graph (exact; nothing run)")
  t = tgfn_plan()
  print(f"  tgfn: {t['kernels']} kernels; {t['n_intermediate_slots']} intermediate values in "
        f"{t['n_intermediate_buffers']} buffers; {t['n_outputs']} outputs, {t['n_outputs_donated']} in donated "
        f"memory, {t['n_outputs_fresh']} fresh per call")
  if t["not_donated"]: print(f"  tgfn: parameters whose memory was not reused for their update: {', '.join(t['not_donated'])}")
  jax, jdesc = import_peer("jax")
  j = jax_plan() if jax is not None else {}
  rows = [
    ("parameters + batch (arguments)", t["params"] + t["batch"], j.get("arguments")),
    ("  of which parameters", t["params"], None),
    ("  of which batch (x, one-hot y)", t["batch"], None),
    ("captured constants", t["constants"], None),
    ("intermediates / temporaries", t["intermediates"], j.get("temporaries")),
    ("  tgfn, one buffer per value", t["intermediates_unshared"], None),
    ("outputs (new params + loss)", t["outputs"], j.get("outputs")),
    ("  in donated input memory", t["outputs_donated"], j.get("aliased")),
    ("  allocated fresh per call", t["outputs_fresh"], None if not j else j["outputs"] - j["aliased"]),
    ("planned peak", t["peak"], j.get("peak")),
  ]
  print(f"  {'':<34} {'tgfn':>12} {'jax':>12}")
  for label, a, b in rows:
    print(f"  {label:<34} {fmt(a):>12} {fmt(b) if b is not None else '':>12}")
  if jax is None: print(f"  jax: skipped: {jdesc}")
  print("  (tgfn: CompiledGraph slots/fixed/donation; jax: compiled.memory_analysis())")

  print(f"\n(b) measured peak RSS growth, each framework in its own subprocess ({1 + args.steps} steps, then "
        f"{args.steps} more after a peak reset)")
  kib = lambda v: f"{v / 1024:.1f} MiB" if v is not None else "n/a"  # noqa: E731
  lines = [
    ("RSS after import + params + batch", lambda r: r.get("baseline_rss_kib")),
    ("peak RSS at that point (ru_maxrss)", lambda r: r.get("baseline_maxrss_kib")),
    ("peak reset at baseline", lambda r: r.get("reset_at_baseline")),
    ("peak growth through warm-up", lambda r: r["warm_maxrss_kib"] - r["baseline_maxrss_kib"]),
    ("  (compile + first steps; ru_maxrss)", None),
    ("steady-state step peak over RSS", lambda r: r["steady_hwm_kib"] - r["steady_before_rss_kib"]
     if "steady_hwm_kib" in r else None),
    ("  (after peak reset; VmHWM - VmRSS)", None),
    ("RSS held after the run - baseline RSS", lambda r: r["steady_after_rss_kib"] - r["baseline_rss_kib"]
     if "steady_after_rss_kib" in r else None),
  ]
  print(f"  {'':<38} {'tgfn':>12} {'jax':>12}")
  for label, f in lines:
    cells = ["" if f is None else "skipped" if "skip" in r else str(f(r)).lower() if isinstance(f(r), bool)
             else kib(f(r)) for r in res.values()]
    print(f"  {label:<38} {cells[0]:>12} {cells[1]:>12}")
  for name, r in res.items():
    if "skip" in r: print(f"  {name}: skipped: {r['skip']}")
    else: print(f"  {name}: {r['desc']}; loss after the run {r['loss']:.5f}")


if __name__ == "__main__":
  main()
