"""Runnable examples: `python -m tgfn.examples.<name>` (see docs/distributed.md)."""
