"""The array function surface, built from the primitives in tgfn/array.py. `tgfn.numpy` re-exports it."""
