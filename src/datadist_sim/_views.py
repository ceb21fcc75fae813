"""``tensor_views``: numpy views of a cache's tensors (what ``torchair.llm_datadist.create_npu_tensors`` is
to real clients), so a test can fill the Prompt side and read what the Decode side received."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, List, Optional, Sequence, Union

import numpy as np
import numpy.typing as npt

from datadist_sim._world import address_space
from datadist_sim._world.current import current_world
from datadist_sim._world.world import SimWorld

if TYPE_CHECKING:
    from datadist_sim.llm_datadist.data_type import DataType
    from datadist_sim.llm_datadist.v2.llm_types import Cache, KvCache


def tensor_views(
    cache: Union[Cache, KvCache, Sequence[int]],
    shape: Optional[Sequence[int]] = None,
    dtype: Union[DataType, npt.DTypeLike, None] = None,
    *,
    device_index: int = 0,
    world: Optional[SimWorld] = None,
) -> List[npt.NDArray[Any]]:
    """One writable numpy view per tensor of ``cache`` (a ``Cache``, a ``KvCache`` or raw addresses).

    ``shape``/``dtype`` default to the cache's description; for raw addresses both are required. A
    ``KvCache`` gives the tensors of device ``device_index``. Views alias the cache memory: writing into
    one is writing into the cache. ``world`` defaults to the current world.
    """
    from datadist_sim.llm_datadist.data_type import DataType
    from datadist_sim.llm_datadist.v2.llm_types import Cache, KvCache

    space = (world if world is not None else current_world()).memory
    if isinstance(cache, Cache):
        addrs: Sequence[int] = cache.tensor_addrs
    elif isinstance(cache, KvCache):
        addrs = cache.per_device_tensor_addrs[device_index]
    else:
        addrs = list(cache)
    if isinstance(cache, (Cache, KvCache)):
        shape = list(cache.cache_desc.shape) if shape is None else shape
        dtype = cache.cache_desc.data_type if dtype is None else dtype
    if shape is None or dtype is None:
        raise ValueError("shape and dtype are required for raw addresses")
    if isinstance(dtype, DataType):
        from datadist_sim.llm_datadist import data_type

        np_dtype: npt.DTypeLike = data_type.dtype_to_np_dtype[dtype]
    else:
        np_dtype = dtype
    return address_space.tensor_views(space, addrs, shape, np.dtype(np_dtype))
