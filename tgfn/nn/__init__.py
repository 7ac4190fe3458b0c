"""`tgfn.nn`: neural-network building blocks on tgfn arrays.

`tgfn.nn.functional` and `tgfn.nn.activations` hold stateless functions (activations, losses, conv2d, pooling, attention,
dropout); `tgfn.nn.layers` holds layers that are pytrees (Linear, Conv2d, BatchNorm, ...), built with
`Layer.init(key, ...)` and called as functions, so `tgfn.grad`, `vmap` and `jit` take whole models.
Both are re-exported here: `tgfn.nn.relu`, `tgfn.nn.Linear`.
"""
from tgfn.nn.functional import *  # noqa: F401,F403
from tgfn.nn.activations import *  # noqa: F401,F403
from tgfn.nn.layers import (BatchNorm, Conv2d, Dropout, Embedding, GroupNorm, Lambda,  # noqa: F401
                            LayerNorm, Linear, MultiHeadAttention, RMSNorm, Sequential)
from tgfn.nn import state, datasets  # noqa: F401
from tgfn.nn import optim  # noqa: F401
from tgfn.nn import initializers  # noqa: F401
