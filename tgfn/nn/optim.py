"""Optimizers, two ways: pure functions on pytrees (as optax) and stateful objects on Tensors (as PyTorch).

Functional. Each optimizer is an `Optimizer(init, update)` pair of pure functions:

  opt = optim.adam(1e-3)
  state = opt.init(params)                              # moments and the step count, as Arrays
  updates, state = opt.update(grads, state, params)     # updates = what to add to params
  params = optim.apply_updates(params, updates)

`params`, `grads` and `updates` are any pytrees of the same structure (dicts, lists, layers), so a
whole training step jits: the step count is an int32 Array in the state, never a Python int, so it is
an input of the compiled call and advancing it does not retrace. `learning_rate` is a float or a
schedule, a function of that count (`schedule(count)` for the update number `count`, from 0).

Stateful. `SGD`, `Adam`, `AdamW` and `LAMB` take the parameters as Tensors (a list, any iterable, or a
pytree whose leaves are Tensors, such as a layer built from Tensors); `step()` reads each `p.grad` and
updates `p` in place with `p.assign`, `zero_grad()` sets the grads to None. Each wraps the functional
optimizer of the same name, applied to each parameter on its own (its own step count, as PyTorch), and
keeps every piece of its state in Tensors updated with `assign`, so a `tgfn.jit`-ed training step that
calls `opt.step()` carries the state out of the compiled call.

The formulas follow optax (and PyTorch, which agrees where it has the optimizer); each docstring gives them
for one leaf, with g the gradient, p the parameter, t the update number counted from 1 and lr the
learning rate at update t (the schedule at t - 1).
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, Callable, NamedTuple, Optional, Union

import tgfn.numpy as tnp
from tgfn import tree
from tgfn.array import Array, as_array
from tgfn.dtype import dtypes
from tgfn.tensor import Tensor
from tgfn.transforms.trace import is_abstract

__all__ = ["Optimizer", "SgdState", "AdamState", "sgd", "adam", "adamw", "lamb", "apply_updates",
           "constant_schedule", "exponential_decay", "cosine_decay_schedule", "warmup_cosine_decay_schedule",
           "linear_schedule", "piecewise_constant_schedule", "SGD", "Adam", "AdamW", "LAMB"]

Schedule = Callable[[Any], Any]
ScalarOrSchedule = Union[float, Schedule]


class Optimizer(NamedTuple):
  """A pure optimizer. `init(params) -> state`; `update(grads, state, params=None) -> (updates, state)`."""
  init: Callable[[Any], Any]
  update: Callable[..., tuple[Any, Any]]


class SgdState(NamedTuple):
  count: Array          # int32 scalar: the number of updates made
  momentum: Any         # the momentum buffers (a pytree like params), or None without momentum


class AdamState(NamedTuple):
  count: Array          # int32 scalar: the number of updates made
  mu: Any               # first moments, a pytree like params
  nu: Any               # second moments, a pytree like params


# ---- helpers
def _check(ok: bool, message: str) -> None:
  if not ok: raise ValueError(message)


def _check_rate(name: str, learning_rate: ScalarOrSchedule) -> None:
  _check(callable(learning_rate) or learning_rate >= 0,
         f"{name}: learning_rate must be >= 0 or a schedule, got {learning_rate}")


def _check_betas(name: str, b1: float, b2: float, eps: float, weight_decay: float) -> None:
  _check(0 <= b1 < 1 and 0 <= b2 < 1, f"{name}: b1 and b2 must be in [0, 1), got {b1}, {b2}")
  _check(eps >= 0, f"{name}: eps must be >= 0, got {eps}")
  _check(weight_decay >= 0, f"{name}: weight_decay must be >= 0, got {weight_decay}")


def _needs_params(name: str, params: Any, why: str) -> Any:
  if params is None:
    raise ValueError(f"{name}.update needs params ({why}): call update(grads, state, params)")
  return params


def _zeros_like(params: Any) -> Any: return tree.map(lambda p: tnp.zeros_like(as_array(p)), params)


def _count() -> Array: return tnp.zeros((), tnp.int32)


def _step_size(learning_rate: ScalarOrSchedule, count: Array) -> Any:
  return learning_rate(count) if callable(learning_rate) else learning_rate


def _scale(direction: Array, lr: Any) -> Array:
  """-lr * direction, in the direction's dtype (a schedule's float32 value must not widen float16)."""
  return (direction * -lr).astype(direction.dtype)


def _float_count(count: Array, like: Array) -> Array:
  """`count` as a float: float64 for float64 leaves, float32 otherwise."""
  return count.astype(dtypes.float64 if like.dtype is dtypes.float64 else dtypes.float32)


def _safe_norm(x: Array) -> Array:
  """||x||_2 over all elements, with a finite derivative at x = 0 (where it is 0)."""
  squares = tnp.sum(x * x)
  nonzero = squares > 0
  return tnp.where(nonzero, tnp.sqrt(tnp.where(nonzero, squares, 1.0)), 0.0)


def _adam_directions(b1: float, b2: float, eps: float, grads: Any,
                     state: AdamState) -> tuple[Any, AdamState]:
  """The bias-corrected Adam directions m_hat / (sqrt(v_hat) + eps) and the new state."""
  count = state.count + 1
  mu = tree.map(lambda g, m: (b1 * m + (1 - b1) * g).astype(m.dtype), grads, state.mu)
  nu = tree.map(lambda g, v: (b2 * v + (1 - b2) * g * g).astype(v.dtype), grads, state.nu)

  def direction(m: Array, v: Array) -> Array:
    t = _float_count(count, m)
    return ((m / (1 - b1 ** t)) / (tnp.sqrt(v / (1 - b2 ** t)) + eps)).astype(m.dtype)
  return tree.map(direction, mu, nu), AdamState(count, mu, nu)


def _adam_init(params: Any) -> AdamState:
  return AdamState(_count(), _zeros_like(params), _zeros_like(params))


# ---- optimizers
def sgd(learning_rate: ScalarOrSchedule, momentum: float = 0.0, nesterov: bool = False,
        weight_decay: float = 0.0) -> Optimizer:
  """Stochastic gradient descent with optional momentum, Nesterov momentum and L2 weight decay.

    g <- g + weight_decay * p                    (coupled decay: added to the gradient, as PyTorch)
    b <- momentum * b + g                        (b starts at 0, so the first b is g)
    d <- g + momentum * b if nesterov else b     (d = g without momentum)
    update = -lr * d
  """
  _check_rate("sgd", learning_rate)
  _check(momentum >= 0, f"sgd: momentum must be >= 0, got {momentum}")
  _check(weight_decay >= 0, f"sgd: weight_decay must be >= 0, got {weight_decay}")
  _check(not nesterov or momentum > 0, "sgd: nesterov=True needs momentum > 0")

  def init(params: Any) -> SgdState: return SgdState(_count(), _zeros_like(params) if momentum else None)

  def update(grads: Any, state: SgdState, params: Any = None) -> tuple[Any, SgdState]:
    grads = tree.map(as_array, grads)
    if weight_decay:
      params = _needs_params("sgd", params, "weight decay")
      grads = tree.map(lambda g, p: g + weight_decay * p, grads, params)
    buffers, directions = None, grads
    if momentum:
      buffers = tree.map(lambda g, b: (g + momentum * b).astype(b.dtype), grads, state.momentum)
      directions = tree.map(lambda g, b: g + momentum * b, grads, buffers) if nesterov else buffers
    lr = _step_size(learning_rate, state.count)
    return tree.map(lambda d: _scale(d, lr), directions), SgdState(state.count + 1, buffers)
  return Optimizer(init, update)


def adam(learning_rate: ScalarOrSchedule, b1: float = 0.9, b2: float = 0.999,
         eps: float = 1e-8) -> Optimizer:
  """Adam (Kingma & Ba, 2015).

    m <- b1 * m + (1 - b1) * g          v <- b2 * v + (1 - b2) * g^2        (both start at 0)
    update = -lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
  """
  _check_rate("adam", learning_rate)
  _check_betas("adam", b1, b2, eps, 0.0)

  def update(grads: Any, state: AdamState, params: Any = None) -> tuple[Any, AdamState]:
    directions, new_state = _adam_directions(b1, b2, eps, tree.map(as_array, grads), state)
    lr = _step_size(learning_rate, state.count)
    return tree.map(lambda d: _scale(d, lr), directions), new_state
  return Optimizer(_adam_init, update)


def adamw(learning_rate: ScalarOrSchedule, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
          weight_decay: float = 1e-4) -> Optimizer:
  """Adam with decoupled weight decay (Loshchilov & Hutter, 2019): with d the Adam direction,

    update = -lr * (d + weight_decay * p)

  The decay is scaled by the learning rate but not by Adam's normalization (PyTorch's AdamW takes the
  same step: p * (1 - lr * weight_decay) - lr * d).
  """
  _check_rate("adamw", learning_rate)
  _check_betas("adamw", b1, b2, eps, weight_decay)

  def update(grads: Any, state: AdamState, params: Any = None) -> tuple[Any, AdamState]:
    params = _needs_params("adamw", params, "weight decay")
    directions, new_state = _adam_directions(b1, b2, eps, tree.map(as_array, grads), state)
    lr = _step_size(learning_rate, state.count)
    return tree.map(lambda d, p: _scale(d + weight_decay * p, lr), directions, params), new_state
  return Optimizer(_adam_init, update)


def lamb(learning_rate: ScalarOrSchedule, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-6,
         weight_decay: float = 0.0) -> Optimizer:
  """LAMB (You et al., 2020): Adam with decoupled weight decay, rescaled per leaf by a trust ratio.

    u = d + weight_decay * p                         (d: the Adam direction)
    r = ||p|| / ||u||, or 1 where ||p|| or ||u|| is 0   (2-norms over each whole leaf)
    update = -lr * r * u
  """
  _check_rate("lamb", learning_rate)
  _check_betas("lamb", b1, b2, eps, weight_decay)

  def trusted(d: Array, p: Any) -> Array:
    p = as_array(p)
    u = d + weight_decay * p if weight_decay else d
    p_norm, u_norm = _safe_norm(p), _safe_norm(u)
    degenerate = (p_norm == 0) | (u_norm == 0)
    return u * tnp.where(degenerate, 1.0, p_norm / tnp.where(degenerate, 1.0, u_norm))

  def update(grads: Any, state: AdamState, params: Any = None) -> tuple[Any, AdamState]:
    params = _needs_params("lamb", params, "the trust ratio")
    directions, new_state = _adam_directions(b1, b2, eps, tree.map(as_array, grads), state)
    lr = _step_size(learning_rate, state.count)
    return tree.map(lambda d, p: _scale(trusted(d, p), lr), directions, params), new_state
  return Optimizer(_adam_init, update)


def apply_updates(params: Any, updates: Any) -> Any:
  """params + updates, leaf by leaf, each result in its parameter's dtype."""
  def add(p: Any, u: Any) -> Array:
    p = as_array(p)
    return (p + u).astype(p.dtype)
  return tree.map(add, params, updates)


# ---- schedules: functions of the update count (an int32 Array, or an int), as optax's
def _float32(count: Any) -> Array: return tnp.asarray(count).astype(dtypes.float32)


def constant_schedule(value: float) -> Schedule:
  """value, at every step."""
  return lambda count: value


def exponential_decay(init_value: float, transition_steps: int, decay_rate: float, transition_begin: int = 0,
                      staircase: bool = False, end_value: Optional[float] = None) -> Schedule:
  """init_value * decay_rate ** ((count - transition_begin) / transition_steps), and init_value until
  count passes transition_begin. `staircase` floors the exponent. `end_value` bounds the result (below
  when decay_rate < 1, above otherwise). As optax, transition_steps <= 0 or decay_rate == 0 give the
  constant init_value, and a negative transition_begin counts as 0."""
  if transition_steps <= 0 or decay_rate == 0: return constant_schedule(init_value)
  transition_begin = max(transition_begin, 0)

  def schedule(count: Any) -> Array:
    elapsed = _float32(count) - transition_begin
    exponent = elapsed / transition_steps
    if staircase: exponent = tnp.floor(exponent)
    value = tnp.where(elapsed <= 0, init_value, init_value * tnp.power(decay_rate, exponent))
    if end_value is None: return value
    return tnp.maximum(value, end_value) if decay_rate < 1 else tnp.minimum(value, end_value)
  return schedule


def cosine_decay_schedule(init_value: float, decay_steps: int, alpha: float = 0.0,
                          exponent: float = 1.0) -> Schedule:
  """init_value * ((1 - alpha) * c ** exponent + alpha), c = (1 + cos(pi * min(count, decay_steps) /
  decay_steps)) / 2: from init_value at 0 down to alpha * init_value at decay_steps, then constant."""
  _check(decay_steps > 0, f"cosine_decay_schedule: decay_steps must be positive, got {decay_steps}")

  def schedule(count: Any) -> Array:
    c = 0.5 * (1 + tnp.cos(math.pi * tnp.minimum(_float32(count), decay_steps) / decay_steps))
    return init_value * ((1 - alpha) * c ** exponent + alpha)
  return schedule


def linear_schedule(init_value: float, end_value: float, transition_steps: int,
                    transition_begin: int = 0) -> Schedule:
  """From init_value to end_value linearly over transition_steps, starting at transition_begin:
  init_value + (end_value - init_value) * clip(count - transition_begin, 0, transition_steps) /
  transition_steps. As optax, transition_steps <= 0 gives the constant init_value."""
  if transition_steps <= 0: return constant_schedule(init_value)
  transition_begin = max(transition_begin, 0)

  def schedule(count: Any) -> Array:
    done = tnp.clip(_float32(count) - transition_begin, 0, transition_steps)
    return (init_value - end_value) * (1 - done / transition_steps) + end_value
  return schedule


def warmup_cosine_decay_schedule(init_value: float, peak_value: float, warmup_steps: int, decay_steps: int,
                                 end_value: float = 0.0, exponent: float = 1.0) -> Schedule:
  """Linear warmup from init_value to peak_value over warmup_steps, then cosine decay to end_value
  over the remaining decay_steps - warmup_steps (decay_steps counts the warmup, as in optax)."""
  warmup = linear_schedule(init_value, peak_value, warmup_steps)
  decay = cosine_decay_schedule(peak_value, decay_steps - warmup_steps,
                                0.0 if peak_value == 0 else end_value / peak_value, exponent)

  def schedule(count: Any) -> Array:
    count = tnp.asarray(count)
    return tnp.where(count < warmup_steps, warmup(count), decay(count - warmup_steps))
  return schedule


def piecewise_constant_schedule(init_value: float,
                                boundaries_and_scales: Optional[dict[int, float]] = None) -> Schedule:
  """init_value times the product of the scales whose boundary count has reached:
  {100: 0.1, 200: 0.1} gives init_value until count 99, init_value * 0.1 from 100, * 0.01 from 200."""
  items = sorted((boundaries_and_scales or {}).items())
  _check(all(scale >= 0 for _, scale in items), "piecewise_constant_schedule: scales must be >= 0")

  def schedule(count: Any) -> Array:
    count = _float32(count)
    value = tnp.full((), init_value, dtypes.float32)
    for boundary, scale in items: value = tnp.where(count < boundary, value, value * scale)
    return value
  return schedule


# ---- stateful optimizers
def _is_tensor(x: Any) -> bool: return isinstance(x, Tensor)


def _tensors(params: Any, name: str) -> list[Tensor]:
  """The distinct Tensors of `params`: a Tensor pytree (list, dict, layer) or any iterable of Tensors."""
  if isinstance(params, Tensor):
    raise TypeError(f"{name}: params must be an iterable of Tensors (a list, a generator, a pytree), "
                    f"got one Tensor; pass [tensor]")
  if tree.structure(params, _is_tensor).is_leaf() and isinstance(params, Iterable): params = list(params)
  leaves = tree.leaves(params, _is_tensor)
  bad = [type(x).__name__ for x in leaves if not isinstance(x, Tensor)]
  if bad: raise TypeError(f"{name}: params must all be Tensors, got {', '.join(sorted(set(bad)))}")
  unique = list({id(t): t for t in leaves}.values())  # a tensor listed twice is updated once
  if not unique: raise ValueError(f"{name}: got an empty parameter list")
  return unique


class _Stateful:
  """A functional optimizer applied to Tensors, with each parameter's state kept in Tensors."""

  def __init__(self, params: Any, optimizer: Optimizer):
    self.params = _tensors(params, type(self).__name__)
    self.optimizer = optimizer
    # one state per parameter (as PyTorch's per-parameter state), each leaf a Tensor
    self.state = [tree.map(Tensor, optimizer.init(p.data)) for p in self.params]

  def step(self) -> None:
    """Update every parameter that has a gradient (parameters whose .grad is None are left alone,
    state included), in place."""
    for p, state in zip(self.params, self.state):
      grad = p.grad
      if grad is None: continue
      if grad.shape != p.shape:
        raise ValueError(f"{type(self).__name__}.step: a gradient of shape {grad.shape} for a parameter of "
                         f"shape {p.shape}")
      current = tree.map(lambda t: t.data, state, is_leaf=_is_tensor)
      updates, new = self.optimizer.update(grad.data, current, p.data)
      p.assign(apply_updates(p.data, updates))
      tree.map(lambda t, value: t.assign(value), state, new, is_leaf=_is_tensor)
      # Eagerly, compute the new values now (in one schedule: state and parameter share a kernel), so the
      # next step starts from buffers instead of a graph that grows with every step. Under jit they are
      # traced, and the compiled call writes them back.
      Array.realize_all([t.data for t in tree.leaves(state, _is_tensor) + [p] if not is_abstract(t.data.uop)])

  def zero_grad(self) -> None:
    """Set every parameter's .grad to None."""
    for p in self.params: p.grad = None


class SGD(_Stateful):
  """`sgd` on Tensors: SGD(params, lr=1e-3, momentum=0.0, nesterov=False, weight_decay=0.0), PyTorch's
  defaults. `lr` may be a schedule."""

  def __init__(self, params: Any, lr: ScalarOrSchedule = 1e-3, *, momentum: float = 0.0,
               nesterov: bool = False, weight_decay: float = 0.0):
    super().__init__(params, sgd(lr, momentum, nesterov, weight_decay))


class Adam(_Stateful):
  """`adam` on Tensors: Adam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8). `lr` may be a schedule."""

  def __init__(self, params: Any, lr: ScalarOrSchedule = 1e-3, *, betas: tuple[float, float] = (0.9, 0.999),
               eps: float = 1e-8):
    super().__init__(params, adam(lr, betas[0], betas[1], eps))


class AdamW(_Stateful):
  """`adamw` on Tensors: AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2).
  The default weight_decay is PyTorch's 1e-2, not the functional `adamw`'s (optax's) 1e-4."""

  def __init__(self, params: Any, lr: ScalarOrSchedule = 1e-3, *, betas: tuple[float, float] = (0.9, 0.999),
               eps: float = 1e-8, weight_decay: float = 1e-2):
    super().__init__(params, adamw(lr, betas[0], betas[1], eps, weight_decay))


class LAMB(_Stateful):
  """`lamb` on Tensors: LAMB(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.0)."""

  def __init__(self, params: Any, lr: ScalarOrSchedule = 1e-3, *, betas: tuple[float, float] = (0.9, 0.999),
               eps: float = 1e-6, weight_decay: float = 0.0):
    super().__init__(params, lamb(lr, betas[0], betas[1], eps, weight_decay))
