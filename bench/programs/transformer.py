"""A character-level transformer language model: pre-norm blocks of causal multi-head attention and a
GELU MLP, learned position embeddings, trained with Adam on next-character prediction. CONFIG is the
small model of issue 35 (2 layers, 4 heads, d 64, context 64, batch 32); gpt.py is the same code one
size up."""
from types import SimpleNamespace

import numpy as np

from .common import Program, adam, dense, training_step

CONFIG = SimpleNamespace(layers=2, heads=4, d=64, context=64, batch=32, vocab=65, lr=3e-3)


def corpus(n: int, vocab: int, seed: int = 0) -> np.ndarray:
  """Text-like tokens: a random first-order Markov chain with a few likely successors per character."""
  rng = np.random.default_rng(seed)
  successors = rng.integers(0, vocab, size=(vocab, 4))
  out = np.empty(n, np.int32)
  out[0] = 0
  for i in range(1, n): out[i] = successors[out[i - 1], rng.integers(0, 4)]
  return out


def init_params(jax, key, cfg) -> dict:
  keys = jax.random.split(key, 3 + 4 * cfg.layers)
  jnp, d = jax.numpy, cfg.d

  def block(k):
    return {"ln1": {"g": jnp.ones((d,)), "b": jnp.zeros((d,))}, "qkv": dense(jax, k[0], d, 3 * d),
            "proj": dense(jax, k[1], d, d), "ln2": {"g": jnp.ones((d,)), "b": jnp.zeros((d,))},
            "up": dense(jax, k[2], d, 4 * d), "down": dense(jax, k[3], 4 * d, d)}
  return {"embed": jax.random.normal(keys[0], (cfg.vocab, d)) * 0.02,
          "pos": jax.random.normal(keys[1], (cfg.context, d)) * 0.02,
          "blocks": [block(keys[3 + 4 * i: 7 + 4 * i]) for i in range(cfg.layers)],
          "ln_f": {"g": jnp.ones((d,)), "b": jnp.zeros((d,))}, "head": dense(jax, keys[2], d, cfg.vocab)}


def layer_norm(jax, p, x, eps=1e-5):
  mean = x.mean(-1, keepdims=True)
  var = ((x - mean) ** 2).mean(-1, keepdims=True)
  return (x - mean) * jax.lax.rsqrt(var + eps) * p["g"] + p["b"]


def attention(jax, p, x, heads):
  jnp = jax.numpy
  b, t, d = x.shape
  q, k, v = jnp.split(x @ p["qkv"]["w"] + p["qkv"]["b"], 3, axis=-1)
  q, k, v = (a.reshape(b, t, heads, d // heads).transpose(0, 2, 1, 3) for a in (q, k, v))
  scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d // heads)
  causal = jnp.tril(jnp.ones((t, t), dtype=bool))
  weights = jax.nn.softmax(jnp.where(causal, scores, -1e9), axis=-1)
  out = (weights @ v).transpose(0, 2, 1, 3).reshape(b, t, d)
  return out @ p["proj"]["w"] + p["proj"]["b"]


def logits(jax, params, tokens, cfg):
  x = params["embed"][tokens] + params["pos"][: tokens.shape[1]]
  for p in params["blocks"]:
    x = x + attention(jax, p, layer_norm(jax, p["ln1"], x), cfg.heads)
    h = jax.nn.gelu(layer_norm(jax, p["ln2"], x) @ p["up"]["w"] + p["up"]["b"])
    x = x + h @ p["down"]["w"] + p["down"]["b"]
  return layer_norm(jax, params["ln_f"], x) @ params["head"]["w"] + params["head"]["b"]


def build(jax, cfg=CONFIG) -> Program:
  jnp = jax.numpy
  text = corpus(200_000, cfg.vocab)
  rng = np.random.default_rng(1)
  starts = rng.integers(0, len(text) - cfg.context - 1, size=(64, cfg.batch))

  def loss_fn(params, batch):
    tokens, targets = batch
    logp = jax.nn.log_softmax(logits(jax, params, tokens, cfg), axis=-1)
    return -jnp.take_along_axis(logp, targets[..., None], axis=-1).mean()

  opt_init, opt_update = adam(jax, cfg.lr)

  def init():
    params = init_params(jax, jax.random.PRNGKey(0), cfg)
    return {"params": params, "opt": opt_init(params)}

  def batch(i):
    idx = starts[i % len(starts)][:, None] + np.arange(cfg.context + 1)
    window = text[idx]
    return window[:, :-1], window[:, 1:]
  return Program(init, jax.jit(training_step(jax, loss_fn, opt_update)), batch)
