"""``CacheManager`` (CacheManager mode, real module ``llm_datadist.v2.cache_manager``).

Argument checks follow the real file in order; every engine call goes to the instance's cache store in
the world through its door (``_world.door``), whose ``SimError`` leaves as ``LLMException``.
``remap_registered_memory`` is a no-op after its checks (the docs call it reserved).
"""

from __future__ import annotations

import logging
from itertools import repeat
from typing import Any, Dict, FrozenSet, List, Optional, Tuple, Union

from datadist_sim._status import LLMStatusCode
from datadist_sim._world import door
from datadist_sim._world.door import ClusterNode, SimWorld
from datadist_sim.llm_datadist import _kv_common
from datadist_sim.llm_datadist._async import start_transfer
from datadist_sim.llm_datadist._engine import api_call, engine_call
from datadist_sim.llm_datadist.status import raise_if_false, raise_if_true
from datadist_sim.llm_datadist.utils.utils import (
    check_int64,
    check_isinstance,
    check_uint32,
)
from datadist_sim.llm_datadist.v2._local_ops import LocalCacheOps
from datadist_sim.llm_datadist.v2._push_ops import PushOps
from datadist_sim.llm_datadist.v2.llm_types import (
    BlocksCacheKey,
    Cache,
    CacheDesc,
    CacheKey,
    CacheKeyByIdAndIndex,
    CacheTask,
    LayerSynchronizer,
    MemInfo,
    Memtype,
    Placement,
    TransferConfig,
    TransferWithCacheKeyConfig,
)
from datadist_sim.llm_datadist.v2.llm_utils import (
    check_cache_key,
    layer_range_to_tensor_indices,
    pack_block_cache_key,
    pack_cache_key,
    pack_cache_key_by_id,
    pack_pulled_key,
)

_log = logging.getLogger("datadist_sim.llm_datadist")
_NUM_TENSORS_PER_LAYER = _kv_common.NUM_TENSORS_PER_LAYER
Keys = Union[Tuple[CacheKey, ...], List[CacheKey]]
BlockList = Union[Tuple[int, ...], List[int]]
_BLOCK_LISTS = (list, tuple)


class CacheManager(LocalCacheOps, PushOps):
    """Caches of one CacheManager-mode instance. Obtained through ``LLMDataDist.cache_manager``."""

    def __init__(self, world: SimWorld, node: ClusterNode, engine_options: Dict[str, str]) -> None:
        self._world = world
        self._node = node
        self._initialized = True
        self._enabled_mem_pool = bool(engine_options.get("llm.MemPoolConfig"))
        self._enable_host_mem_pool = bool(engine_options.get("llm.HostMemPoolConfig"))
        self._enable_remote_cache_accessible = engine_options.get("llm.EnableRemoteCacheAccessible") == "1"
        self._pull_key_types: FrozenSet[type] = (
            frozenset({CacheKeyByIdAndIndex})
            if self._enable_remote_cache_accessible
            else frozenset({CacheKey, CacheKeyByIdAndIndex})
        )
        """The key classes ``pull_cache`` takes as they are (its plain happy-path check)."""
        self._is_call_linked = False

    def set_is_call_linked(self) -> None:
        """``link()`` was called: registrations default to not remotely accessible from now on."""
        self._is_call_linked = True

    @staticmethod
    def check_cache_key(cache_key: CacheKey) -> None:
        check_cache_key(cache_key)

    # -- helpers -----------------------------------------------------------------------------------

    def _check_pool(self, cache_desc: CacheDesc) -> None:
        raise_if_false(
            (self._enabled_mem_pool and cache_desc.placement == Placement.DEVICE)
            or (self._enable_host_mem_pool and cache_desc.placement == Placement.HOST),
            "you should config memory pool firstly and then set placement that matches it.",
        )

    @staticmethod
    def _spec(cache_desc: CacheDesc, keys: List[Any], is_blocks: bool) -> door.CacheSpec:
        device = cache_desc.placement == Placement.DEVICE
        return door.CacheSpec(
            cache_desc.num_tensors, cache_desc.size, cache_desc.batch_size, device, is_blocks, keys
        )

    def _allocate(self, func: str, cache_desc: CacheDesc, keys: List[Any], is_blocks: bool) -> door.Allocated:
        spec = self._spec(cache_desc, keys, is_blocks)
        with engine_call(func, f"cache_desc = {cache_desc}"):
            return door.allocate(self._world, self._node, spec)
        raise AssertionError("unreachable")  # pragma: no cover

    # -- allocation --------------------------------------------------------------------------------

    @api_call
    def allocate_blocks_cache(
        self, cache_desc: CacheDesc, blocks_cache_key: Optional[BlocksCacheKey] = None
    ) -> Cache:
        self._check_is_inited()
        check_isinstance("cache_desc", cache_desc, CacheDesc)
        check_isinstance("blocks_cache_key", blocks_cache_key, BlocksCacheKey)
        raise_if_false(cache_desc.num_tensors > 0, "num_tensors should be bigger than zero.")
        self._check_pool(cache_desc)
        keys = [pack_block_cache_key(blocks_cache_key)] if blocks_cache_key is not None else []
        entry = self._allocate("[allocate_blocks_cache]", cache_desc, keys, True)
        cache = Cache(entry.cache_id, cache_desc, list(entry.addrs), self, False, True)
        _log.info("[allocate_blocks_cache] success, cache_id = %d", cache.cache_id)
        return cache

    @api_call
    def allocate_cache(self, cache_desc: CacheDesc, cache_keys: Keys = ()) -> Cache:
        self._check_is_inited()
        check_isinstance("cache_desc", cache_desc, CacheDesc)
        check_isinstance("cache_keys", cache_keys, [list, tuple], CacheKey)
        raise_if_false(cache_desc.num_tensors > 0, "num_tensors should be bigger than zero.")
        self._check_pool(cache_desc)
        keys = [pack_cache_key(key) for key in cache_keys]
        entry = self._allocate("[allocate_cache]", cache_desc, keys, False)
        cache = Cache(entry.cache_id, cache_desc, list(entry.addrs), self, False, False)
        _log.info("[allocate_cache] success, cache_id = %d", cache.cache_id)
        return cache

    def _deallocate(self, func: str, cache: Cache) -> None:
        with engine_call(func, f"cache_id = {cache.cache_id}"):
            door.free(self._world, self._node, cache.cache_id, missing_ok=True, needs_pool=True)
        cache._invalidate()

    @api_call
    def deallocate_blocks_cache(self, cache: Cache) -> None:
        self._check_is_inited()
        check_isinstance("cache", cache, Cache)
        raise_if_false(cache.is_blocks_cache, "param check failed, cache should be blocks cache.")
        self._deallocate("[deallocate_blocks_cache]", cache)

    @api_call
    def deallocate_cache(self, cache: Cache) -> None:
        self._check_is_inited()
        check_isinstance("cache", cache, Cache)
        raise_if_true(cache.is_blocks_cache, "param check failed, cache can not be blocks cache.")
        self._deallocate("[deallocate_cache]", cache)

    @api_call
    def remove_cache_key(self, cache_key: CacheKey) -> None:
        self._check_is_inited()
        check_isinstance("cache_key", cache_key, CacheKey)
        with engine_call("[remove_cache_key]", f"cache_key = {cache_key}"):
            door.remove_key(self._world, self._node, pack_cache_key(cache_key))

    # -- registration ------------------------------------------------------------------------------

    def _get_remote_accessible(self, cache_desc: CacheDesc, remote_accessible: Optional[bool]) -> bool:
        if remote_accessible is None:
            return cache_desc.placement == Placement.DEVICE and not self._is_call_linked
        return remote_accessible

    def _register(
        self,
        func: str,
        cache_desc: CacheDesc,
        addrs: List[int],
        keys: List[Any],
        is_blocks: bool,
        remote_accessible: bool,
    ) -> door.Allocated:
        spec = self._spec(cache_desc, keys, is_blocks)._replace(remote_accessible=remote_accessible)
        with engine_call(func, f"cache_desc = {cache_desc}"):
            return door.register(self._world, self._node, spec, addrs)
        raise AssertionError("unreachable")  # pragma: no cover

    @api_call
    def register_cache(
        self,
        cache_desc: CacheDesc,
        addrs: List[int],
        cache_keys: Keys = (),
        remote_accessible: Optional[bool] = None,
    ) -> Cache:
        self._check_is_inited()
        check_isinstance("cache_desc", cache_desc, CacheDesc)
        check_isinstance("addrs", addrs, list, int)
        check_isinstance("cache_keys", cache_keys, [tuple, list], CacheKey)
        check_isinstance("remote_accessible", remote_accessible, bool)
        raise_if_true(
            self._is_call_linked and bool(remote_accessible),
            "you can not register remote accessible cache after link.",
        )
        raise_if_false(len(addrs) > 0, "addrs can not be empty.")
        raise_if_false(len(addrs) == cache_desc.num_tensors, "addrs length should be equal to num_tensors.")
        for addr in addrs:
            raise_if_false(addr != 0, "addr can not be zero.")
        keys = [pack_cache_key(key) for key in cache_keys]
        accessible = self._get_remote_accessible(cache_desc, remote_accessible)
        entry = self._register("[register_cache]", cache_desc, addrs, keys, False, accessible)
        cache = Cache(entry.cache_id, cache_desc, list(entry.addrs), self, True, False)
        _log.info("[register_cache] success, cache_id = %d.", cache.cache_id)
        return cache

    @api_call
    def register_blocks_cache(
        self,
        cache_desc: CacheDesc,
        addrs: List[int],
        blocks_cache_key: Optional[BlocksCacheKey] = None,
        remote_accessible: Optional[bool] = None,
    ) -> Cache:
        self._check_is_inited()
        check_isinstance("cache_desc", cache_desc, CacheDesc)
        check_isinstance("addrs", addrs, list, int)
        check_isinstance("blocks_cache_key", blocks_cache_key, BlocksCacheKey)
        check_isinstance("remote_accessible", remote_accessible, bool)
        raise_if_true(
            self._is_call_linked and bool(remote_accessible),
            "you can not register remote accessible cache after link.",
        )
        raise_if_false(len(addrs) > 0, "addrs can not be empty.")
        keys = [pack_block_cache_key(blocks_cache_key)] if blocks_cache_key is not None else []
        accessible = self._get_remote_accessible(cache_desc, remote_accessible)
        entry = self._register("[register_blocks_cache]", cache_desc, addrs, keys, True, accessible)
        cache = Cache(entry.cache_id, cache_desc, list(entry.addrs), self, True, True)
        _log.info("[register_blocks_cache] success, cache_id = %d", cache.cache_id)
        return cache

    @api_call
    def unregister_cache(self, cache_id: int) -> None:
        self._check_is_inited()
        check_isinstance("cache_id", cache_id, int)
        check_int64("cache_id", cache_id)
        with engine_call("[unregister_cache]", f"cache_id = {cache_id}"):
            door.unregister(self._world, self._node, cache_id)

    # -- pulls -------------------------------------------------------------------------------------

    @api_call
    def pull_blocks(
        self,
        src_cache_key: Union[CacheKey, CacheKeyByIdAndIndex, BlocksCacheKey],
        dst_cache: Cache,
        src_blocks: Optional[BlockList] = (),
        dst_blocks: BlockList = (),
        **kwargs: Any,
    ) -> None:
        self._check_is_inited()
        if (
            not kwargs
            and type(src_cache_key) is BlocksCacheKey
            and type(dst_cache) is Cache
            and dst_cache._is_blocks_cache
            and type(src_blocks) in _BLOCK_LISTS
            and type(dst_blocks) in _BLOCK_LISTS
            and src_blocks
            and dst_blocks
            and all(map(isinstance, src_blocks, repeat(int)))
            and all(map(isinstance, dst_blocks, repeat(int)))
        ):  # every check of ``_check_pull_blocks`` passes: skip to the translation
            packed = pack_block_cache_key(src_cache_key)
            params = door.PullParams(
                -1, 0, list(src_blocks), list(dst_blocks), (), (), -1, -1, _NUM_TENSORS_PER_LAYER
            )
        else:
            packed, params = self._check_pull_blocks(src_cache_key, dst_cache, src_blocks, dst_blocks, kwargs)
        request = door.PullRequest(dst_cache.cache_id, packed, params, True)
        _kv_common.submit_pull(
            self._world, self._node, request, "[pull_blocks]", "src_cache_key = {}", src_cache_key
        )
        _log.info("[pull_blocks] success")

    @staticmethod
    def _check_pull_blocks(
        src_cache_key: Union[CacheKey, CacheKeyByIdAndIndex, BlocksCacheKey],
        dst_cache: Cache,
        src_blocks: Optional[BlockList],
        dst_blocks: BlockList,
        kwargs: Dict[str, Any],
    ) -> Tuple[Any, door.PullParams]:
        """``pull_blocks``' checks in the vendor's order, with its messages; the packed key and what to
        pull. ``pull_blocks`` skips them when a few plain comparisons show they all pass (a serving
        engine's pull of a few dozen blocks: the checks cost as much as numpy copying them)."""
        src_layer_range = kwargs.get("src_layer_range")
        dst_layer_range = kwargs.get("dst_layer_range")
        tensor_num_per_layer = kwargs.get("tensor_num_per_layer", _NUM_TENSORS_PER_LAYER)
        check_isinstance("src_cache_key", src_cache_key, [CacheKey, CacheKeyByIdAndIndex, BlocksCacheKey])
        check_isinstance("dst_cache", dst_cache, Cache)
        check_isinstance("src_blocks", src_blocks, [list, tuple], int)
        check_isinstance("dst_blocks", dst_blocks, [list, tuple], int)
        raise_if_false(dst_cache.is_blocks_cache, "param check failed, dst_cache should be blocks cache.")
        raise_if_false(len(dst_blocks) > 0, "dst_blocks can not be empty.")
        check_uint32("tensor_num_per_layer", tensor_num_per_layer)
        raise_if_false(
            tensor_num_per_layer > 0,
            "[pull_blocks] param check failed, tensor_num_per_layer ({0}) is invalid, should [1, {1}]",
            tensor_num_per_layer,
            dst_cache.cache_desc.num_tensors,
        )
        src_list = list(src_blocks) if src_blocks is not None else []
        if isinstance(src_cache_key, BlocksCacheKey):
            raise_if_false(len(src_list) > 0, "src_blocks can not be empty.")
            packed = pack_block_cache_key(src_cache_key)
        else:
            if isinstance(src_cache_key, CacheKey):
                check_cache_key(src_cache_key)
            raise_if_false(
                len(src_list) == 0,
                "src_blocks should be empty when src_cache_key is not instance of BlocksCacheKey.",
            )
            packed = (
                pack_cache_key(src_cache_key)
                if isinstance(src_cache_key, CacheKey)
                else pack_cache_key_by_id(src_cache_key)
            )
        src_idx, dst_idx = layer_range_to_tensor_indices(
            src_layer_range, dst_layer_range, tensor_num_per_layer
        )
        params = door.PullParams(
            -1, 0, src_list, list(dst_blocks), src_idx, dst_idx, -1, -1, tensor_num_per_layer
        )
        return packed, params

    @api_call
    def pull_cache(
        self,
        cache_key: Union[CacheKey, CacheKeyByIdAndIndex],
        cache: Cache,
        batch_index: int = 0,
        size: int = -1,
        **kwargs: Any,
    ) -> None:
        if not self._initialized:  # ``_check_is_inited`` without a call on the hot path
            self._check_is_inited()
        if (
            not kwargs
            and type(cache_key) in self._pull_key_types
            and type(cache) is Cache
            and _kv_common.plain_pull_numbers(batch_index, size)
            and not cache._is_blocks_cache
        ):  # every check below passes: skip to the translation
            params = door.whole_batch(size, batch_index, _kv_common.NUM_TENSORS_PER_LAYER)
            dst_id = cache._cache_id  # the exact class: its own field, without the property's call
        else:
            src_idx, dst_idx, tensor_num_per_layer = self._check_pull_cache(
                cache_key, cache, batch_index, size, kwargs
            )
            params = door.PullParams(
                size, batch_index, (), (), src_idx, dst_idx, -1, -1, tensor_num_per_layer
            )
            dst_id = cache.cache_id
        packed = pack_pulled_key(cache_key)
        request = door.PullRequest(dst_id, packed, params, False)
        _kv_common.submit_pull(self._world, self._node, request, "[pull_cache]", "cache_key = {}", cache_key)
        if _log.isEnabledFor(logging.INFO):  # the line made only when someone listens (a step per pull)
            _log.info("[pull_cache] success")

    def _check_pull_cache(
        self,
        cache_key: Union[CacheKey, CacheKeyByIdAndIndex],
        cache: Cache,
        batch_index: int,
        size: int,
        kwargs: Dict[str, Any],
    ) -> Tuple[List[int], List[int], int]:
        """``pull_cache``'s checks in the vendor's order, with its messages (hixl
        ``src/python/llm_datadist/llm_datadist/v2/cache_manager.py:282-303``); returns the tensor indices
        of the layer ranges and the tensors per layer. ``pull_cache`` skips them when a few plain
        comparisons show they all pass."""
        if self._enable_remote_cache_accessible:
            check_isinstance("cache_key", cache_key, CacheKeyByIdAndIndex)
        else:
            check_isinstance("cache_key", cache_key, [CacheKey, CacheKeyByIdAndIndex])
        src_layer_range = kwargs.get("src_layer_range")
        dst_layer_range = kwargs.get("dst_layer_range")
        tensor_num_per_layer = kwargs.get("tensor_num_per_layer", _NUM_TENSORS_PER_LAYER)
        check_isinstance("cache", cache, Cache)
        check_uint32("batch_index", batch_index)
        check_int64("size", size)
        raise_if_true(cache.is_blocks_cache, "param check failed, cache can not be blocks cache.")
        raise_if_false(
            size == -1 or size > 0,
            "[pull_cache] param check failed, size ({0}) is invalid, should be = -1 or > 0",
            size,
        )
        check_uint32("tensor_num_per_layer", tensor_num_per_layer)
        raise_if_false(
            tensor_num_per_layer > 0,
            "[pull_cache] param check failed, tensor_num_per_layer ({0}) is invalid, should [1, {1}]",
            tensor_num_per_layer,
            cache.cache_desc.num_tensors,
        )
        src_idx, dst_idx = layer_range_to_tensor_indices(
            src_layer_range, dst_layer_range, tensor_num_per_layer
        )
        return src_idx, dst_idx, tensor_num_per_layer

    @api_call
    def transfer_cache_async(
        self,
        src_cache: Cache,
        layer_synchronizer: LayerSynchronizer,
        transfer_configs: Union[
            List[Union[TransferConfig, TransferWithCacheKeyConfig]],
            Tuple[Union[TransferConfig, TransferWithCacheKeyConfig], ...],
        ],
        src_block_indices: Optional[BlockList] = None,
        dst_block_indices: Optional[BlockList] = None,
        dst_block_memory_size: Optional[int] = None,
    ) -> CacheTask:
        self._check_is_inited()
        check_isinstance("src_cache", src_cache, Cache, allow_none=False)
        raise_if_true(
            src_cache.cache_desc.placement == Placement.HOST, "src cache not support placement HOST"
        )
        return start_transfer(
            self._world,
            self._node,
            src_cache,
            layer_synchronizer,
            transfer_configs,
            src_block_indices,
            dst_block_indices,
            dst_block_memory_size,
            default_error_code=LLMStatusCode.LLM_TIMEOUT,
            enable_remote_cache=self._enable_remote_cache_accessible,
            v2_job=True,
        )

    @api_call
    def remap_registered_memory(self, mem_infos: Union[MemInfo, List[MemInfo]]) -> None:
        self._check_is_inited()
        raise_if_false(
            isinstance(mem_infos, (list, MemInfo)),
            f"mem_infos type only support list of MemInfo or MemInfo, but got {type(mem_infos)}.",
        )
        mem_info_list = mem_infos if isinstance(mem_infos, list) else [mem_infos]
        for i, mem_info in enumerate(mem_info_list):
            raise_if_false(
                isinstance(mem_info, MemInfo),
                f"mem_infos[{i}] type only support MemInfo, but got {type(mem_info)}.",
            )
            raise_if_false(
                mem_info.mem_type == Memtype.MEM_TYPE_DEVICE,
                f"check mem_info.mem_type failed, only support Memtype.MEM_TYPE_DEVICE, index={i}.",
            )
            raise_if_false(
                mem_info.addr != 0, f"check mem_info.addr failed, addr can not be zero, index={i}."
            )
            raise_if_false(mem_info.size > 0, f"check mem_info.size failed, size must be > 0, index={i}.")
        _log.info("[remap_registered_memory] success, mem_infos size = %s", len(mem_info_list))
