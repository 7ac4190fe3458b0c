"""`tgfn.scipy.stats`: the normal distribution."""
from tgfn.scipy.stats import norm  # noqa: F401
