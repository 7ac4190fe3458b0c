"""The transformer of transformer.py one size up, GPT-style: 6 layers, 6 heads, d 384, context 256."""
from types import SimpleNamespace

from . import transformer

CONFIG = SimpleNamespace(layers=6, heads=6, d=384, context=256, batch=8, vocab=65, lr=3e-4)


def build(jax, cfg=CONFIG):
  return transformer.build(jax, cfg)
