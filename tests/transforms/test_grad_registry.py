"""Second-order derivative checks, in forward and reverse mode, for every differentiable function: each
`differentiable=True` record of tests/op_registry.py, and the movement, indexing and linear-algebra
functions of tgfn.numpy (the `STRUCTURAL` table, shared with the vmap and jit sweeps). Also JAX's
conventions where there is no derivative: max/maximum split the cotangent evenly among tied elements,
and floor/ceil/trunc/round/sign have a zero derivative.

Inputs are float64, tiny (each kernel costs a C compilation) and drawn inside the record's domain but
away from the points where the function is not differentiable (|x| = 0 for abs, ties for maximum and
max, integer ratios for mod, domain edges for log and sqrt), since central differences straddling a kink
measure an average slope that no derivative rule should reproduce. The sweeps run on CPU only; one
smoke test checks the PYTHON reference device."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp
from tgfn import lax
from tests.conftest import assert_close
from tests.op_registry import ALL_RECORDS, Domain, OpRecord
from tgfn.test_util import check_grads

Shape = tuple[int, ...]
Sampler = Callable[[np.random.Generator, tuple[Shape, ...]], list[np.ndarray]]

# broadcasting operands, so the reverse rules also have to sum cotangents back to the smaller shapes
ELEMENTWISE_SHAPES: dict[int, tuple[Shape, ...]] = {
  1: ((2, 3),), 2: ((2, 3), (3,)), 3: ((2, 3), (3,), (2, 1))}
REDUCTION_SHAPE: Shape = (2, 3)
MASK = np.array([[True, False, True], [False, True, True]])  # a where's condition, a boolean index


@pytest.fixture(autouse=True)
def _cpu_unless_device(request: Any, monkeypatch: Any) -> None:
  """The sweeps run on CPU (the PYTHON interpreter is far too slow for them) whatever DEV says; a test
  that asks for the `device` fixture picks its own."""
  if "device" not in request.fixturenames: monkeypatch.setenv("DEV", "CPU")


# ---- float64 samplers that keep away from the non-differentiable points
def smooth_interval(domain: Domain, cap: float = 2.5) -> tuple[float, float]:
  """The domain capped to [-cap, cap], shrunk by a tenth of its width at both ends, so that finite
  differences never leave it (log at 0, log1p at -1, tan near pi/2)."""
  lo = -cap if domain.lo is None else max(domain.lo, -cap)
  hi = cap if domain.hi is None else min(domain.hi, cap)
  margin = (hi - lo) / 10
  return lo + margin, hi - margin


def away_from_zero(rng: np.random.Generator, shape: Shape, lo: float = 0.3, hi: float = 2.0) -> np.ndarray:
  return rng.choice([-1.0, 1.0], shape) * rng.uniform(lo, hi, shape)


def distinct(rng: np.random.Generator, shapes: tuple[Shape, ...]) -> list[np.ndarray]:
  """Values at least 0.3 apart across all arguments: no ties for max, min or scatter-max/min."""
  sizes = [int(np.prod(s)) for s in shapes]
  pool = (rng.permutation(sum(sizes)) - sum(sizes) / 2) * 0.4 + rng.uniform(0, 0.1, sum(sizes))
  return [chunk.reshape(s) for chunk, s in zip(np.split(pool, np.cumsum(sizes)[:-1]), shapes)]


def from_domains(rec: OpRecord) -> Sampler:
  def sample(rng: np.random.Generator, shapes: tuple[Shape, ...]) -> list[np.ndarray]:
    out = []
    for i, shape in enumerate(shapes):
      if rec.domain(i).min_abs: out.append(away_from_zero(rng, shape))
      else: out.append(rng.uniform(*smooth_interval(rec.domain(i)), shape))
    return out
  return sample


def _unary_away_from_zero(rng: np.random.Generator, shapes: tuple[Shape, ...]) -> list[np.ndarray]:
  return [away_from_zero(rng, shapes[0])]


def _denominator_away_from_zero(rng: np.random.Generator, shapes: tuple[Shape, ...]) -> list[np.ndarray]:
  return [rng.uniform(-2, 2, shapes[0]), away_from_zero(rng, shapes[1])]


def _apart(rng: np.random.Generator, shapes: tuple[Shape, ...]) -> list[np.ndarray]:
  """maximum/minimum: a differs from b by at least 0.2, on either side."""
  b = rng.uniform(-2, 2, shapes[1])
  return [b + away_from_zero(rng, shapes[0], 0.2, 1.0), b]


def _clip_bands(rng: np.random.Generator, shapes: tuple[Shape, ...]) -> list[np.ndarray]:
  """x below, inside and above [lo, hi], never within 0.2 of a bound."""
  bands = np.array([[-3.0, -1.7], [-0.3, 0.3], [1.7, 3.0]])
  pick = bands[rng.permutation(np.resize(np.arange(3), int(np.prod(shapes[0]))))]
  x = rng.uniform(pick[:, 0], pick[:, 1]).reshape(shapes[0])
  return [x, rng.uniform(-1.5, -0.5, shapes[1]), rng.uniform(0.5, 1.5, shapes[2])]


def _mod_away_from_jumps(rng: np.random.Generator, shapes: tuple[Shape, ...]) -> list[np.ndarray]:
  """a / b is an integer plus a fraction in [0.2, 0.8]: mod jumps only where a / b is an integer."""
  b = away_from_zero(rng, shapes[1], 0.5, 2.0)
  ratio = rng.integers(-3, 4, shapes[0]) + rng.uniform(0.2, 0.8, shapes[0])
  return [ratio * b, b]


def _power_positive_base(rng: np.random.Generator, shapes: tuple[Shape, ...]) -> list[np.ndarray]:
  """A positive base, with a base of exactly 1 and an exponent of exactly 0 among the points: there
  a ** b is 1 whatever the other operand, but d/da is b and d/db is log(a)."""
  a, b = rng.uniform(0.5, 2.0, shapes[0]), rng.uniform(-2.0, 2.0, shapes[1])
  a.flat[0], b.flat[1] = 1.0, 0.0
  return [a, b]


GRAD_SAMPLERS: dict[str, Sampler] = {
  "abs": _unary_away_from_zero, "cbrt": _unary_away_from_zero, "reciprocal": _unary_away_from_zero,
  "divide": _denominator_away_from_zero, "maximum": _apart, "minimum": _apart, "clip": _clip_bands,
  "mod": _mod_away_from_jumps, "power": _power_positive_base, "max": distinct, "min": distinct,
}


# ---- the records
def record_case(rec: OpRecord) -> tuple[Callable[..., Any], tuple[Shape, ...], Sampler]:
  """(function of the float arguments, their shapes, sampler) for one differentiable record. A where's
  condition is a fixed closure (it has no derivative); reductions reduce over axis 1."""
  sample = GRAD_SAMPLERS.get(rec.name, from_domains(rec))
  if rec.kind == "reduction": return (lambda x: rec.fn(x, axis=1, **rec.kwargs)), (REDUCTION_SHAPE,), sample
  if rec.name == "where": return (lambda x, y: rec.fn(MASK, x, y)), ELEMENTWISE_SHAPES[2], sample
  return (lambda *xs: rec.fn(*xs, **rec.kwargs)), ELEMENTWISE_SHAPES[rec.nargs], sample


GRAD_RECORDS = [r for r in ALL_RECORDS if r.differentiable]


def seed_of(name: str) -> int: return sum(map(ord, name))  # a fixed random stream per case name


@pytest.mark.parametrize("rec", GRAD_RECORDS, ids=str)
def test_record_second_order(rec: OpRecord) -> None:
  fn, shapes, sample = record_case(rec)
  args = [tnp.array(a) for a in sample(np.random.default_rng(seed_of(rec.name)), shapes)]
  check_grads(fn, args, order=2, modes=("fwd", "rev"))


# ---- movement, indexing and linear algebra: a table shared with test_vmap_registry and test_jit_registry
@dataclass(frozen=True)
class Case:
  """`fn` takes float arrays of `shapes` (one example's, for vmap); `sample` draws their values
  (default: uniform in [-2, 2]). Index arrays and masks are concrete NumPy closures."""
  name: str
  fn: Callable[..., Any]
  shapes: tuple[Shape, ...]
  sample: Optional[Sampler] = None

  def __repr__(self) -> str: return self.name

  def args(self, rng: np.random.Generator) -> list[np.ndarray]:
    return self.sample(rng, self.shapes) if self.sample else [rng.uniform(-2, 2, s) for s in self.shapes]


STRUCTURAL: tuple[Case, ...] = (
  # views that only reshape or only permute are checked as compositions: every function's rules run, at
  # the kernel cost of one case instead of one case per function
  Case("squeeze+reshape+expand_dims",
       lambda x: tnp.expand_dims(tnp.reshape(tnp.squeeze(x, 1), (3, 2)), (0, 2)), ((2, 1, 3),)),
  Case("reshape[F]", lambda x: tnp.reshape(x, (3, 2), order="F"), ((2, 3),)),
  Case("transpose+moveaxis", lambda x: tnp.moveaxis(tnp.transpose(x, (1, 2, 0)), 0, -1), ((2, 3, 2),)),
  Case("broadcast_to", lambda x: tnp.broadcast_to(x, (2, 2, 3)), ((2, 1),)),
  Case("concatenate", lambda x, y: tnp.concatenate([x, y, x], axis=1), ((2, 3), (2, 2))),
  Case("stack", lambda x, y: tnp.stack([x, y], axis=1), ((2, 3), (2, 3))),
  Case("split", lambda x: tuple(tnp.split(x, [1, 2], axis=1)), ((2, 3),)),
  Case("pad[constant]", lambda x: tnp.pad(x, ((1, 0), (0, 2)), constant_values=1.5), ((2, 3),)),
  *(Case(f"pad[{m}]", (lambda m: lambda x: tnp.pad(x, ((1, 1), (2, 1)), mode=m))(m), ((2, 3),))
    for m in ("edge", "reflect", "symmetric", "wrap")),
  Case("flip", lambda x: tnp.flip(x, 1), ((2, 3),)),
  Case("tile", lambda x: tnp.tile(x, (2, 1)), ((2, 3),)),
  Case("repeat", lambda x: tnp.repeat(x, 2, axis=0), ((2, 3),)),
  Case("repeat[counts]", lambda x: tnp.repeat(x, [1, 0, 2], axis=1), ((2, 3),)),
  Case("roll", lambda x: tnp.roll(x, (1, -1), axis=(0, 1)), ((2, 3),)),
  Case("slice[steps]", lambda x: x[::-2, 1::2], ((5, 4),)),
  Case("gather", lambda x: x[np.array([2, -3, 2]), 1:], ((3, 4),)),
  Case("mask", lambda x: x[MASK], ((2, 3),)),
  Case("at.set", lambda x, v: x.at[np.array([0, 3, 0])].set(v), ((5,), (3,))),
  Case("at.add", lambda x, v: x.at[np.array([1, 1, 4])].add(v), ((5,), (3,))),
  Case("at.multiply", lambda x, v: x.at[:, ::-2].multiply(v), ((2, 3), (2, 2))),
  Case("at.min", lambda x, v: x.at[np.array([4, 0, 2])].min(v), ((5,), (3,)), distinct),
  Case("at.max", lambda x, v: x.at[1:, np.array([0, 2])].max(v), ((2, 3), (2,)), distinct),
  Case("matmul", lambda a, b: a @ b, ((2, 3), (3, 2))),
  Case("matmul[batched]", lambda a, b: tnp.matmul(a, b), ((2, 2, 3), (3,))),
  Case("dot", lambda a, b: tnp.dot(a, b), ((2, 3), (2, 3, 2))),
  Case("tensordot", lambda a, b: tnp.tensordot(a, b, axes=([1, 2], [0, 1])), ((2, 3, 2), (3, 2, 2))),
  Case("einsum[ij,jk->ik]", lambda a, b: tnp.einsum("ij,jk->ik", a, b), ((2, 3), (3, 2))),
  Case("einsum[bij,bkj->bik]", lambda a, b: tnp.einsum("bij,bkj->bik", a, b), ((2, 2, 3), (2, 2, 3))),
  Case("einsum[ii,i->i]", lambda a, b: tnp.einsum("ii,i->i", a, b), ((3, 3), (3,))),
  Case("outer", lambda a, b: tnp.outer(a, b), ((3,), (2,))),
  # the lax/surface breadth (tgfn/lax, tgfn/ops/arrays_extra.py)
  Case("lax.conv_general_dilated",
       lambda x, w: lax.conv_general_dilated(x, w, (1, 2), ((1, 0), (0, 1)), rhs_dilation=(1, 2)),
       ((1, 1, 3, 4), (2, 1, 2, 2))),
  Case("lax.reduce_window[max]", lambda x: lax.reduce_window(x, -np.inf, lax.max, (2, 2), (1, 2), "VALID"),
       ((3, 4),), distinct),
  Case("lax.pad[interior]", lambda x: lax.pad(x, 0.0, [(1, -1, 1), (0, 2, 0)]), ((2, 3),)),
  Case("lax.dot_general", lambda a, b: lax.dot_general(a, b, (((1,), (0,)), ((), ()))), ((2, 3), (3, 2))),
  Case("take_along_axis", lambda x: tnp.take_along_axis(x, np.array([[2, 0], [1, 1]]), axis=1), ((2, 3),)),
  Case("triu+diff", lambda x: tnp.diff(tnp.triu(x, 1), axis=0), ((3, 3),)),
)


@pytest.mark.parametrize("case", STRUCTURAL, ids=str)
def test_structural_second_order(case: Case) -> None:
  args = [tnp.array(a) for a in case.args(np.random.default_rng(seed_of(case.name)))]
  check_grads(case.fn, args, order=2, modes=("fwd", "rev"))


# ---- ties: the cotangent is split evenly among tied elements (JAX's convention), in both modes
def test_max_ties_share_the_cotangent() -> None:
  x = tnp.array([1.0, 3.0, 3.0])
  assert_close(tgfn.grad(tnp.max)(x), np.array([0.0, 0.5, 0.5], np.float32))
  assert_close(tgfn.grad(tnp.min)(tnp.array([2.0, 1.0, 1.0])), np.array([0.0, 0.5, 0.5], np.float32))
  assert_close(tgfn.jacfwd(tnp.max)(x), np.array([0.0, 0.5, 0.5], np.float32))
  # along an axis, each row splits its own cotangent: a three-way tie gets a third each
  rows = tnp.array([[2.0, 2.0, 2.0], [0.0, 5.0, 1.0]])
  want = np.array([[1 / 3, 1 / 3, 1 / 3], [0.0, 1.0, 0.0]], np.float32)
  assert_close(tgfn.grad(lambda v: tnp.max(v, axis=1).sum())(rows), want)
  tangent = tnp.array([[3.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
  _, tangent_out = tgfn.jvp(lambda v: tnp.max(v, axis=1), (rows,), (tangent,))
  assert_close(tangent_out, np.array([1.0, 1.0], np.float32))  # the mean of the tied tangents: (3+0+0)/3


def test_maximum_ties_share_the_cotangent() -> None:
  for fn in (tnp.maximum, tnp.minimum):
    assert_close(tgfn.grad(fn)(2.0, 2.0), np.float32(0.5))
    assert_close(tgfn.grad(fn, argnums=1)(2.0, 2.0), np.float32(0.5))
    assert_close(tgfn.grad(lambda x: fn(x, x))(2.0), np.float32(1.0))  # both halves reach x
    assert_close(tgfn.jvp(fn, (2.0, 2.0), (1.0, 0.0))[1], np.float32(0.5))
  # clip at a bound is a tie of maximum (or minimum): half of the cotangent reaches x
  assert_close(tgfn.grad(lambda x: tnp.clip(x, 1.0, 3.0).sum())(tnp.array([1.0, 2.0, 3.0, 4.0])),
               np.array([0.5, 1.0, 0.5, 0.0], np.float32))


def test_piecewise_constant_functions_have_zero_derivative() -> None:
  """floor, ceil, trunc, round and sign are flat almost everywhere (JAX's convention): zero in both
  modes, and a product with them differentiates the other factor only."""
  x = tnp.array([-1.7, -0.2, 0.4, 2.5])
  for fn in (tnp.floor, tnp.ceil, tnp.trunc, tnp.round, tnp.sign):
    assert_close(tgfn.grad(lambda v: fn(v).sum())(x), np.zeros(4, np.float32))
    assert_close(tgfn.jvp(fn, (x,), (tnp.ones(4),))[1], np.zeros(4, np.float32))
  assert_close(tgfn.grad(lambda v: (v * tnp.floor(v)).sum())(x), np.floor(np.asarray(x)))


@pytest.mark.parametrize("device", ["PYTHON"], indirect=True)
def test_smoke_on_the_reference_device(device: str) -> None:
  """A first-order check of a nonlinear function and a gather on the PYTHON interpreter."""
  rng = np.random.default_rng(0)
  check_grads(lambda a, b: tnp.tanh(a) * b[np.array([1, 0, 1])], [tnp.array(rng.uniform(-1, 1, 3)),
              tnp.array(rng.uniform(-1, 1, 2))], order=1)
