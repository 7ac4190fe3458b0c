"""Lines of code per folder of the core, so it stays readable in a week: `python bench/loc.py`.
Counts non-blank lines that are not only a comment, in tgfn/ and tgfn_drivers/."""
from __future__ import annotations

import pathlib
from collections import Counter

ROOT = pathlib.Path(__file__).resolve().parent.parent


def code_lines(path: pathlib.Path) -> int:
  return sum(1 for line in path.read_text().splitlines() if line.strip() and not line.strip().startswith("#"))


def main() -> None:
  per_folder: Counter[str] = Counter()
  for package in ("tgfn", "tgfn_drivers"):
    for path in sorted((ROOT / package).rglob("*.py")):
      per_folder[str(path.parent.relative_to(ROOT))] += code_lines(path)
  width = max(len(folder) for folder in per_folder)
  for folder, count in sorted(per_folder.items()):
    print(f"{folder:<{width}}  {count:6d}")
  print(f"{'total':<{width}}  {sum(per_folder.values()):6d}")


if __name__ == "__main__":
  main()
