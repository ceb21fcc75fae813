"""KvCacheManager (v1) conformance: role rules (§8), key bookkeeping (§7.2), v1 codes (§12)."""

from __future__ import annotations

from typing import Any, Callable, List

import numpy as np
import pytest

from datadist_sim._world.address_space import tensor_views
from datadist_sim._world.world import SimWorld
from datadist_sim.llm_datadist.configs import LLMRole
from datadist_sim.llm_datadist.data_type import DataType
from datadist_sim.llm_datadist.v2.llm_types import (
    BlocksCacheKey,
    CacheDesc,
    CacheKey,
    CacheKeyByIdAndIndex,
    KvCache,
)
from datadist_sim.llm_datadist_v1.status import LLMException, LLMStatusCode

from .conftest import MIB, P_ID, make, pair, v1_options

S = LLMStatusCode


def desc(batch: int = 2, num_tensors: int = 4) -> CacheDesc:
    return CacheDesc(num_tensors, [batch, 8, 16], DataType.DT_FLOAT16)


def views(world: SimWorld, cache: KvCache) -> List[Any]:
    return tensor_views(world.memory, cache.per_device_tensor_addrs[0], cache.cache_desc.shape, np.float16)


def code_of(call: Callable[[], object]) -> LLMStatusCode:
    with pytest.raises(LLMException) as info:
        call()
    return info.value.status_code


def fill(world: SimWorld, cache: KvCache, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    for v in views(world, cache):
        v[...] = rng.standard_normal(v.shape).astype(np.float16)


def test_official_flow_pull_cache_with_keys(world: SimWorld) -> None:
    p, d = pair(v2=False)
    src = p.kv_cache_manager.allocate_cache(desc(), [CacheKey(P_ID, 1), CacheKey(P_ID, 2)])
    assert src.cache_id == 1
    fill(world, src)
    dst = d.kv_cache_manager.allocate_cache(desc(batch=1))
    d.kv_cache_manager.pull_cache(CacheKey(P_ID, 2), dst)
    for s, t in zip(views(world, src), views(world, dst)):
        assert np.array_equal(s[1], t[0])
    assert code_of(lambda: d.kv_cache_manager.pull_cache(CacheKey(P_ID, 2), dst)) is S.LLM_KV_CACHE_NOT_EXIST
    p.kv_cache_manager.deallocate_cache(src)
    p.kv_cache_manager.remove_cache_key(CacheKey(P_ID, 1))
    d.kv_cache_manager.deallocate_cache(dst)
    for node_id in (1, 2):
        pool = world.caches[node_id].device_pool
        assert pool is not None
        assert pool.used == 0


def test_pull_with_offsets_moves_exactly_the_named_bytes(world: SimWorld) -> None:
    p, d = pair(v2=False)
    src = p.kv_cache_manager.allocate_cache(desc(batch=1))
    fill(world, src, 3)
    dst = d.kv_cache_manager.allocate_cache(desc(batch=1))
    key = CacheKeyByIdAndIndex(P_ID, src.cache_id, 0)
    d.kv_cache_manager.pull_cache(key, dst, size=64, src_cache_offset=32, dst_cache_offset=0)
    for s, t in zip(views(world, src), views(world, dst)):
        assert np.array_equal(s.reshape(-1)[16:48], t.reshape(-1)[:32])
        assert not t.reshape(-1)[32:].any()


def test_official_flow_pull_blocks(world: SimWorld) -> None:
    p, d = pair(v2=False)
    bdesc = CacheDesc(2, [8, 4, 16], DataType.DT_FLOAT16)
    src = p.kv_cache_manager.allocate_blocks_cache(bdesc, BlocksCacheKey(P_ID, 0))
    fill(world, src, 4)
    dst = d.kv_cache_manager.allocate_blocks_cache(CacheDesc(2, [8, 4, 16], DataType.DT_FLOAT16))
    d.kv_cache_manager.pull_blocks(BlocksCacheKey(P_ID, 0), dst, [0, 7], [3, 4])
    for s, t in zip(views(world, src), views(world, dst)):
        assert np.array_equal(s[0], t[3])
        assert np.array_equal(s[7], t[4])


def test_keys_only_for_prompt(world: SimWorld) -> None:
    _, d = pair(v2=False, link=False)
    assert (
        code_of(lambda: d.kv_cache_manager.allocate_cache(desc(), [CacheKey(P_ID, 1)])) is S.LLM_PARAM_INVALID
    )
    blocks = CacheDesc(1, [4, 4], DataType.DT_FLOAT16)
    assert (
        code_of(lambda: d.kv_cache_manager.allocate_blocks_cache(blocks, BlocksCacheKey(P_ID)))
        is S.LLM_PARAM_INVALID
    )


def test_remove_cache_key_prompt_only_and_idempotent(world: SimWorld) -> None:
    p, d = pair(v2=False, link=False)
    assert code_of(lambda: d.kv_cache_manager.remove_cache_key(CacheKey(P_ID, 1))) is S.LLM_PARAM_INVALID
    p.kv_cache_manager.allocate_cache(desc(), [CacheKey(P_ID, 1)])
    p.kv_cache_manager.remove_cache_key(CacheKey(P_ID, 1))
    p.kv_cache_manager.remove_cache_key(CacheKey(P_ID, 1))


def test_pull_cache_decoder_only(world: SimWorld) -> None:
    p, _ = pair(v2=False, link=False)
    c = p.kv_cache_manager.allocate_cache(desc())
    assert code_of(lambda: p.kv_cache_manager.pull_cache(CacheKey(2, 1), c)) is S.LLM_PARAM_INVALID


def test_deallocate_twice_is_kv_cache_not_exist(world: SimWorld) -> None:
    p, _ = pair(v2=False, link=False)
    c = p.kv_cache_manager.allocate_cache(desc())
    ghost = KvCache(c.cache_id, c.cache_desc, [], None)
    p.kv_cache_manager.deallocate_cache(c)
    assert code_of(lambda: p.kv_cache_manager.deallocate_cache(ghost)) is S.LLM_KV_CACHE_NOT_EXIST


def test_pool_exhausted_is_device_out_of_memory(world: SimWorld) -> None:
    p = make(
        LLMRole.PROMPT, P_ID, v1_options("192.168.1.1:26000", **{"ge.flowGraphMemMaxSize": str(1 * MIB)})
    )
    huge = CacheDesc(2, [1, 1 * MIB], DataType.DT_UINT8)
    assert code_of(lambda: p.kv_cache_manager.allocate_cache(huge)) is S.LLM_DEVICE_OUT_OF_MEMORY
    pool = world.caches[P_ID].device_pool
    assert pool is not None
    assert pool.used == 0


def test_pull_timeout_is_wait_process_timeout(world: SimWorld) -> None:
    world.config.bandwidth_bytes_per_s = 1e3
    p, d = pair(v2=False)
    src = p.kv_cache_manager.allocate_cache(desc(), [CacheKey(P_ID, 1)])
    fill(world, src)
    dst = d.kv_cache_manager.allocate_cache(desc())
    assert (
        code_of(lambda: d.kv_cache_manager.pull_cache(CacheKey(P_ID, 1), dst)) is S.LLM_WAIT_PROCESS_TIMEOUT
    )
    assert not any(v.any() for v in views(world, dst))


def test_pull_batch_index_out_of_range_is_param_invalid(world: SimWorld) -> None:
    p, d = pair(v2=False)
    p.kv_cache_manager.allocate_cache(desc(), [CacheKey(P_ID, 1)])
    dst = d.kv_cache_manager.allocate_cache(desc(batch=1))
    assert code_of(lambda: d.kv_cache_manager.pull_cache(CacheKey(P_ID, 1), dst, 1)) is S.LLM_PARAM_INVALID


def test_copy_cache_and_get_cache_tensors(world: SimWorld) -> None:
    p, _ = pair(v2=False, link=False)
    km = p.kv_cache_manager
    a = km.allocate_cache(desc())
    b = km.allocate_cache(desc())
    fill(world, a, 8)
    km.copy_cache(b, a, 1, 0)
    assert np.array_equal(views(world, a)[2][0], views(world, b)[2][1])
    (tensor,) = km.get_cache_tensors(b, 2)
    assert np.array_equal(tensor.numpy().reshape(-1), views(world, b)[2].reshape(-1))
    blocks = km.allocate_blocks_cache(CacheDesc(1, [4, 8], DataType.DT_FLOAT16))
    fill(world, blocks, 1)
    km.copy_blocks(blocks, {1: [0]})
    v = views(world, blocks)[0]
    assert np.array_equal(v[0], v[1])


def test_swap_blocks_between_device_cache_and_cpu_cache(world: SimWorld) -> None:
    from datadist_sim.llm_datadist.v2.llm_types import Placement

    p, _ = pair(v2=False, link=False)
    dev = p.kv_cache_manager.allocate_blocks_cache(CacheDesc(2, [4, 8], DataType.DT_FLOAT16))
    fill(world, dev, 6)
    host_arrays = [np.zeros((4, 8), dtype=np.float16) for _ in range(2)]
    host_desc = CacheDesc(2, [4, 8], DataType.DT_FLOAT16, Placement.HOST)
    host = KvCache.create_cpu_cache(host_desc, [a.ctypes.data for a in host_arrays])
    p.kv_cache_manager.swap_blocks(dev, host, {2: 0})
    for s, t in zip(views(world, dev), host_arrays):
        assert np.array_equal(s[2], t[0])
        assert not t[1:].any()


def test_pull_blocks_lists_must_be_lists(world: SimWorld) -> None:
    _, d = pair(v2=False)
    dst = d.kv_cache_manager.allocate_blocks_cache(CacheDesc(2, [8, 4, 16], DataType.DT_FLOAT16))
    with pytest.raises(TypeError):
        d.kv_cache_manager.pull_blocks(BlocksCacheKey(P_ID), dst, (0,), [1])  # type: ignore[arg-type]
    assert (
        code_of(lambda: d.kv_cache_manager.pull_blocks(BlocksCacheKey(P_ID), dst, [0, 1], [1]))
        is S.LLM_PARAM_INVALID
    )
