"""Per-call time of an embedding lookup: 8 rows of a 50,000 x 64 float32 table, jitted, result ready.

  gather    tgfn.jit(lambda t, i: t[i]): one kernel that loads each id and copies its row (GATHER)
  one-hot   the formulation tgfn used before GATHER, written out: compare the ids with arange(50,000)
            and sum the matching rows, O(ids x rows x features) work
  numpy     t[i]

Method: one process; warm-up calls (which compile), then interleaved rounds, MEDIAN per call.
Not part of run_all.py. Run: python bench/embedding_lookup.py [--quick]
"""
import common  # noqa: F401  (first: removes OPENBLAS_* before numpy is imported)

import argparse

import numpy as np

from common import interleave, machine_info

ROWS, FEATURES = 50_000, 64
IDS = np.array([0, 7, 49_999, 123, 4_096, 3, 3, 31_000], np.int32)


def main():
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--quick", action="store_true")
  args = ap.parse_args()
  import tgfn
  import tgfn.numpy as tnp
  print(machine_info())
  table_np = np.random.default_rng(0).standard_normal((ROWS, FEATURES)).astype(np.float32)
  table, ids = tnp.array(table_np).realize(), tnp.array(IDS).realize()
  rows = tnp.arange(ROWS, dtype=tnp.int32).realize()
  gather = tgfn.jit(lambda t, i: t[i])
  one_hot = tgfn.jit(lambda t, i, r: tnp.where((i[:, None] == r)[:, :, None], t[None], 0.0).sum(1))
  calls = {"gather": lambda: gather(table, ids).block_until_ready(),
           "one-hot": lambda: one_hot(table, ids, rows).block_until_ready(),
           "numpy": lambda: table_np[IDS]}
  for name, fn in calls.items():
    if not np.array_equal(np.asarray(fn()), table_np[IDS]): raise SystemExit(f"{name} gave a wrong result")
  rounds, reps, seconds = (2, 20, 0.2) if args.quick else (5, 200, 1.0)
  for name, t in interleave(calls, rounds, reps, seconds, warmup=3).items():
    print(f"{name:8s} {t if isinstance(t, str) else f'{t.median / 1e3:10.1f} µs  (p10 {t.p10 / 1e3:.1f}, p90 {t.p90 / 1e3:.1f}, n={t.n})'}")


if __name__ == "__main__":
  main()
