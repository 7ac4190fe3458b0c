"""JAX-style tutorial programs, written as a JAX user would with `import jax.numpy as jnp` and run by
changing that import to `import tgfn.numpy as jnp` (and `jax` to `tgfn`): Newton's method with
while_loop, Adam written by hand over a pytree, a transformer block, a VAE loss with random numbers."""
import numpy as np

import tgfn as jax
import tgfn.numpy as jnp
from tgfn import lax
from tests.conftest import assert_close


def test_newton_sqrt_with_while_loop():
  def newton_sqrt(a):
    def cond(state):
      x, i = state
      return (jnp.abs(x * x - a) > 1e-6) & (i < 50)
    def body(state):
      x, i = state
      return (x - (x * x - a) / (2 * x), i + 1)
    return lax.while_loop(cond, body, (a, 0))[0]
  assert_close(jax.jit(newton_sqrt)(jnp.float32(2.0)), np.float32(np.sqrt(2.0)), rtol=1e-6)
  assert_close(jax.vmap(newton_sqrt)(jnp.array([4.0, 9.0, 2.0])), np.sqrt([4.0, 9.0, 2.0]).astype(np.float32), rtol=1e-6)


def test_adam_by_hand_fits_a_line():
  key = jax.random.key(0)
  xs = jax.random.normal(key, (64,))
  ys = 3.0 * xs - 1.0
  params = {"w": jnp.zeros(()), "b": jnp.zeros(())}
  loss = lambda p: jnp.mean((p["w"] * xs + p["b"] - ys) ** 2)
  state = (jax.tree.map(jnp.zeros_like, params), jax.tree.map(jnp.zeros_like, params), 0)

  @jax.jit
  def update(params, state):
    m, v, t = state
    g = jax.grad(loss)(params)
    t = t + 1
    m = jax.tree.map(lambda m, g: 0.9 * m + 0.1 * g, m, g)
    v = jax.tree.map(lambda v, g: 0.999 * v + 0.001 * g * g, v, g)
    step = lambda p, m, v: p - 0.1 * (m / (1 - 0.9 ** t)) / (jnp.sqrt(v / (1 - 0.999 ** t)) + 1e-8)
    return jax.tree.map(step, params, m, v), (m, v, t)

  for _ in range(300):
    params, state = update(params, state)
  assert float(loss(params)) < 1e-3
  assert abs(float(params["w"]) - 3.0) < 0.05


def test_transformer_block_forward_and_grad():
  rng = np.random.default_rng(0)
  d, n = 8, 5
  p = {k: jnp.asarray(rng.normal(size=(d, d)).astype(np.float32) * 0.3) for k in ("q", "k", "v", "o")}
  x = jnp.asarray(rng.normal(size=(n, d)).astype(np.float32))

  def block(p, x):
    h = (x - x.mean(-1, keepdims=True)) / jnp.sqrt(x.var(-1, keepdims=True) + 1e-5)
    q, k, v = h @ p["q"], h @ p["k"], h @ p["v"]
    scores = q @ k.T / jnp.sqrt(d)
    mask = jnp.tril(jnp.ones((n, n), dtype=bool))
    attn = jax.nn.softmax(jnp.where(mask, scores, -1e9), axis=-1)
    return x + jax.nn.gelu(attn @ v @ p["o"])

  def block_np(p, x):
    p = {k: np.asarray(v) for k, v in p.items()}
    h = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    s = (h @ p["q"]) @ (h @ p["k"]).T / np.sqrt(d)
    s = np.where(np.tril(np.ones((n, n), bool)), s, -1e9)
    a = np.exp(s - s.max(-1, keepdims=True))
    a /= a.sum(-1, keepdims=True)
    z = a @ (h @ p["v"]) @ p["o"]
    return x + 0.5 * z * (1 + np.tanh(np.sqrt(2 / np.pi) * (z + 0.044715 * z ** 3)))

  assert_close(jax.jit(block)(p, x), block_np(p, np.asarray(x)).astype(np.float32), rtol=1e-4, atol=1e-5)
  grads = jax.jit(jax.grad(lambda p: block(p, x).sum()))(p)
  assert set(grads) == set(p) and all(np.isfinite(np.asarray(g)).all() for g in grads.values())


def test_vae_loss_with_reparameterization():
  rng = np.random.default_rng(1)
  enc = jnp.asarray(rng.normal(size=(6, 4)).astype(np.float32) * 0.3)
  dec = jnp.asarray(rng.normal(size=(2, 6)).astype(np.float32) * 0.3)
  x = jnp.asarray(rng.normal(size=(3, 6)).astype(np.float32))

  def vae_loss(params, x, key):
    enc, dec = params
    h = x @ enc
    mu, logvar = h[:, :2], h[:, 2:]
    eps = jax.random.normal(key, mu.shape)
    z = mu + jnp.exp(0.5 * logvar) * eps
    recon = z @ dec
    kl = -0.5 * jnp.sum(1 + logvar - mu ** 2 - jnp.exp(logvar), axis=-1)
    return jnp.mean(jnp.sum((recon - x) ** 2, axis=-1) + kl)

  key = jax.random.key(42)
  value, grads = jax.jit(jax.value_and_grad(vae_loss))((enc, dec), x, key)
  assert_close(value, vae_loss((enc, dec), x, key), rtol=1e-5)
  assert grads[0].shape == (6, 4) and grads[1].shape == (2, 6)
  k1, k2 = jax.random.split(key)
  assert float(vae_loss((enc, dec), x, k1)) != float(vae_loss((enc, dec), x, k2))
