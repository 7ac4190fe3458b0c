"""Process replay: capture every kernel a fixed corpus compiles (its AST and generated source), and list
the kernels whose source changed between two trees. See docs/process-replay.md.

  python -m tgfn.tools.process_replay capture OUT [--corpus quick|tests] [--ref GITREF]
  python -m tgfn.tools.process_replay compare OUT [--ref GITREF] [--diff]

Only the standard library is imported at the top: this file also runs as a script inside another
tree's checkout (`exec`), where `tgfn` is that tree's package."""
from __future__ import annotations

import argparse
import difflib
import json
import os
import pickle
import runpy
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator

ENV = "TGFN_CAPTURE"
_PYTEST = ["-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "-p", "no:randomly",
           "--hypothesis-seed=0"]
# each entry: python arguments; test paths are relative to the tree's root
CORPORA: dict[str, list[list[str]]] = {
  "quick": [["-m", "tgfn.demo"],
            ["-m", "tgfn.train_digits", "--steps", "3", "--epochs", "1"],
            _PYTEST + ["tests/engine/test_fusion.py", "tests/ops/test_smoke.py"]],
}
CORPORA["tests"] = CORPORA["quick"][:2] + [_PYTEST + ["tests/ops", "tests/engine", "tests/codegen", "tests/transforms",
                                                     "tests/nn", "tests/test_tensor.py"]]


# ---- recording (called from tgfn/engine/realize.py's compile_kernel when TGFN_CAPTURE is set)
def canonical_ast(ast: Any) -> str:
  """One line per node in topological order: op, dtype, arg and source numbers. Equal for equal ASTs,
  and readable by any tree whose UOps have op/dtype/src/arg, so captures of two trees compare on it."""
  order: list[Any] = []
  seen: set[int] = set()
  stack: list[tuple[Any, bool]] = [(ast, False)]
  while stack:  # iterative post-order: kernel ASTs can be deep
    node, expanded = stack.pop()
    if id(node) in seen: continue
    if expanded:
      seen.add(id(node))
      order.append(node)
      continue
    stack.append((node, True))
    stack.extend((s, False) for s in reversed(node.src) if id(s) not in seen)
  number = {id(n): i for i, n in enumerate(order)}
  return "\n".join(f"{number[id(n)]} {n.op.name} {getattr(n.dtype, 'name', n.dtype)} {n.arg!r} "
                   f"{[number[id(s)] for s in n.src]}" for n in order)


def record(device: str, kernel: Any, source: str) -> None:
  """Append (device, name, canonical AST, pickled AST, source) to this process's file in $TGFN_CAPTURE."""
  path = Path(os.environ[ENV]) / f"kernels-{os.getpid()}.pkl"
  try: ast = pickle.dumps(kernel.ast)
  except Exception: ast = b""  # the AST pickle is a convenience for replaying; the text is what compares
  entry = {"device": device, "name": kernel.name, "ast_text": canonical_ast(kernel.ast), "ast": ast, "source": source}
  with open(path, "ab") as f: pickle.dump(entry, f)


def load(capture: Path) -> Iterator[dict]:
  """Every record of a capture directory (records only: the AST pickles stay bytes, see `ast_of`)."""
  for path in sorted(capture.glob("kernels-*.pkl")):
    with open(path, "rb") as f:
      while True:
        try: yield pickle.load(f)
        except EOFError: break


def ast_of(entry: dict) -> Any:
  """The record's AST as a UOp of this tree (fails if the capture's tree had a different IR)."""
  return pickle.loads(entry["ast"])


# ---- running a corpus
def _patch_tree_without_hook() -> None:
  """For a tree older than the TGFN_CAPTURE hook: wrap its compile_kernel where it is imported."""
  import inspect
  import tgfn.engine.realize as realize
  if ENV in inspect.getsource(realize): return
  original = realize.compile_kernel

  def compile_kernel(kernel: Any, device: str) -> Any:
    before = realize.Counters.kernels_compiled
    out = original(kernel, device)
    if realize.Counters.kernels_compiled != before: record(device, kernel, out.source)
    return out
  for name in ("tgfn.engine.realize", "tgfn.engine.jit"):
    module = sys.modules.get(name) or __import__(name, fromlist=["_"])
    if getattr(module, "compile_kernel", None) is original: module.compile_kernel = compile_kernel


def _exec(argv: list[str]) -> None:
  """Run `python ARGV` in this process with capturing on (used as `process_replay.py exec -- ARGV`)."""
  _patch_tree_without_hook()
  if argv[0] == "-m":
    sys.argv = [argv[1]] + argv[2:]
    runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
  else:
    sys.argv = argv
    runpy.run_path(argv[0], run_name="__main__")


def capture(out: Path, corpus: str, tree: Path, verbose: bool = True) -> None:
  """Run `corpus` with `tree`'s tgfn and record its kernels into `out` (which must not hold a capture)."""
  out.mkdir(parents=True, exist_ok=True)
  if any(out.glob("kernels-*.pkl")): raise SystemExit(f"{out} already holds a capture; pick a new directory")
  (out / "meta.json").write_text(json.dumps({"corpus": corpus, "tree": str(tree)}))
  with tempfile.TemporaryDirectory(prefix="tgfn-replay-") as scratch:
    # a scratch working directory: no .hypothesis example database, and a compile cache of its own
    env = {**os.environ, ENV: str(out.resolve()), "PYTHONPATH": str(tree), "TGFN_CACHE_DIR": scratch + "/cache",
           "PYTHONHASHSEED": "0"}
    env.pop("DEV", None)
    for argv in CORPORA[corpus]:
      argv = [str(tree / a) if a.startswith("tests") else a for a in argv]
      if verbose: print(f"capture: python {' '.join(argv)}", file=sys.stderr)
      done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "exec", "--"] + argv, cwd=scratch,
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
      if done.returncode != 0:  # failing tests still compiled their kernels; say so, keep the capture
        print(f"capture: exit code {done.returncode} from {' '.join(argv)}:\n{done.stderr[-2000:]}", file=sys.stderr)


def capture_ref(out: Path, corpus: str, ref: str, repo: Path) -> None:
  """Capture `corpus` as built by git revision `ref` (in a temporary worktree)."""
  with tempfile.TemporaryDirectory(prefix="tgfn-replay-tree-") as tmp:
    tree = Path(tmp) / "tree"
    subprocess.run(["git", "-C", str(repo), "worktree", "add", "--detach", "--quiet", str(tree), ref], check=True)
    try: capture(out, corpus, tree)
    finally: subprocess.run(["git", "-C", str(repo), "worktree", "remove", "--force", str(tree)], check=True)


# ---- comparing
def index(capture: Path) -> dict[tuple[str, str], dict]:
  """(device, canonical AST) -> record; a capture that rendered one AST two ways is itself an error."""
  kernels: dict[tuple[str, str], dict] = {}
  for entry in load(capture):
    key = (entry["device"], entry["ast_text"])
    if key in kernels and kernels[key]["source"] != entry["source"]:
      raise SystemExit(f"{capture}: kernel {entry['name']} ({entry['device']}) rendered two different sources in "
                       "one capture: codegen is not deterministic")
    kernels.setdefault(key, entry)
  return kernels


def differences(old: Path, new: Path) -> dict[str, list]:
  """Kernels whose AST is in both captures but whose source changed ('changed': (old, new) pairs), and
  ASTs found in only one of them ('only_old', 'only_new': records)."""
  a, b = index(old), index(new)
  return {"changed": [(a[k], b[k]) for k in a if k in b and a[k]["source"] != b[k]["source"]],
          "same": [a[k] for k in a if k in b and a[k]["source"] == b[k]["source"]],
          "only_old": [a[k] for k in a if k not in b], "only_new": [b[k] for k in b if k not in a]}


def report(diff: dict[str, list], show_diff: bool, old_label: str, new_label: str) -> str:
  lines = [f"{len(diff['same']) + len(diff['changed'])} kernels in both captures, {len(diff['changed'])} with "
           f"changed source; {len(diff['only_old'])} ASTs only in {old_label}, {len(diff['only_new'])} only in "
           f"{new_label}"]
  for before, after in diff["changed"]:
    lines.append(f"changed: {after['device']} {after['name']}" + (f" (was {before['name']})"
                                                                   if before["name"] != after["name"] else ""))
    if show_diff:
      lines.extend(difflib.unified_diff(before["source"].splitlines(), after["source"].splitlines(),
                                        f"{old_label}/{before['name']}", f"{new_label}/{after['name']}", lineterm=""))
  for label, key in ((old_label, "only_old"), (new_label, "only_new")):
    for entry in diff[key]: lines.append(f"only in {label}: {entry['device']} {entry['name']}")
  return "\n".join(lines)


def main(argv: list[str]) -> int:
  if argv[:1] == ["exec"]:
    _exec(argv[2:] if argv[1:2] == ["--"] else argv[1:])
    return 0
  parser = argparse.ArgumentParser(prog="python -m tgfn.tools.process_replay", description=__doc__.splitlines()[0])
  sub = parser.add_subparsers(dest="command", required=True)
  cap = sub.add_parser("capture", help="record the kernels of a corpus into OUT (a new directory)")
  cap.add_argument("out", type=Path)
  cap.add_argument("--corpus", choices=sorted(CORPORA), default="quick")
  cap.add_argument("--ref", help="capture this git revision's tree instead of the working tree")
  cmp = sub.add_parser("compare", help="compare capture OUT with a fresh capture of the working tree (or of --ref)")
  cmp.add_argument("out", type=Path)
  cmp.add_argument("--ref", help="compare with this git revision instead of the working tree (REF -> OUT)")
  cmp.add_argument("--diff", action="store_true", help="print a unified diff of each changed kernel's source")
  args = parser.parse_args(argv)
  repo = Path(__file__).resolve().parents[2]
  if args.command == "capture":
    if args.ref: capture_ref(args.out, args.corpus, args.ref, repo)
    else: capture(args.out, args.corpus, repo)
    print(f"captured {len(index(args.out))} kernels into {args.out}")
    return 0
  corpus = json.loads((args.out / "meta.json").read_text())["corpus"]
  with tempfile.TemporaryDirectory(prefix="tgfn-replay-") as tmp:
    fresh = Path(tmp) / "capture"
    if args.ref:
      capture_ref(fresh, corpus, args.ref, repo)
      diff, labels = differences(fresh, args.out), (args.ref, str(args.out))
    else:
      capture(fresh, corpus, repo)
      diff, labels = differences(args.out, fresh), (str(args.out), "working tree")
  print(report(diff, args.diff, *labels))
  return 1 if diff["changed"] or diff["only_old"] or diff["only_new"] else 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
