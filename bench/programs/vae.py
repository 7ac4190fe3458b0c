"""A variational autoencoder on the 8x8 digits: MLP encoder to a 16-d Gaussian, the reparameterization
trick with a fresh PRNG key split off every step, MLP decoder with Bernoulli likelihood, Adam."""
from types import SimpleNamespace

from .common import Program, adam, dense, training_step
from .data import batches, digits

CONFIG = SimpleNamespace(hidden=128, latent=16, batch=128, lr=1e-3)


def build(jax, cfg=CONFIG) -> Program:
  jnp = jax.numpy
  pixels, _ = digits()
  next_batch = batches(pixels, cfg.batch)

  def mlp(p, x):
    return jax.nn.relu(x @ p[0]["w"] + p[0]["b"]) @ p[1]["w"] + p[1]["b"]

  def loss_fn(params, batch):
    x, key = batch
    stats = mlp(params["enc"], x)
    mu, log_var = stats[:, :cfg.latent], stats[:, cfg.latent:]
    z = mu + jnp.exp(0.5 * log_var) * jax.random.normal(key, mu.shape)
    out = mlp(params["dec"], z)
    nll = (jax.nn.softplus(out) - x * out).sum(-1)  # Bernoulli negative log-likelihood from logits
    kl = 0.5 * (jnp.exp(log_var) + mu ** 2 - 1 - log_var).sum(-1)
    return (nll + kl).mean()

  opt_init, opt_update = adam(jax, cfg.lr)
  update = training_step(jax, loss_fn, opt_update)

  def init():
    k = jax.random.split(jax.random.PRNGKey(0), 5)
    params = {"enc": [dense(jax, k[0], 64, cfg.hidden), dense(jax, k[1], cfg.hidden, 2 * cfg.latent)],
              "dec": [dense(jax, k[2], cfg.latent, cfg.hidden), dense(jax, k[3], cfg.hidden, 64)]}
    return {"params": params, "opt": opt_init(params), "key": k[4]}

  @jax.jit
  def step(state, x):
    key, sub = jax.random.split(state["key"])
    state, loss = update(state, (x, sub))
    return {**state, "key": key}, loss
  return Program(init, step, next_batch)
