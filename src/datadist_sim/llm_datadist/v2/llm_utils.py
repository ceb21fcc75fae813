"""Argument helpers shared by the two managers (real module: ``llm_datadist.v2.llm_utils``).

Only the pure helpers live here; the real module's transfer job/thread machinery belongs to the simulated
engine, which drives ``CacheTask`` (``llm_types``) with its own worker thread. The ``pack_*`` functions give
the ``Key`` the engine call receives, and are what the simulator keys its tables by, since key objects
compare by identity.
"""

from __future__ import annotations

import math
from typing import List, Optional, Sequence, Tuple, Union

from datadist_sim._world.door import Key
from datadist_sim.llm_datadist.data_type import DataType, element_size
from datadist_sim.llm_datadist.status import raise_if_false, raise_if_true
from datadist_sim.llm_datadist.utils.utils import (
    UINT64_MAX,
    check_isinstance,
    check_list_uint64,
    check_uint32,
)
from datadist_sim.llm_datadist.v2.llm_types import (
    BlocksCacheKey,
    CacheDesc,
    CacheKey,
    CacheKeyByIdAndIndex,
    MemInfo,
)

_INVALID_ID = UINT64_MAX
_NUM_TENSORS_PER_LAYER = 2

PackedKey = Key


def clone_cache_desc(cache_desc: CacheDesc) -> CacheDesc:
    """A fresh description over a copy of the shape (the blocks flag is not carried over, as in real)."""
    return CacheDesc(
        cache_desc.num_tensors,
        list(cache_desc.shape),
        cache_desc.data_type,
        cache_desc.placement,
        cache_desc.batch_dim,
        cache_desc.seq_len_dim_index,
        cache_desc.kv_tensor_format,
    )


def is_invalid_id(req_id_or_prefix_id: int) -> bool:
    return req_id_or_prefix_id < 0 or req_id_or_prefix_id == _INVALID_ID


def is_valid_id(req_id_or_prefix_id: int) -> bool:
    return not is_invalid_id(req_id_or_prefix_id)


def check_cache_key(cache_key: CacheKey) -> None:
    """A pulled ``CacheKey`` must name exactly one of ``req_id`` and ``prefix_id``."""
    raise_if_true(
        is_invalid_id(cache_key.req_id) and is_invalid_id(cache_key.prefix_id),
        f"one of req id and prefix id should contain valid value:[0, 2**64-1), "
        f"req id:{cache_key.req_id},prefix id:{cache_key.prefix_id}.",
    )
    raise_if_true(
        is_valid_id(cache_key.req_id) and is_valid_id(cache_key.prefix_id),
        "only one of req id and prefix id should contain valid value:[0, 2**64-1), "
        f"req id:{cache_key.req_id}, prefix id:{cache_key.prefix_id}.",
    )


def calc_tensor_size(shape: Sequence[int], data_type: DataType) -> int:
    """Bytes of one tensor; a dynamic (negative) dim cannot be sized (``LLM_PARAM_INVALID``)."""
    size = -1 if any(dim < 0 for dim in shape) else math.prod(shape) * element_size(data_type)
    raise_if_false(size >= 0, "Failed to calc tensor size, shape = {0}, data_type = {1}", shape, data_type)
    return size


def check_block_indices(arg_name: str, arg_value: Optional[Sequence[int]]) -> None:
    """Optional list/tuple of uint64 block indices."""
    if arg_value is not None:
        check_isinstance(arg_name, arg_value, [list, tuple], int)
        check_list_uint64(arg_name, arg_value)


def _layers_to_tensors(name: str, layer_range: Optional[range], per_layer: int) -> List[int]:
    layers = [] if layer_range is None else list(layer_range)
    if not layers:
        return []
    raise_if_true(layers[0] < 0, f"{name} is invalid, the start value:{{0}} is < 0", layers[0])
    check_uint32(name, layers[0])
    check_uint32(name, layers[-1])
    start = layers[0] * per_layer
    return list(range(start, start + len(layers) * per_layer))


def layer_range_to_tensor_indices(
    src_layer_range: Optional[range],
    dst_layer_range: Optional[range],
    tensor_num_per_layer: int = _NUM_TENSORS_PER_LAYER,
) -> Tuple[List[int], List[int]]:
    """Expand layer ranges into tensor indices (``per_layer`` tensors per layer); None/empty gives ``[]``.

    Both type and step checks run before either expansion, in the real order.
    """
    if src_layer_range is None and dst_layer_range is None:
        return [], []  # no range: nothing to check or expand (the common pull)
    check_isinstance("src_layer_range", src_layer_range, range)
    check_isinstance("dst_layer_range", dst_layer_range, range)
    raise_if_true(
        src_layer_range is not None and src_layer_range.step != 1,
        "param check failed, src_layer_range step must be 1.",
    )
    raise_if_true(
        dst_layer_range is not None and dst_layer_range.step != 1,
        "param check failed, dst_layer_range step must be 1.",
    )
    return (
        _layers_to_tensors("src_layer_range", src_layer_range, tensor_num_per_layer),
        _layers_to_tensors("dst_layer_range", dst_layer_range, tensor_num_per_layer),
    )


def parse_listen_ip_info(listen_ip_info: str) -> Tuple[str, int]:
    """``"ip:port"`` -> ``(ip, port)``; a bad shape is LLMException, a non-numeric port ``ValueError``."""
    check_isinstance("listen_ip_info", listen_ip_info, [str])
    ip_and_port = listen_ip_info.split(":")
    raise_if_false(
        len(ip_and_port) == 2, f'llm.listenIpInfo "{listen_ip_info}" is invalid, format should be "ip:port"'
    )
    return ip_and_port[0], int(ip_and_port[1])


def pack_cache_desc(
    cache_desc: CacheDesc, is_blocks: Optional[bool] = None
) -> Tuple[int, int, int, int, List[int], int, bool]:
    """The engine's tuple of a desc: (num_tensors, dtype, seq_len_dim_index, batch_dim, shape, placement,
    is_blocks). The allocating or registering API says the cache's kind (``is_blocks``); the desc's own
    flag is only the default, and the desc is never changed (hixl ``llm_utils.py`` at ``49b96c60``;
    before it, the blocks APIs set the flag on the caller's desc, ``cache_manager.py:85,362`` of the
    August snapshot, and a desc reused for a regular cache went on as blocks)."""
    return (
        cache_desc.num_tensors,
        cache_desc.data_type.value,
        cache_desc.seq_len_dim_index,
        cache_desc.batch_dim,
        list(cache_desc.shape),
        int(cache_desc.placement),
        cache_desc._is_blocks if is_blocks is None else is_blocks,
    )


# A ``Key`` is made from the tuple of its fields as the named tuple's own ``_make`` makes one
# (``tuple.__new__``), not through the Python ``__new__`` a ``NamedTuple`` is called by: that call
# costs as much as the rest of packing a key, and every pull packs one.


def pack_cache_key(cache_key: CacheKey) -> PackedKey:
    """(cluster_id, cache_id, batch_index, req_id, prefix_id, model_id, is_blocks) of a ``CacheKey``."""
    fields = (
        cache_key.prompt_cluster_id,
        -1,
        0,
        cache_key.req_id,
        cache_key.prefix_id,
        cache_key.model_id,
        False,
    )
    return tuple.__new__(Key, fields)


def pack_cache_key_by_id(cache_key: CacheKeyByIdAndIndex) -> PackedKey:
    if type(cache_key) is CacheKeyByIdAndIndex:  # its own fields, read without the properties' calls
        return tuple.__new__(
            Key,
            (
                cache_key._prompt_cluster_id,
                cache_key._prompt_cache_id,
                cache_key._prompt_batch_index,
                _INVALID_ID,
                _INVALID_ID,
                0,
                False,
            ),
        )
    return tuple.__new__(
        Key,
        (cache_key.cluster_id, cache_key.cache_id, cache_key.batch_index, _INVALID_ID, _INVALID_ID, 0, False),
    )


def pack_pulled_key(cache_key: Union[CacheKey, CacheKeyByIdAndIndex]) -> PackedKey:
    """The key a ``pull_cache`` names, packed: a ``CacheKey`` checked first (``check_cache_key``), a key
    by id as it is. Both faces' ``pull_cache`` call it where their vendor order checks the key."""
    if isinstance(cache_key, CacheKey):
        check_cache_key(cache_key)
        return pack_cache_key(cache_key)
    return pack_cache_key_by_id(cache_key)


def pack_block_cache_key(cache_key: BlocksCacheKey) -> PackedKey:
    return tuple.__new__(
        Key, (cache_key.prompt_cluster_id, -1, 0, _INVALID_ID, _INVALID_ID, cache_key.model_id, True)
    )


def pack_mem_info(mem_info: MemInfo) -> Tuple[int, int, int]:
    return (mem_info.mem_type.value, mem_info.addr, mem_info.size)
