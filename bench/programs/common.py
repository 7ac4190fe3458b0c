"""What every program shares: the Program record, Adam written as a user would (tree_map over the
parameters), and dense-layer initialization. Everything takes the framework module (`jax` or `tgfn`) as
its first argument, so the same source runs on both."""
from dataclasses import dataclass
from typing import Any, Callable


@dataclass
class Program:
  """`step(state, batch) -> (state, loss)` is the jitted training step; `init()` builds the first state
  (parameters, optimizer state and any PRNG key) in the framework; `batch(i)` is the i-th batch as NumPy
  arrays (fed to the step as a user's data loader would)."""
  init: Callable[[], Any]
  step: Callable[[Any, Any], Any]
  batch: Callable[[int], Any]


def adam(jax, lr: float, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8):
  """(init, update) of Adam with bias correction, as a user writes it without optax."""
  jnp, tree_map = jax.numpy, jax.tree_util.tree_map

  def init(params):
    zeros = tree_map(jnp.zeros_like, params)
    return {"m": zeros, "v": tree_map(jnp.zeros_like, params), "t": jnp.zeros((), jnp.float32)}

  def update(params, grads, opt):
    t = opt["t"] + 1
    m = tree_map(lambda m, g: b1 * m + (1 - b1) * g, opt["m"], grads)
    v = tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, opt["v"], grads)
    scale = lr * jnp.sqrt(1 - b2 ** t) / (1 - b1 ** t)
    params = tree_map(lambda p, m, v: p - scale * m / (jnp.sqrt(v) + eps), params, m, v)
    return params, {"m": m, "v": v, "t": t}
  return init, update


def dense(jax, key, n_in: int, n_out: int) -> dict:
  """A dense layer's weights (LeCun normal) and zero bias."""
  return {"w": jax.random.normal(key, (n_in, n_out)) * n_in ** -0.5, "b": jax.numpy.zeros((n_out,))}


def training_step(jax, loss_fn: Callable, opt_update: Callable) -> Callable:
  """The step over state {params, opt, ...}: value_and_grad of the loss, then the optimizer (not jitted:
  a program jits it, alone or inside a step of its own)."""
  def step(state, batch):
    params, opt = state["params"], state["opt"]
    loss, grads = jax.value_and_grad(loss_fn)(params, batch)
    params, opt = opt_update(params, grads, opt)
    return {**state, "params": params, "opt": opt}, loss
  return step
