"""Records JAX's values and first derivatives of tgfn's elementwise functions and activations at their
kinks, ties, poles, domain edges, zero and +-inf, into kink_grads.json next to this file.

Run once where JAX is installed (`python tests/data/gen_kink_grads.py`); the test
(tests/transforms/test_kink_grads.py) reads the JSON and needs no JAX. Each case is an expression in `x`
over the names `np`, `nn` and `special`, evaluated with jax.numpy / jax.nn / jax.scipy.special here and
with tgfn.numpy / tgfn.nn / tgfn.scipy.special in the test; every case is elementwise in x.
For each point: the value, the derivative by reverse mode (jax.grad of the scalar function) and by
forward mode (jax.jvp with tangent 1). Numbers are float32; NaN and +-inf are stored as strings.
"""
from __future__ import annotations

import json
import math
import os

import numpy

INF = math.inf
# zero (both signs), the kinks of the activations (+-1, +-3, 6), the domain edges (+-1, 0) and +-inf
POINTS = (-INF, -6.0, -3.0, -2.0, -1.0, -0.5, -0.0, 0.0, 0.5, 1.0, 2.0, 3.0, 6.0, INF)

_UNARY = ("abs", "absolute", "sign", "square", "reciprocal", "sqrt", "cbrt", "exp", "exp2", "log", "log2",
          "log10", "log1p", "expm1", "sin", "cos", "tan", "tanh", "sinh", "cosh", "arctan", "arcsin", "arccos",
          "arcsinh", "arccosh", "arctanh", "sinc", "trunc", "floor", "ceil", "round", "rint", "negative",
          "positive")
_BINARY = ("maximum(x, x)", "maximum(x, 0.)", "maximum(0., x)", "minimum(x, x)", "minimum(x, 0.)",
           "minimum(0., x)", "clip(x, -1., 1.)", "clip(x, 0.)", "clip(x, None, 0.)", "power(x, 2.)",
           "power(x, 3.)", "power(x, 0.5)", "power(x, 0.)", "power(x, -1.)", "power(2., x)", "power(x, x)",
           "arctan2(x, 1.)", "arctan2(1., x)", "arctan2(x, 0.)", "arctan2(0., x)", "arctan2(x, x)",
           "hypot(x, 0.)", "hypot(x, x)", "hypot(x, 1.)", "logaddexp(x, 0.)", "logaddexp(x, x)",
           "logaddexp(x, -np.inf)", "logaddexp2(x, 0.)", "logaddexp2(x, x)", "divide(1., x)", "mod(x, 1.)",
           "floor_divide(x, 1.)", "copysign(x, 1.)", "copysign(x, -1.)", "copysign(1., x)",
           "where(x > 0, x, 0.)", "where(x >= 0, x, 0.)")
_NN = ("relu(x)", "relu6(x)", "leaky_relu(x)", "elu(x)", "celu(x)", "selu(x)", "gelu(x)",
       "gelu(x, approximate=False)", "silu(x)", "sigmoid(x)", "softplus(x)", "soft_sign(x)", "log_sigmoid(x)",
       "hard_tanh(x)", "hard_sigmoid(x)", "hard_silu(x)", "mish(x)", "squareplus(x)", "sparse_plus(x)",
       "sparse_sigmoid(x)", "identity(x)", "logsumexp(np.stack([x, np.zeros_like(x)]), axis=0)",
       "logsumexp(np.stack([x, x]), axis=0)", "softmax(np.stack([x, np.zeros_like(x)]), axis=0)[0]",
       "log_softmax(np.stack([x, np.zeros_like(x)]), axis=0)[0]")
_SPECIAL = ("erf(x)", "erfc(x)", "erfinv(x)", "erfcx(x)", "ndtr(x)", "ndtri(x)", "log_ndtr(x)", "expit(x)",
            "logit(x)", "gammaln(x)", "digamma(x)", "xlogy(x, 1.)", "xlogy(x, 0.)", "xlogy(1., x)", "xlogy(x, x)",
            "xlog1py(x, 0.)", "xlog1py(x, -1.)", "xlog1py(1., x)", "xlog1py(x, x)",
            "logsumexp(np.stack([x, np.zeros_like(x)]), axis=0)")

CASES = ([f"np.{name}(x)" for name in _UNARY] + [f"np.{call}" for call in _BINARY] + [f"nn.{call}" for call in _NN]
         + [f"special.{call}" for call in _SPECIAL])


def encode(value: float) -> float | str:
  """A float32 result for JSON: finite numbers as numbers, NaN and +-inf as strings."""
  value = float(value)
  return value if math.isfinite(value) else str(value)


def to_json(header: dict, cases: dict) -> str:
  """The record with one line per case, so that a diff of a regenerated file reads case by case."""
  fields = [f" {json.dumps(key)}: {json.dumps(value)}" for key, value in header.items()]
  rows = [f"  {json.dumps(expr)}: {json.dumps(record)}" for expr, record in cases.items()]
  return "{\n" + ",\n".join(fields + [' "cases": {\n' + ",\n".join(rows) + "\n }"]) + "\n}\n"


def main() -> None:
  import jax
  import jax.numpy as jnp
  import jax.scipy.special as jss
  jax.config.update("jax_enable_x64", False)
  names = {"np": jnp, "nn": jax.nn, "special": jss}
  points = jnp.asarray(POINTS, jnp.float32)
  cases = {}
  for expr in CASES:
    f = eval(f"lambda x: {expr}", dict(names))
    value = jax.vmap(f)(points)
    grad = jax.vmap(jax.grad(f))(points)
    jvp = jax.vmap(lambda p, f=f: jax.jvp(f, (p,), (jnp.ones_like(p),))[1])(points)
    assert value.dtype == jnp.float32, (expr, value.dtype)
    cases[expr] = {what: [encode(v) for v in numpy.asarray(arr)] for what, arr in
                   (("value", value), ("grad", grad), ("jvp", jvp))}
  header = {"jax_version": jax.__version__, "dtype": "float32", "points": [encode(p) for p in POINTS]}
  path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kink_grads.json")
  with open(path, "w") as f: f.write(to_json(header, cases))
  print(f"wrote {len(cases)} cases at {len(POINTS)} points to {path}")


if __name__ == "__main__":
  main()
