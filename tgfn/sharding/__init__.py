"""`tgfn.sharding`: meshes of devices and how arrays are split over them (jax.sharding's names)."""
from tgfn.sharding.mesh import Mesh, P, PartitionSpec, make_mesh  # noqa: F401
from tgfn.sharding.named import NamedSharding, Shard, ShardedArray, SingleDeviceSharding  # noqa: F401
