"""A neural ODE: an MLP vector field integrated by RK4 in `lax.scan`, `vmap` over a batch of initial
states, the trajectory fitted to a damped spiral's by Adam (`grad` through the scan)."""
from types import SimpleNamespace

import numpy as np

from .common import Program, adam, dense, training_step

CONFIG = SimpleNamespace(hidden=32, steps=40, dt=0.05, batch=64, lr=3e-3)


def spiral(y0: np.ndarray, steps: int, dt: float) -> np.ndarray:
  """The target: exact trajectories of y' = A y for a damped rotation A, shape (batch, steps, 2)."""
  a = np.array([[-0.1, 2.0], [-2.0, -0.1]])
  w, v = np.linalg.eig(a)
  ts = dt * np.arange(1, steps + 1)
  prop = np.real(np.einsum("ij,tj,jk->tik", v, np.exp(np.outer(ts, w)), np.linalg.inv(v)))
  return np.einsum("tik,bk->bti", prop, y0).astype(np.float32)


def build(jax, cfg=CONFIG) -> Program:
  jnp, lax = jax.numpy, jax.lax
  rng = np.random.default_rng(0)
  starts = [rng.normal(size=(cfg.batch, 2)).astype(np.float32) for _ in range(16)]
  targets = [spiral(y0, cfg.steps, cfg.dt) for y0 in starts]

  def field(p, y):
    return jnp.tanh(y @ p[0]["w"] + p[0]["b"]) @ p[1]["w"] + p[1]["b"]

  def trajectory(p, y0):
    def rk4(y, _):
      k1 = field(p, y)
      k2 = field(p, y + 0.5 * cfg.dt * k1)
      k3 = field(p, y + 0.5 * cfg.dt * k2)
      k4 = field(p, y + cfg.dt * k3)
      y = y + cfg.dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
      return y, y
    return lax.scan(rk4, y0, None, length=cfg.steps)[1]

  def loss_fn(params, batch):
    y0, target = batch
    return ((jax.vmap(trajectory, in_axes=(None, 0))(params, y0) - target) ** 2).mean()

  opt_init, opt_update = adam(jax, cfg.lr)

  def init():
    k = jax.random.split(jax.random.PRNGKey(0), 2)
    params = [dense(jax, k[0], 2, cfg.hidden), dense(jax, k[1], cfg.hidden, 2)]
    return {"params": params, "opt": opt_init(params)}
  return Program(init, jax.jit(training_step(jax, loss_fn, opt_update)),
                 lambda i: (starts[i % len(starts)], targets[i % len(targets)]))
