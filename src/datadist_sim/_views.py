"""``tensor_views``: numpy views of a cache's tensors (what ``torchair.llm_datadist.create_npu_tensors`` is
to real clients), so a test can fill the Prompt side and read what the Decode side received."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, List, Optional, Sequence, Union

import numpy as np
import numpy.typing as npt

from datadist_sim._status import LLMStatusCode
from datadist_sim._world import surface
from datadist_sim._world.surface import MemoryAccessError, SimError, SimWorld, current_world

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

    Memory that cannot be handed out raises ``datadist_sim.MemoryAccessError`` (its ``code`` says why:
    ``LLM_DEVICE_MEM_ERROR`` for a poisoned range, ``LLM_PARAM_INVALID`` for freed or foreign memory,
    ``LLM_FEATURE_NOT_ENABLED`` in a metadata-only world); no view is returned for any tensor then.
    """
    from datadist_sim.llm_datadist.data_type import DataType
    from datadist_sim.llm_datadist.v2.llm_types import Cache, KvCache

    space = (world if world is not None else current_world()).memory
    if isinstance(cache, Cache):
        addrs: Sequence[int] = cache.tensor_addrs
    elif isinstance(cache, KvCache):
        per_device = cache.per_device_tensor_addrs
        if not per_device:  # a deallocated KvCache keeps no addresses
            raise MemoryAccessError(
                LLMStatusCode.LLM_PARAM_INVALID, "the KvCache was deallocated: no tensors"
            )
        if not 0 <= device_index < len(per_device):
            raise ValueError(f"device_index {device_index} is out of range for {len(per_device)} device(s)")
        addrs = per_device[device_index]
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
    try:
        return surface.tensor_views(space, addrs, shape, np.dtype(np_dtype))
    except SimError as exc:
        raise MemoryAccessError(exc.code, exc.message) from None
