"""``KvCacheManager`` (KvCacheManager mode, real module ``llm_datadist_v1.kv_cache_manager``).

Argument and role checks follow the real file in order; engine calls go to the instance's cache store in
the world, whose ``SimError`` leaves as the v1 package's ``LLMException``. Where the v1 engine answers
differently from CacheManager mode: exhaustion is ``LLM_DEVICE_OUT_OF_MEMORY`` (ge
``dflow/llm_datadist/v1/common/swap_impl.cc:216``), a pull timeout ``LLM_WAIT_PROCESS_TIMEOUT`` (its
feed and fetch waits, ``v1/common/llm_flow_service.cc:162-187``), and ``deallocate_cache`` of an id the
engine does not know is ``LLM_KV_CACHE_NOT_EXIST`` (``v1/common/cache_engine.cc:50``).
"""

from __future__ import annotations

import logging
from typing import Any, Dict, FrozenSet, List, Optional, Tuple, Union

from datadist_sim._status import LLMStatusCode
from datadist_sim._world import door
from datadist_sim._world.door import ClusterNode, SimWorld
from datadist_sim.llm_datadist import _kv_common
from datadist_sim.llm_datadist._async import start_transfer
from datadist_sim.llm_datadist._engine import engine_call
from datadist_sim.llm_datadist.configs import LLMRole
from datadist_sim.llm_datadist.status import raise_if_false, raise_if_true
from datadist_sim.llm_datadist.utils.utils import (
    check_dict,
    check_int32,
    check_int64,
    check_isinstance,
    check_positive_or_set_default,
    check_uint32,
    check_uint64,
)
from datadist_sim.llm_datadist.v2.llm_types import (
    BlocksCacheKey,
    CacheDesc,
    CacheKey,
    CacheKeyByIdAndIndex,
    CacheTask,
    KvCache,
    LayerSynchronizer,
    Placement,
    TransferConfig,
)
from datadist_sim.llm_datadist.v2.llm_utils import (
    check_cache_key,
    layer_range_to_tensor_indices,
    pack_block_cache_key,
    pack_cache_key,
    pack_pulled_key,
)
from datadist_sim.llm_datadist_v1._v1_errors import v1_call, v1_static
from datadist_sim.llm_datadist_v1.tensor import Tensor, TensorDesc

_log = logging.getLogger("datadist_sim.llm_datadist")
_NUM_TENSORS_PER_LAYER = _kv_common.NUM_TENSORS_PER_LAYER
_PULL_KEY_TYPES: FrozenSet[type] = frozenset({CacheKey, CacheKeyByIdAndIndex})
_DECODER, _HOST = LLMRole.DECODER, Placement.HOST
"""The members ``pull_cache``'s shortcut compares with, read once: reading an enum's member from its
class goes through the enum's machinery on Python < 3.12 (about as long as the rest of a comparison)."""
"""The key classes ``pull_cache`` takes as they are (its plain happy-path check)."""
Keys = Union[Tuple[CacheKey, ...], List[CacheKey]]


def _check_req_id(name: str, value: Any) -> None:
    """v1's ``copy_cache`` takes any int as ``req_id``, where v2 wants a uint64 (ge
    ``api/python/llm_datadist_v1/kv_cache_manager.py:555-556``)."""
    check_isinstance(name, value, int)


class KvCacheManager:
    """Caches of one KvCacheManager-mode instance. Obtained through ``LLMDataDist.kv_cache_manager``.

    Its errors are the v1 package's (``llm_datadist_v1.LLMException``, v1 codes; ``_v1_errors``)."""

    def __init__(self, world: SimWorld, node: ClusterNode, role: LLMRole) -> None:
        self._world = world
        self._node = node
        self._role = role
        self._initialized = True

    def is_initialized(self) -> bool:
        """False once the owning instance is finalized."""
        return self._initialized

    def _switch_role(self, role: LLMRole) -> None:
        self._role = role

    def _check_role(self, func_name: str, role: LLMRole) -> None:
        raise_if_false(self._role == role, "{0} is not supported by {1}", func_name, self._role)

    @staticmethod
    def _is_cpu_cache(cache: KvCache) -> bool:
        return cache.cache_desc.placement == Placement.HOST

    @staticmethod
    @v1_static
    def check_cache_key(cache_key: CacheKey) -> None:
        check_cache_key(cache_key)

    def _allocate(self, func: str, cache_desc: CacheDesc, keys: List[Any], is_blocks: bool) -> KvCache:
        tensor_size = cache_desc.size
        spec = door.CacheSpec(
            cache_desc.num_tensors, tensor_size, cache_desc.batch_size, True, is_blocks, keys
        )
        entry: Optional[door.Allocated] = None
        with engine_call(func, f"cache_desc = {cache_desc}"):
            entry = door.allocate(self._world, self._node, spec)
        assert entry is not None
        per_device = [list(entry.addrs) for _ in range(max(self._node.device_num, 1))]
        kv_cache = KvCache(entry.cache_id, cache_desc, per_device, self)
        _log.info("%s success, cache_id = %d", func, kv_cache.cache_id)
        return kv_cache

    # -- allocation --------------------------------------------------------------------------------

    @v1_call
    def allocate_blocks_cache(
        self, cache_desc: CacheDesc, blocks_cache_key: Optional[BlocksCacheKey] = None
    ) -> KvCache:
        check_isinstance("cache_desc", cache_desc, CacheDesc)
        check_isinstance("blocks_cache_key", blocks_cache_key, BlocksCacheKey)
        raise_if_false(cache_desc.num_tensors > 0, "num_tensors should be bigger than zero.")
        raise_if_false(cache_desc.placement == Placement.DEVICE, "Only support allocate device cache")
        if self._role == LLMRole.DECODER:
            raise_if_false(blocks_cache_key is None, "blocks_cache_key is not supported by DECODER")
        keys = [pack_block_cache_key(blocks_cache_key)] if blocks_cache_key is not None else []
        return self._allocate("[allocate_blocks_cache]", cache_desc, keys, True)

    @v1_call
    def allocate_cache(self, cache_desc: CacheDesc, cache_keys: Keys = ()) -> KvCache:
        check_isinstance("cache_desc", cache_desc, CacheDesc)
        check_isinstance("cache_keys", cache_keys, [list, tuple], CacheKey)
        raise_if_false(cache_desc.num_tensors > 0, "num_tensors should be bigger than zero.")
        raise_if_false(cache_desc.placement == Placement.DEVICE, "Only support allocate device cache")
        if self._role != LLMRole.PROMPT:
            raise_if_false(len(cache_keys) == 0, "cache_keys is not supported by {0}", self._role.name)
        keys = [pack_cache_key(key) for key in cache_keys]
        return self._allocate("[allocate_cache]", cache_desc, keys, False)

    @v1_call
    def deallocate_cache(self, cache: KvCache) -> None:
        check_isinstance("cache", cache, KvCache)
        raise_if_true(self._is_cpu_cache(cache), "Only support device cache")
        with engine_call("[deallocate_cache]", f"cache_id = {cache.cache_id}"):
            door.free(self._world, self._node, cache.cache_id, missing_ok=False, needs_pool=False)
        cache._invalidate()

    @v1_call
    def remove_cache_key(self, cache_key: CacheKey) -> None:
        self._check_role("[remove_cache_key]", LLMRole.PROMPT)
        check_isinstance("cache_key", cache_key, CacheKey)
        with engine_call("[remove_cache_key]", f"cache_key = {cache_key}"):
            door.remove_key(self._world, self._node, pack_cache_key(cache_key))

    # -- pulls -------------------------------------------------------------------------------------

    @v1_call
    def pull_blocks(
        self,
        prompt_cache_key: BlocksCacheKey,
        decoder_kv_cache: KvCache,
        prompt_blocks: List[int],
        decoder_blocks: List[int],
        **kwargs: Any,
    ) -> None:
        src_layer_range = kwargs.get("src_layer_range")
        dst_layer_range = kwargs.get("dst_layer_range")
        tensor_num_per_layer = kwargs.get("tensor_num_per_layer", _NUM_TENSORS_PER_LAYER)
        self._check_role("[pull_blocks]", LLMRole.DECODER)
        check_isinstance("prompt_cache_key", prompt_cache_key, BlocksCacheKey)
        check_isinstance("decoder_kv_cache", decoder_kv_cache, KvCache)
        check_isinstance("prompt_blocks", prompt_blocks, list, int)
        check_isinstance("decoder_blocks", decoder_blocks, list, int)
        raise_if_true(self._is_cpu_cache(decoder_kv_cache), "Only support device cache")
        raise_if_false(len(prompt_blocks) > 0, "prompt_blocks can not be empty.")
        raise_if_false(len(decoder_blocks) > 0, "decoder_blocks can not be empty.")
        raise_if_false(
            len(prompt_blocks) == len(decoder_blocks),
            "Param prompt_blocks and decoder_blocks size should be same.",
        )
        check_uint32("tensor_num_per_layer", tensor_num_per_layer)
        raise_if_false(
            tensor_num_per_layer > 0,
            "[pull_blocks] param check failed, tensor_num_per_layer ({0}) is invalid, should [1, {1}]",
            tensor_num_per_layer,
            decoder_kv_cache.cache_desc.num_tensors,
        )
        src_idx, dst_idx = layer_range_to_tensor_indices(
            src_layer_range, dst_layer_range, tensor_num_per_layer
        )
        params = door.PullParams(
            -1, 0, prompt_blocks, decoder_blocks, src_idx, dst_idx, -1, -1, tensor_num_per_layer
        )
        packed = pack_block_cache_key(prompt_cache_key)
        request = door.PullRequest(decoder_kv_cache.cache_id, packed, params, True)
        _kv_common.submit_pull(
            self._world, self._node, request, "[pull_blocks]", "prompt_cache_key = {}", prompt_cache_key
        )

    @v1_call
    def pull_cache(
        self,
        cache_key: Union[CacheKey, CacheKeyByIdAndIndex],
        kv_cache: KvCache,
        batch_index: int = 0,
        size: int = -1,
        **kwargs: Any,
    ) -> None:
        if (
            not kwargs
            and self._role is _DECODER
            and type(cache_key) in _PULL_KEY_TYPES
            and type(kv_cache) is KvCache
            and _kv_common.plain_pull_numbers(batch_index, size)
            and kv_cache._cache_desc.placement is not _HOST  # ``_is_cpu_cache``, on the exact class
        ):  # every check of ``_check_pull_cache`` passes: only the key's own remain
            packed = pack_pulled_key(cache_key)
            params = door.whole_batch(size, batch_index, _kv_common.NUM_TENSORS_PER_LAYER)
            dst_id = kv_cache._cache_id  # the exact class: its own field, without the property's call
        else:
            packed, params = self._check_pull_cache(cache_key, kv_cache, batch_index, size, kwargs)
            dst_id = kv_cache.cache_id
        request = door.PullRequest(dst_id, packed, params, False)
        _kv_common.submit_pull(self._world, self._node, request, "[pull_cache]", "cache_key = {}", cache_key)

    def _check_pull_cache(
        self,
        cache_key: Union[CacheKey, CacheKeyByIdAndIndex],
        kv_cache: KvCache,
        batch_index: int,
        size: int,
        kwargs: Dict[str, Any],
    ) -> Tuple[door.Key, door.PullParams]:
        """``pull_cache``'s checks in the vendor's order, with its messages (GE
        ``api/python/llm_datadist_v1/kv_cache_manager.py:344-370``), and what they make: the packed key
        and the pull's parameters. ``pull_cache`` skips them when a few plain comparisons show they all
        pass."""
        src_layer_range = kwargs.get("src_layer_range")
        dst_layer_range = kwargs.get("dst_layer_range")
        src_cache_offset = kwargs.get("src_cache_offset")
        dst_cache_offset = kwargs.get("dst_cache_offset")
        tensor_num_per_layer = kwargs.get("tensor_num_per_layer", _NUM_TENSORS_PER_LAYER)
        self._check_role("[pull_cache]", LLMRole.DECODER)
        check_isinstance("cache_key", cache_key, [CacheKey, CacheKeyByIdAndIndex])
        check_isinstance("kv_cache", kv_cache, KvCache)
        raise_if_true(self._is_cpu_cache(kv_cache), "Only support device cache")
        check_int64("size", size)
        check_uint32("batch_index", batch_index)
        raise_if_false(
            size == -1 or size > 0,
            "[pull_cache] param check failed, size ({0}) is invalid, should be = -1 or > 0",
            size,
        )
        src_off = check_positive_or_set_default("src_cache_offset", src_cache_offset)
        dst_off = check_positive_or_set_default("dst_cache_offset", dst_cache_offset)
        packed = pack_pulled_key(cache_key)
        check_uint32("tensor_num_per_layer", tensor_num_per_layer)
        raise_if_false(
            tensor_num_per_layer > 0,
            "[pull_cache] param check failed, tensor_num_per_layer ({0}) is invalid, should [1, {1}]",
            tensor_num_per_layer,
            kv_cache.cache_desc.num_tensors,
        )
        src_idx, dst_idx = layer_range_to_tensor_indices(
            src_layer_range, dst_layer_range, tensor_num_per_layer
        )
        params = door.PullParams(
            size, batch_index, [], [], src_idx, dst_idx, src_off, dst_off, tensor_num_per_layer
        )
        return packed, params

    # -- local copies --------------------------------------------------------------------------------

    @v1_call
    def copy_blocks(self, cache: KvCache, copy_block_info: Dict[int, List[int]]) -> None:
        check_isinstance("cache", cache, KvCache)
        check_isinstance("copy_block_info", copy_block_info, dict)
        check_dict("copy_block_info", copy_block_info, int, list, int)
        raise_if_true(self._is_cpu_cache(cache), "Only support device cache")
        pairs: List[Tuple[int, int]] = []
        for src_block, dst_blocks in copy_block_info.items():
            check_uint64("src_block", src_block)
            for dst_block in dst_blocks:
                check_uint64("dst_block", dst_block)
                pairs.append((src_block, dst_block))
        with engine_call("[copy_blocks]", f"cache id is:{cache.cache_id}"):
            door.copy_blocks(self._world, self._node, cache.cache_id, pairs)

    @v1_call
    def copy_cache(
        self,
        dst: KvCache,
        src: KvCache,
        dst_batch_index: int = 0,
        src_batch_index: int = 0,
        offset: int = 0,
        size: int = -1,
        req_id: Optional[int] = None,
    ) -> None:
        check_isinstance("dst", dst, KvCache)
        raise_if_true(self._is_cpu_cache(dst), "Only support device cache")
        check_isinstance("src", src, KvCache)
        raise_if_true(self._is_cpu_cache(src), "Only support device cache")
        check_uint32("dst_batch_index", dst_batch_index)
        check_uint32("src_batch_index", src_batch_index)
        check_uint64("offset", offset)
        check_int64("size", size)
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
            _check_req_id,
        )

    @v1_call
    def get_cache_tensors(self, cache: KvCache, tensor_index: int = 0) -> List[Tensor]:
        """One ``Tensor`` per device, aliasing the cache tensor's simulated memory."""
        check_isinstance("cache", cache, KvCache)
        check_int32("tensor_index", tensor_index)
        raise_if_false(
            0 <= tensor_index < cache.cache_desc.num_tensors,
            "[get_cache_tensors] param check failed, tensor_index ({0}) out of range, [0, {1})",
            tensor_index,
            cache.cache_desc.num_tensors,
        )
        desc = TensorDesc(cache.cache_desc.data_type, list(cache.cache_desc.shape))
        tensors: List[Tensor] = []
        with engine_call("[get_cache_tensors]", {"cache_id": cache.cache_id, "tensor_index": tensor_index}):
            for _ in cache.per_device_tensor_addrs:
                raw = door.tensor_view(self._world, self._node, cache.cache_id, tensor_index)
                tensors.append(Tensor._from_buffer(raw, desc))
        return tensors

    @staticmethod
    def _verify_caches(src: KvCache, dst: KvCache, src_to_dst: Dict[int, int]) -> None:
        check_isinstance("src", src, KvCache)
        check_isinstance("dst", dst, KvCache)
        check_isinstance("src_to_dst", src_to_dst, dict, int)
        _kv_common.check_block_pairs(src.cache_desc, dst.cache_desc, src_to_dst)

    @v1_call
    def swap_blocks(self, src: KvCache, dst: KvCache, src_to_dst: Dict[int, int]) -> None:
        self._verify_caches(src, dst, src_to_dst)
        src_addrs = [a for addrs in src.per_device_tensor_addrs for a in addrs]
        dst_addrs = [a for addrs in dst.per_device_tensor_addrs for a in addrs]
        _kv_common.swap_blocks(self._world, src.cache_desc, dst.cache_desc, src_addrs, dst_addrs, src_to_dst)

    @v1_call
    def transfer_cache_async(
        self,
        src_cache: KvCache,
        layer_synchronizer: LayerSynchronizer,
        transfer_configs: Union[List[TransferConfig], Tuple[TransferConfig, ...]],
        src_block_indices: Optional[Union[List[int], Tuple[int, ...]]] = None,
        dst_block_indices: Optional[Union[List[int], Tuple[int, ...]]] = None,
        dst_block_memory_size: Optional[int] = None,
    ) -> CacheTask:
        self._check_role("[transfer_cache_async]", LLMRole.PROMPT)
        check_isinstance("src_cache", src_cache, KvCache, allow_none=False)
        return start_transfer(
            self._world,
            self._node,
            src_cache,
            layer_synchronizer,
            transfer_configs,
            src_block_indices,
            dst_block_indices,
            dst_block_memory_size,
            default_error_code=LLMStatusCode.LLM_WAIT_PROCESS_TIMEOUT,
        )
