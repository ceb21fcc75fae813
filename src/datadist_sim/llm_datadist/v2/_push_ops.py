"""Push operations of ``CacheManager``: ``push_cache`` and ``push_blocks``, which need
``enable_remote_cache_accessible``. Checks follow the real file in order."""

from __future__ import annotations

from typing import List, Optional, Tuple, Union

from datadist_sim._world import door
from datadist_sim._world.door import ClusterNode, SimError, SimWorld
from datadist_sim.llm_datadist._engine import api_call, engine_failed
from datadist_sim.llm_datadist.status import raise_if_false
from datadist_sim.llm_datadist.utils.utils import (
    check_int64,
    check_isinstance,
    check_uint32,
)
from datadist_sim.llm_datadist.v2._lifecycle import ManagerLifecycle
from datadist_sim.llm_datadist.v2.llm_types import (
    BlocksCacheKey,
    Cache,
    CacheKeyByIdAndIndex,
    check_layer_range,
)
from datadist_sim.llm_datadist.v2.llm_utils import (
    pack_block_cache_key,
    pack_cache_key_by_id,
)

_NUM_TENSORS_PER_LAYER = 2
BlockList = Union[Tuple[int, ...], List[int]]


class PushOps(ManagerLifecycle):
    """Pushes to a remote cache; mixed into ``CacheManager``."""

    _world: SimWorld
    _node: ClusterNode
    _enable_remote_cache_accessible: bool

    def _check_push(
        self,
        func: str,
        src_cache: Cache,
        src_layer_range: Optional[range],
        dst_layer_range: Optional[range],
        tensor_num_per_layer: int,
    ) -> None:
        check_uint32("tensor_num_per_layer", tensor_num_per_layer)
        raise_if_false(
            tensor_num_per_layer > 0,
            func + " param check failed, tensor_num_per_layer ({0}) is invalid, should [1, {1}]",
            tensor_num_per_layer,
            src_cache.cache_desc.num_tensors,
        )
        check_layer_range("src_layer_range", src_layer_range, True)
        check_layer_range("dst_layer_range", dst_layer_range, True)
        layers = range(0, src_cache.cache_desc.num_tensors // tensor_num_per_layer)
        src_r = layers if src_layer_range is None else src_layer_range
        dst_r = layers if dst_layer_range is None else dst_layer_range
        raise_if_false(
            len(src_r) == len(dst_r), "src_layer_range size should be equal to size of dst_layer_range size."
        )

    @staticmethod
    def _layer_pairs(
        src_cache: Cache,
        src_layer_range: Optional[range],
        dst_layer_range: Optional[range],
        tensor_num_per_layer: int,
    ) -> List[Tuple[int, int]]:
        layers = range(0, src_cache.cache_desc.num_tensors // tensor_num_per_layer)
        src_r = layers if src_layer_range is None else src_layer_range
        dst_r = layers if dst_layer_range is None else dst_layer_range
        return list(zip(src_r, dst_r))

    @api_call
    def push_cache(
        self,
        dst_cache_key: CacheKeyByIdAndIndex,
        src_cache: Cache,
        src_batch_index: int = 0,
        src_layer_range: Optional[range] = None,
        dst_layer_range: Optional[range] = None,
        size: int = -1,
        tensor_num_per_layer: int = _NUM_TENSORS_PER_LAYER,
    ) -> None:
        self._check_is_inited()
        raise_if_false(
            self._enable_remote_cache_accessible,
            "push_cache is only supported while enable_remote_cache_accessible is True",
        )
        check_isinstance("dst_cache_key", dst_cache_key, [CacheKeyByIdAndIndex], allow_none=False)
        check_isinstance("src_cache", src_cache, Cache, allow_none=False)
        check_uint32("src_batch_index", src_batch_index)
        raise_if_false(not src_cache.is_blocks_cache, "param check failed, cache can not be blocks cache.")
        self._check_push("[push_cache]", src_cache, src_layer_range, dst_layer_range, tensor_num_per_layer)
        check_int64("size", size)
        raise_if_false(
            size == -1, "[push_cache] param check failed, size ({0}) is invalid, should be = -1.", size
        )
        key = pack_cache_key_by_id(dst_cache_key)
        for src_layer, dst_layer in self._layer_pairs(
            src_cache, src_layer_range, dst_layer_range, tensor_num_per_layer
        ):
            src_idx = list(range(src_layer * tensor_num_per_layer, (src_layer + 1) * tensor_num_per_layer))
            dst_idx = list(range(dst_layer * tensor_num_per_layer, (dst_layer + 1) * tensor_num_per_layer))
            params = door.PullParams(-1, 0, [], [], src_idx, dst_idx, -1, -1, tensor_num_per_layer)
            request = door.PushRequest(src_cache.cache_id, src_batch_index, key, params)
            try:
                door.push(self._world, self._node, request)
            except SimError as exc:
                engine_failed(exc, "[push_cache]", "dst_cache_key = {}", dst_cache_key)

    @api_call
    def push_blocks(
        self,
        dst_cache_key: BlocksCacheKey,
        src_cache: Cache,
        src_blocks: Optional[BlockList] = (),
        dst_blocks: BlockList = (),
        src_layer_range: Optional[range] = None,
        dst_layer_range: Optional[range] = None,
        tensor_num_per_layer: int = _NUM_TENSORS_PER_LAYER,
    ) -> None:
        self._check_is_inited()
        raise_if_false(
            self._enable_remote_cache_accessible,
            "push_blocks is only supported while enable_remote_cache_accessible is True",
        )
        check_isinstance("dst_cache_key", dst_cache_key, [BlocksCacheKey])
        check_isinstance("src_cache", src_cache, Cache)
        check_isinstance("src_blocks", src_blocks, [list, tuple], int)
        check_isinstance("dst_blocks", dst_blocks, [list, tuple], int)
        raise_if_false(src_cache.is_blocks_cache, "param check failed, cache should be blocks cache.")
        raise_if_false(len(dst_blocks) > 0, "dst_blocks can not be empty.")
        self._check_push("[push_blocks]", src_cache, src_layer_range, dst_layer_range, tensor_num_per_layer)
        key = pack_block_cache_key(dst_cache_key)
        src_list = list(src_blocks) if src_blocks is not None else []
        for src_layer, dst_layer in self._layer_pairs(
            src_cache, src_layer_range, dst_layer_range, tensor_num_per_layer
        ):
            src_idx = list(range(src_layer * tensor_num_per_layer, (src_layer + 1) * tensor_num_per_layer))
            dst_idx = list(range(dst_layer * tensor_num_per_layer, (dst_layer + 1) * tensor_num_per_layer))
            params = door.PullParams(
                -1, 0, src_list, list(dst_blocks), src_idx, dst_idx, -1, -1, tensor_num_per_layer
            )
            try:
                door.push(self._world, self._node, door.PushRequest(src_cache.cache_id, 0, key, params))
            except SimError as exc:
                engine_failed(exc, "[push_blocks]", "dst_cache_key = {}", dst_cache_key)
