"""tgfn.nn.initializers against jax.nn.initializers' values for the same key (JAX 0.10.2, float32):
bit for bit, except orthogonal (QR factorizations by different LAPACKs: equal to rounding)."""
import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp
from tgfn import random
from tgfn.engine.realize import Counters
from tgfn.nn import initializers as I

KEY = random.key(0)
JAX_FIRST6 = {
  "glorot_uniform": ((3, 4), [0.8289182186126709, 0.886157751083374, -0.31053584814071655, -0.05801473930478096, 0.12940874695777893, -0.6193680763244629]),
  "glorot_normal": ((3, 4), [0.8847432732582092, 1.0420019626617432, -0.25077056884765625, -0.04559559375047684, 0.10208923369646072, -0.5545685291290283]),
  "he_uniform": ((2, 3, 4), [0.895334005355835, 0.9571597576141357, -0.3354170322418213, -0.06266307830810547, 0.13977742195129395, -0.6689939498901367]),
  "he_normal": ((3, 4), [1.3514677286148071, 1.5916844606399536, -0.38305842876434326, -0.06964842975139618, 0.15594390034675598, -0.84711754322052]),
  "lecun_uniform": ((3, 4), [0.895334005355835, 0.9571597576141357, -0.3354170322418213, -0.06266307830810547, 0.13977742195129395, -0.6689939498901367]),
  "lecun_normal": ((3, 4), [0.9556319713592529, 1.1254907846450806, -0.2708631753921509, -0.049248870462179184, 0.1102689802646637, -0.599002480506897]),
}
BUILT = {
  "vs_fan_out_normal": (I.variance_scaling(0.5, "fan_out", "normal"), (3, 4),
                        [0.57369065284729, 0.7160391807556152, -0.1532987803220749, -0.02779543027281761, 0.06225753203034401, -0.34368544816970825]),
  "vs_fan_geo_avg_uniform": (I.variance_scaling(3.0, "fan_geo_avg", "uniform", in_axis=0, out_axis=(1, 2)), (2, 3, 4),
                             [1.213538408279419, 1.297337293624878, -0.45462527871131897, -0.08493372797966003, 0.18945474922657013, -0.9067564606666565]),
  "vs_batch_axis": (I.variance_scaling(1.0, "fan_avg", "truncated_normal", batch_axis=0), (2, 3, 4),
                    [0.8847432732582092, 1.0420019626617432, -0.25077056884765625, -0.04559559375047684, 0.10208923369646072, -0.5545685291290283]),
  "normal": (I.normal(0.5), (3, 4), [0.8113210797309875, 1.0126323699951172, -0.21679721772670746, -0.03930867463350296, 0.08804544806480408, -0.48604461550712585]),
  "uniform": (I.uniform(2.0), (3, 4), [1.895334005355835, 1.9571597576141357, 0.6645829677581787, 0.9373369216918945, 1.139777421951294, 0.3310060501098633]),
  "truncated_normal": (I.truncated_normal(0.3), (3, 4), [0.43678778409957886, 0.5144246220588684, -0.12380260974168777, -0.02251003123819828, 0.05040030553936958, -0.27378425002098083]),
}


@pytest.mark.parametrize("name", sorted(JAX_FIRST6))
def test_named_initializers_match_jax(name):
  shape, want = JAX_FIRST6[name]
  got = getattr(I, name)()(KEY, shape, tnp.float32)
  assert got.shape == shape and got.dtype is tnp.float32
  np.testing.assert_array_equal(np.asarray(got).ravel()[:6], np.array(want, np.float32))


@pytest.mark.parametrize("name", sorted(BUILT))
def test_built_initializers_match_jax(name):
  init, shape, want = BUILT[name]
  np.testing.assert_array_equal(np.asarray(init(KEY, shape)).ravel()[:6], np.array(want, np.float32))


def test_bfloat16_glorot_matches_jax():
  got = I.glorot_uniform()(KEY, (3, 4), tnp.bfloat16)
  assert got.dtype is tnp.bfloat16
  np.testing.assert_array_equal(np.asarray(got.astype(tnp.float32)).ravel()[:6],
                                [0.275390625, 0.1298828125, -0.63671875, -0.55078125, 0.390625, -0.44921875])


def test_orthogonal_initializer():
  w = np.asarray(I.orthogonal(2.0)(KEY, (3, 4)))
  np.testing.assert_allclose(w.ravel()[:6], [1.6675891876220703, -0.0807950422167778, -0.5090184807777405,
                                             -0.9764829874038696, 1.0838226079940796, 0.13146963715553284], atol=2e-6)
  np.testing.assert_allclose(w @ w.T, 4 * np.eye(3), atol=1e-5)
  with pytest.raises(ValueError, match="2D"):
    I.orthogonal()(KEY, (3,))


@pytest.mark.parametrize("jitted", [False, True])
def test_orthogonal_initializer_compiles_a_few_small_kernels(jitted):
  """QR runs as one LAPACK host kernel: a column-by-column Gram-Schmidt trace became ~700 kernels at
  (64, 32), with fused chains growing with every column, and never finished compiling."""
  init = I.orthogonal(1.5)
  build = tgfn.jit(init, static_argnums=1) if jitted else init
  kernels, chars = Counters.kernels_compiled, Counters.source_chars
  w = build(random.key(7), (256, 128))
  assert w.shape == (256, 128) and w.dtype is tnp.float32
  w = np.asarray(w)
  # (the normal sampler's kernel, threefry and erfinv in vector code, is ~140 K characters of it)
  assert Counters.kernels_compiled - kernels <= 4 and Counters.source_chars - chars <= 200_000
  np.testing.assert_allclose(w.T @ w, 1.5 ** 2 * np.eye(128), atol=1e-5)
  # jax.nn.initializers.orthogonal(1.5)(jax.random.key(7), (256, 128)): its first and last values
  np.testing.assert_allclose(w.ravel()[:4], [0.041753947734832764, 0.181113600730896, -0.08178308606147766,
                                             -0.012887122109532356], atol=2e-6)
  np.testing.assert_allclose(w[-1, -3:], [-0.16950133442878723, 0.10254515707492828, 0.0789136216044426], atol=2e-6)


def test_constant_zeros_ones_and_aliases():
  assert I.zeros(KEY, (2, 3)).tolist() == [[0.0] * 3] * 2 and I.ones(KEY, 2, tnp.int32).dtype is tnp.int32
  c = I.constant(-1.5, tnp.float16)(KEY, (2,))
  assert c.dtype is tnp.float16 and c.tolist() == [-1.5, -1.5]
  assert I.xavier_uniform is I.glorot_uniform and I.kaiming_normal is I.he_normal


def test_argument_errors():
  with pytest.raises(ValueError, match="mode"):
    I.variance_scaling(1.0, "fan_sideways", "normal")
  with pytest.raises(ValueError, match="distribution"):
    I.variance_scaling(1.0, "fan_in", "cauchy")
  with pytest.raises(ValueError, match="in_axis"):
    I.lecun_normal()(KEY, (5,))
  with pytest.raises(ValueError, match="float dtype"):
    I.normal()(KEY, (2,), tnp.int32)
