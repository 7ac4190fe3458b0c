"""Detect a folder that shadows the real `tgfn` package.

A clone of the repository named `tgfn` in the current directory is a folder without `__init__.py`, so
Python imports it as a *namespace package* named `tgfn` (its `__file__` is None). Submodules may still
load from an installed copy, but `tgfn/__init__.py` never runs, and code that locates the package by
its `__file__` fails in confusing ways. Every tgfn module imports `tgfn.dtype`, which calls this first.
"""
from __future__ import annotations

import os
import sys
from types import ModuleType


def require_regular_package(module: ModuleType, real_dir: str) -> None:
  """Raise ImportError if `module` is a namespace package (a stray folder) instead of the package in `real_dir`."""
  if getattr(module, "__file__", None) is not None: return
  folders = ", ".join(getattr(module, "__path__", [])) or "?"
  raise ImportError(
    f"`import {module.__name__}` found the folder(s) {folders}, which has no __init__.py (probably a clone of the "
    f"repository in the current directory), so it shadows the real package at {real_dir}. Run Python from "
    f"another directory, or rename that folder.")


def check_tgfn_not_shadowed() -> None:
  tgfn = sys.modules.get("tgfn")
  if tgfn is not None: require_regular_package(tgfn, os.path.dirname(os.path.abspath(__file__)))
