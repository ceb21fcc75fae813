"""Local cache operations of ``CacheManager`` (deprecated in the docs with the memory pools):
``copy_cache``, ``copy_blocks`` and ``swap_blocks``. Checks follow the real file in order."""

from __future__ import annotations

from typing import Dict, List, Optional

from datadist_sim._world import door
from datadist_sim._world.door import ClusterNode, SimWorld
from datadist_sim.llm_datadist import _kv_common
from datadist_sim.llm_datadist._engine import api_call, engine_call
from datadist_sim.llm_datadist.status import raise_if_false, raise_if_true
from datadist_sim.llm_datadist.utils.utils import (
    check_dict,
    check_int64,
    check_isinstance,
    check_uint32,
    check_uint64,
)
from datadist_sim.llm_datadist.v2._lifecycle import ManagerLifecycle
from datadist_sim.llm_datadist.v2.llm_types import (
    Cache,
)


class LocalCacheOps(ManagerLifecycle):
    """Copies and swaps inside one instance; mixed into ``CacheManager``."""

    _world: SimWorld
    _node: ClusterNode
    _enable_remote_cache_accessible: bool

    # -- local copies --------------------------------------------------------------------------------

    @api_call
    def copy_blocks(self, cache: Cache, copy_block_info: Dict[int, List[int]]) -> None:
        self._check_is_inited()
        check_isinstance("cache", cache, Cache)
        check_isinstance("copy_block_info", copy_block_info, dict)
        check_dict("copy_block_info", copy_block_info, int, list, int)
        raise_if_false(cache.is_blocks_cache, "param check failed, cache should be blocks cache.")
        pairs = [(src, dst) for src, dsts in copy_block_info.items() for dst in dsts]
        with engine_call("[copy_blocks]", f"cache id is:{cache.cache_id}"):
            door.copy_blocks(self._world, self._node, cache.cache_id, pairs)

    @api_call
    def copy_cache(
        self,
        dst: Cache,
        src: Cache,
        dst_batch_index: int = 0,
        src_batch_index: int = 0,
        offset: int = 0,
        size: int = -1,
        req_id: Optional[int] = None,
    ) -> None:
        self._check_is_inited()
        check_isinstance("dst", dst, Cache)
        check_isinstance("src", src, Cache)
        check_uint32("dst_batch_index", dst_batch_index)
        check_uint32("src_batch_index", src_batch_index)
        check_uint64("offset", offset)
        check_int64("size", size)
        raise_if_true(src.is_blocks_cache, "param check failed, src cache can not be blocks cache.")
        raise_if_true(dst.is_blocks_cache, "param check failed, dst cache can not be blocks cache.")
        _kv_common.copy_cache(
            self._world,
            self._node,
            dst,
            src,
            dst_batch_index,
            src_batch_index,
            offset,
            size,
            req_id,
            check_uint64,
        )

    @staticmethod
    def _verify_caches(src_cache: Cache, dst_cache: Cache, src_to_dst: Dict[int, int]) -> None:
        check_isinstance("src", src_cache, Cache)
        check_isinstance("dst", dst_cache, Cache)
        raise_if_false(src_cache.is_blocks_cache, "param check failed, src cache should be blocks cache.")
        raise_if_false(dst_cache.is_blocks_cache, "param check failed, dst cache should be blocks cache.")
        check_isinstance("src_to_dst", src_to_dst, dict, int)
        _kv_common.check_block_pairs(src_cache.cache_desc, dst_cache.cache_desc, src_to_dst)

    @api_call
    def swap_blocks(self, src_cache: Cache, dst_cache: Cache, src_to_dst: Dict[int, int]) -> None:
        self._check_is_inited()
        self._verify_caches(src_cache, dst_cache, src_to_dst)
        _kv_common.swap_blocks(
            self._world,
            src_cache.cache_desc,
            dst_cache.cache_desc,
            src_cache.tensor_addrs,
            dst_cache.tensor_addrs,
            src_to_dst,
        )

    # -- not yet simulated ---------------------------------------------------------------------------
