"""A small convolutional classifier on the 8x8 digits: two 3x3 convolutions (`lax.conv_general_dilated`,
NCHW), ReLU, 2x2 max pooling (`lax.reduce_window`), a dense layer, softmax cross-entropy, Adam."""
from types import SimpleNamespace

import numpy as np

from .common import Program, adam, dense, training_step
from .data import digits

CONFIG = SimpleNamespace(channels=(16, 32), batch=128, lr=1e-3)


def build(jax, cfg=CONFIG) -> Program:
  jnp, lax = jax.numpy, jax.lax
  pixels, labels = digits()
  idx = np.random.default_rng(0).integers(0, len(pixels), size=(64, cfg.batch))
  c1, c2 = cfg.channels

  def conv(w, b, x):
    y = lax.conv_general_dilated(x, w, window_strides=(1, 1), padding="SAME")
    return jax.nn.relu(y + b[None, :, None, None])

  def loss_fn(params, batch):
    x, y = batch
    h = conv(params["w1"], params["b1"], x.reshape(-1, 1, 8, 8))
    h = conv(params["w2"], params["b2"], h)
    h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
    out = h.reshape(h.shape[0], -1) @ params["out"]["w"] + params["out"]["b"]
    logp = jax.nn.log_softmax(out, axis=-1)
    return -jnp.take_along_axis(logp, y[:, None], axis=-1).mean()

  opt_init, opt_update = adam(jax, cfg.lr)

  def init():
    k = jax.random.split(jax.random.PRNGKey(0), 3)
    params = {"w1": jax.random.normal(k[0], (c1, 1, 3, 3)) / 3.0, "b1": jnp.zeros((c1,)),
              "w2": jax.random.normal(k[1], (c2, c1, 3, 3)) / np.sqrt(9 * c1), "b2": jnp.zeros((c2,)),
              "out": dense(jax, k[2], c2 * 16, 10)}
    return {"params": params, "opt": opt_init(params)}
  return Program(init, jax.jit(training_step(jax, loss_fn, opt_update)),
                 lambda i: (pixels[idx[i % 64]], labels[idx[i % 64]]))
