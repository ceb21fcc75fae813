"""CacheManager (v2) conformance: key bookkeeping (§7.1), pulls with real bytes, memory codes (§9, §12)."""

from __future__ import annotations

from typing import List

import numpy as np
import pytest

from datadist_sim._world.world import SimWorld
from datadist_sim.llm_datadist.data_type import DataType
from datadist_sim.llm_datadist.status import LLMException, LLMStatusCode
from datadist_sim.llm_datadist.v2.cache_manager import CacheManager
from datadist_sim.llm_datadist.v2.llm_types import (
    BlocksCacheKey,
    Cache,
    CacheDesc,
    CacheKey,
    CacheKeyByIdAndIndex,
    Placement,
)

from .conftest import D_ID, MIB, P_ID, make, pair, pool, v2_options

S = LLMStatusCode
PAD = CacheKey(P_ID, 2**64 - 1)


def desc(batch: int = 2, num_tensors: int = 4, seq: int = 8, hidden: int = 16) -> CacheDesc:
    return CacheDesc(num_tensors, [batch, seq, hidden], DataType.DT_FLOAT16)


def views(world: SimWorld, cache: Cache) -> List[np.ndarray]:
    from datadist_sim._world.address_space import tensor_views

    return tensor_views(world.memory, cache.tensor_addrs, cache.cache_desc.shape, np.float16)


def code_of(call: object) -> LLMStatusCode:
    with pytest.raises(LLMException) as info:
        call()  # type: ignore[operator]
    return info.value.status_code


def fill(world: SimWorld, cache: Cache, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    for v in views(world, cache):
        v[...] = rng.standard_normal(v.shape).astype(np.float16)


def test_cache_ids_start_at_1_in_allocation_order(world: SimWorld) -> None:
    p, _ = pair(v2=True, link=False)
    cm = p.cache_manager
    ids = [cm.allocate_cache(desc()).cache_id for _ in range(3)]
    assert ids == [1, 2, 3]
    assert cm.register_cache(desc(), [0x1000] * 4).cache_id == 4


def test_pull_by_cache_key_moves_real_bytes_and_consumes_key(world: SimWorld) -> None:
    p, d = pair(v2=True)
    src = p.cache_manager.allocate_cache(desc(), [CacheKey(P_ID, 10), CacheKey(P_ID, 11)])
    fill(world, src)
    dst = d.cache_manager.allocate_cache(desc(batch=1))
    d.cache_manager.pull_cache(CacheKey(P_ID, 11), dst)
    for s, t in zip(views(world, src), views(world, dst)):
        assert np.array_equal(s[1], t[0])
    assert code_of(lambda: d.cache_manager.pull_cache(CacheKey(P_ID, 11), dst)) is S.LLM_KV_CACHE_NOT_EXIST
    d.cache_manager.pull_cache(CacheKey(P_ID, 10), dst)
    assert np.array_equal(views(world, src)[0][0], views(world, dst)[0][0])


def test_pull_by_id_and_index_and_layer_range(world: SimWorld) -> None:
    p, d = pair(v2=True)
    src = p.cache_manager.allocate_cache(desc())
    fill(world, src, 1)
    dst = d.cache_manager.allocate_cache(desc(batch=3))
    d.cache_manager.pull_cache(
        CacheKeyByIdAndIndex(P_ID, src.cache_id, 1),
        dst,
        2,
        src_layer_range=range(1, 2),
        dst_layer_range=range(0, 1),
    )
    sv, dv = views(world, src), views(world, dst)
    assert np.array_equal(sv[2][1], dv[0][2])
    assert np.array_equal(sv[3][1], dv[1][2])
    assert not dv[2].any()
    assert not dv[3].any()
    assert not dv[0][:2].any()


def test_second_pull_of_consumed_key_is_kv_cache_not_exist(world: SimWorld) -> None:
    p, d = pair(v2=True)
    p.cache_manager.allocate_cache(desc(batch=1), [CacheKey(P_ID, 5)])
    dst = d.cache_manager.allocate_cache(desc(batch=1))
    d.cache_manager.pull_cache(CacheKey(P_ID, 5), dst)
    assert code_of(lambda: d.cache_manager.pull_cache(CacheKey(P_ID, 5), dst)) is S.LLM_KV_CACHE_NOT_EXIST


def test_prefix_keys_are_not_consumed(world: SimWorld) -> None:
    p, d = pair(v2=True)
    p.cache_manager.allocate_cache(desc(batch=1), [CacheKey(P_ID, 2**64 - 1, prefix_id=3)])
    dst = d.cache_manager.allocate_cache(desc(batch=1))
    d.cache_manager.pull_cache(CacheKey(P_ID, 2**64 - 1, prefix_id=3), dst)
    d.cache_manager.pull_cache(CacheKey(P_ID, 2**64 - 1, prefix_id=3), dst)


def test_missing_key_cache_id_or_batch_is_kv_cache_not_exist(world: SimWorld) -> None:
    p, d = pair(v2=True)
    src = p.cache_manager.allocate_cache(desc())
    dst = d.cache_manager.allocate_cache(desc())
    cm = d.cache_manager
    assert code_of(lambda: cm.pull_cache(CacheKey(P_ID, 99), dst)) is S.LLM_KV_CACHE_NOT_EXIST
    assert code_of(lambda: cm.pull_cache(CacheKeyByIdAndIndex(P_ID, 42), dst)) is S.LLM_KV_CACHE_NOT_EXIST
    by_batch = CacheKeyByIdAndIndex(P_ID, src.cache_id, 2)
    assert code_of(lambda: cm.pull_cache(by_batch, dst)) is S.LLM_KV_CACHE_NOT_EXIST


def test_unknown_local_cache_is_kv_cache_not_exist(world: SimWorld) -> None:
    p, d = pair(v2=True)
    p.cache_manager.allocate_cache(desc(), [CacheKey(P_ID, 1)])
    dst = d.cache_manager.allocate_cache(desc())
    d.cache_manager.deallocate_cache(dst)
    ghost = Cache(dst.cache_id, dst.cache_desc, [], d.cache_manager, False, False)
    assert code_of(lambda: d.cache_manager.pull_cache(CacheKey(P_ID, 1), ghost)) is S.LLM_KV_CACHE_NOT_EXIST


def test_pull_without_link_is_not_yet_link(world: SimWorld) -> None:
    p, d = pair(v2=True, link=False)
    p.cache_manager.allocate_cache(desc(), [CacheKey(P_ID, 1)])
    dst = d.cache_manager.allocate_cache(desc())
    assert code_of(lambda: d.cache_manager.pull_cache(CacheKey(P_ID, 1), dst)) is S.LLM_NOT_YET_LINK


def test_pull_from_own_cluster_is_param_invalid(world: SimWorld) -> None:
    _, d = pair(v2=True)
    dst = d.cache_manager.allocate_cache(desc())
    assert code_of(lambda: d.cache_manager.pull_cache(CacheKey(D_ID, 1), dst)) is S.LLM_PARAM_INVALID


def test_num_tensors_mismatch_is_param_invalid_and_changes_nothing(world: SimWorld) -> None:
    p, d = pair(v2=True)
    src = p.cache_manager.allocate_cache(desc(num_tensors=4), [CacheKey(P_ID, 1)])
    fill(world, src)
    dst = d.cache_manager.allocate_cache(desc(num_tensors=2))
    assert code_of(lambda: d.cache_manager.pull_cache(CacheKey(P_ID, 1), dst)) is S.LLM_PARAM_INVALID
    assert not any(v.any() for v in views(world, dst))
    # the key survives a failed pull
    ok = d.cache_manager.allocate_cache(desc(num_tensors=4))
    d.cache_manager.pull_cache(CacheKey(P_ID, 1), ok)


def test_timeout_v2_is_llm_timeout_and_destination_unchanged(world: SimWorld) -> None:
    world.config.bandwidth_bytes_per_s = 1e3
    p, d = pair(v2=True)
    src = p.cache_manager.allocate_cache(desc(), [CacheKey(P_ID, 1)])
    fill(world, src)
    dst = d.cache_manager.allocate_cache(desc())
    before = world.now()
    assert code_of(lambda: d.cache_manager.pull_cache(CacheKey(P_ID, 1), dst)) is S.LLM_TIMEOUT
    assert world.now() - before == pytest.approx(1.0)
    assert not any(v.any() for v in views(world, dst))


def test_transfer_takes_bytes_over_bandwidth_plus_rtt(world: SimWorld) -> None:
    p, d = pair(v2=True)
    p.cache_manager.allocate_cache(desc(batch=1), [CacheKey(P_ID, 1)])
    dst = d.cache_manager.allocate_cache(desc(batch=1))
    before = world.now()
    d.cache_manager.pull_cache(CacheKey(P_ID, 1), dst)
    nbytes = 4 * 8 * 16 * 2
    expected = nbytes / world.config.bandwidth_bytes_per_s + world.config.message_rtt_s
    assert world.now() - before == pytest.approx(expected)


def test_duplicate_keys_in_one_call_are_param_invalid(world: SimWorld) -> None:
    p, _ = pair(v2=True, link=False)
    cm = p.cache_manager
    assert (
        code_of(lambda: cm.allocate_cache(desc(), [CacheKey(P_ID, 1), CacheKey(P_ID, 1)]))
        is S.LLM_PARAM_INVALID
    )
    assert code_of(lambda: cm.allocate_cache(desc(), [PAD, PAD])) is S.LLM_PARAM_INVALID
    assert p._node is not None
    assert world.caches[P_ID].device_pool is not None
    assert world.caches[P_ID].device_pool.used == 0


def test_key_already_bound_is_param_invalid(world: SimWorld) -> None:
    p, _ = pair(v2=True, link=False)
    cm = p.cache_manager
    cm.allocate_cache(desc(), [CacheKey(P_ID, 1)])
    assert code_of(lambda: cm.allocate_cache(desc(), [CacheKey(P_ID, 1)])) is S.LLM_PARAM_INVALID


def test_too_many_keys_is_param_invalid(world: SimWorld) -> None:
    p, _ = pair(v2=True, link=False)
    keys = [CacheKey(P_ID, i) for i in range(3)]
    assert code_of(lambda: p.cache_manager.allocate_cache(desc(batch=2), keys)) is S.LLM_PARAM_INVALID


def test_placeholder_keys_index_nothing(world: SimWorld) -> None:
    p, d = pair(v2=True)
    src = p.cache_manager.allocate_cache(desc(), [PAD, CacheKey(P_ID, 7)])
    fill(world, src)
    dst = d.cache_manager.allocate_cache(desc(batch=1))
    d.cache_manager.pull_cache(CacheKey(P_ID, 7), dst)
    assert np.array_equal(views(world, src)[0][1], views(world, dst)[0][0])


def test_deallocate_is_deferred_while_keys_remain(world: SimWorld) -> None:
    p, d = pair(v2=True)
    pool_ = world.caches[P_ID].device_pool
    assert pool_ is not None
    src = p.cache_manager.allocate_cache(desc(), [CacheKey(P_ID, 1), CacheKey(P_ID, 2)])
    fill(world, src)
    expected = views(world, src)[0][1].copy()
    used = pool_.used
    p.cache_manager.deallocate_cache(src)
    assert src.tensor_addrs == []
    assert pool_.used == used
    dst = d.cache_manager.allocate_cache(desc(batch=1))
    d.cache_manager.pull_cache(CacheKey(P_ID, 2), dst)
    assert np.array_equal(views(world, dst)[0][0], expected)
    assert pool_.used == used
    p.cache_manager.remove_cache_key(CacheKey(P_ID, 1))
    assert pool_.used == 0


def test_remove_cache_key_is_idempotent(world: SimWorld) -> None:
    p, _ = pair(v2=True, link=False)
    p.cache_manager.allocate_cache(desc(), [CacheKey(P_ID, 1)])
    p.cache_manager.remove_cache_key(CacheKey(P_ID, 1))
    p.cache_manager.remove_cache_key(CacheKey(P_ID, 1))
    p.cache_manager.remove_cache_key(CacheKey(P_ID, 12345))


def test_deallocate_unknown_cache_is_a_no_op(world: SimWorld) -> None:
    p, _ = pair(v2=True, link=False)
    c = p.cache_manager.allocate_cache(desc())
    p.cache_manager.deallocate_cache(c)
    p.cache_manager.deallocate_cache(c)


def test_pool_exhausted_is_out_of_memory_and_nothing_leaks(world: SimWorld) -> None:
    p = make(_prompt_role(), P_ID, v2_options(**{"llm.MemPoolConfig": pool(1 * MIB, 16)}))
    cm = p.cache_manager
    big = CacheDesc(4, [1, 128 * 1024], DataType.DT_UINT8)  # 4 x 128 KiB = 512 KiB
    c1 = cm.allocate_cache(big)
    assert (
        code_of(lambda: cm.allocate_cache(CacheDesc(5, [1, 128 * 1024], DataType.DT_UINT8)))
        is S.LLM_OUT_OF_MEMORY
    )
    pool_ = world.caches[P_ID].device_pool
    assert pool_ is not None
    assert pool_.used == 512 * 1024
    cm.deallocate_cache(c1)
    assert pool_.used == 0


def test_no_pool_for_placement_is_param_invalid(world: SimWorld) -> None:
    p, _ = pair(v2=True, link=False)
    host = CacheDesc(1, [1, 4], DataType.DT_FLOAT16, Placement.HOST)
    assert code_of(lambda: p.cache_manager.allocate_cache(host)) is S.LLM_PARAM_INVALID


def test_host_pool_allocation(world: SimWorld) -> None:
    p = make(_prompt_role(), P_ID, v2_options(**{"llm.HostMemPoolConfig": pool(4 * MIB)}))
    host = CacheDesc(2, [2, 8], DataType.DT_FLOAT16, Placement.HOST)
    c = p.cache_manager.allocate_cache(host)
    assert c.cache_id == 1
    assert len(c.tensor_addrs) == 2


def test_pull_blocks_moves_exactly_the_named_blocks(world: SimWorld) -> None:
    p, d = pair(v2=True)
    bdesc = CacheDesc(2, [8, 4, 16], DataType.DT_FLOAT16)
    src = p.cache_manager.allocate_blocks_cache(bdesc, BlocksCacheKey(P_ID, 0))
    fill(world, src, 5)
    dst = d.cache_manager.allocate_blocks_cache(CacheDesc(2, [8, 4, 16], DataType.DT_FLOAT16))
    d.cache_manager.pull_blocks(BlocksCacheKey(P_ID, 0), dst, [1, 3], [6, 0])
    sv, dv = views(world, src), views(world, dst)
    for s, t in zip(sv, dv):
        assert np.array_equal(s[1], t[6])
        assert np.array_equal(s[3], t[0])
        assert not t[1:6].any()
        assert not t[7].any()
    # blocks keys are not consumed
    d.cache_manager.pull_blocks(BlocksCacheKey(P_ID, 0), dst, [1], [2])


def test_pull_blocks_with_a_destination_block_named_twice_keeps_the_last_source(world: SimWorld) -> None:
    p, d = pair(v2=True)
    bdesc = CacheDesc(2, [8, 4, 16], DataType.DT_FLOAT16)
    src = p.cache_manager.allocate_blocks_cache(bdesc, BlocksCacheKey(P_ID, 0))
    fill(world, src, 5)
    dst = d.cache_manager.allocate_blocks_cache(bdesc)
    d.cache_manager.pull_blocks(BlocksCacheKey(P_ID, 0), dst, [1, 3, 4], [2, 7, 2])
    for s, t in zip(views(world, src), views(world, dst)):
        assert np.array_equal(s[4], t[2])
        assert np.array_equal(s[3], t[7])


def test_pull_blocks_from_contiguous_cache(world: SimWorld) -> None:
    p, d = pair(v2=True)
    src = p.cache_manager.allocate_cache(CacheDesc(2, [1, 8, 16], DataType.DT_FLOAT16), [CacheKey(P_ID, 1)])
    fill(world, src, 6)
    dst = d.cache_manager.allocate_blocks_cache(CacheDesc(2, [8, 4, 16], DataType.DT_FLOAT16))
    d.cache_manager.pull_blocks(CacheKey(P_ID, 1), dst, dst_blocks=[5, 2])
    for s, t in zip(views(world, src), views(world, dst)):
        assert np.array_equal(s[0][:4], t[5])
        assert np.array_equal(s[0][4:], t[2])


def test_registered_caches_move_bytes_in_place_and_are_not_consumed(world: SimWorld) -> None:
    p, d = pair(v2=True)
    src_arrays = [np.arange(32, dtype=np.float16).reshape(1, 2, 16) + i for i in range(2)]
    dst_arrays = [np.zeros((1, 2, 16), dtype=np.float16) for _ in range(2)]
    rdesc = CacheDesc(2, [1, 2, 16], DataType.DT_FLOAT16)
    p.cache_manager.register_cache(rdesc, [a.ctypes.data for a in src_arrays], [CacheKey(P_ID, 1)])
    dst = d.cache_manager.register_cache(
        CacheDesc(2, [1, 2, 16], DataType.DT_FLOAT16), [a.ctypes.data for a in dst_arrays]
    )
    d.cache_manager.pull_cache(CacheKey(P_ID, 1), dst)
    d.cache_manager.pull_cache(CacheKey(P_ID, 1), dst)
    for s, t in zip(src_arrays, dst_arrays):
        assert np.array_equal(s, t)
    d.cache_manager.unregister_cache(dst.cache_id)


def test_register_checks(world: SimWorld) -> None:
    p, _ = pair(v2=True, link=False)
    cm = p.cache_manager
    assert code_of(lambda: cm.register_cache(desc(), [])) is S.LLM_PARAM_INVALID
    assert code_of(lambda: cm.register_cache(desc(), [1, 2, 3])) is S.LLM_PARAM_INVALID
    assert code_of(lambda: cm.register_cache(desc(), [1, 2, 3, 0])) is S.LLM_PARAM_INVALID
    cm.set_is_call_linked()
    assert (
        code_of(lambda: cm.register_cache(desc(), [1, 2, 3, 4], remote_accessible=True))
        is S.LLM_PARAM_INVALID
    )


def test_copy_cache_and_copy_blocks(world: SimWorld) -> None:
    p, _ = pair(v2=True, link=False)
    cm: CacheManager = p.cache_manager
    a = cm.allocate_cache(desc())
    b = cm.allocate_cache(desc())
    fill(world, a, 9)
    cm.copy_cache(b, a, dst_batch_index=0, src_batch_index=1)
    assert np.array_equal(views(world, a)[3][1], views(world, b)[3][0])
    blocks = cm.allocate_blocks_cache(CacheDesc(1, [4, 8], DataType.DT_FLOAT16))
    fill(world, blocks, 2)
    cm.copy_blocks(blocks, {0: [2, 3]})
    v = views(world, blocks)[0]
    assert np.array_equal(v[0], v[2])
    assert np.array_equal(v[0], v[3])
    gone = cm.allocate_cache(desc())
    cm.deallocate_cache(gone)
    assert code_of(lambda: cm.copy_cache(gone, a)) is S.LLM_KV_CACHE_NOT_EXIST


def test_swap_blocks_host_device(world: SimWorld) -> None:
    opts = v2_options(**{"llm.HostMemPoolConfig": pool(4 * MIB)})
    p = make(_prompt_role(), P_ID, opts)
    cm = p.cache_manager
    dev = cm.allocate_blocks_cache(CacheDesc(2, [4, 8], DataType.DT_FLOAT16))
    host = cm.allocate_blocks_cache(CacheDesc(2, [4, 8], DataType.DT_FLOAT16, Placement.HOST))
    fill(world, dev, 4)
    cm.swap_blocks(dev, host, {1: 3})
    for s, t in zip(views(world, dev), views(world, host)):
        assert np.array_equal(s[1], t[3])


def test_finalize_frees_every_cache(world: SimWorld) -> None:
    p, d = pair(v2=True)
    p.cache_manager.allocate_cache(desc(), [CacheKey(P_ID, 1)])
    d.cache_manager.allocate_cache(desc())
    assert world.memory.backed_bytes > 0
    p.finalize()
    d.finalize()
    assert world.memory.backed_bytes == 0
    assert world.caches == {}


def _prompt_role():  # type: ignore[no-untyped-def]
    from datadist_sim.llm_datadist.configs import LLMRole

    return LLMRole.PROMPT


def test_push_cache_writes_remote_batch_layer_by_layer(world: SimWorld) -> None:
    p, d = pair(v2=True, **{"llm.EnableRemoteCacheAccessible": "1"})
    dst = p.cache_manager.allocate_cache(desc())
    src = d.cache_manager.allocate_cache(desc(batch=1))
    fill(world, src, 12)
    d.cache_manager.push_cache(
        CacheKeyByIdAndIndex(P_ID, dst.cache_id, 1),
        src,
        src_layer_range=range(0, 1),
        dst_layer_range=range(1, 2),
    )
    sv, dv = views(world, src), views(world, dst)
    assert np.array_equal(sv[0][0], dv[2][1])
    assert np.array_equal(sv[1][0], dv[3][1])
    assert not dv[0].any()
    assert not dv[2][0].any()


def test_push_blocks_writes_named_remote_blocks(world: SimWorld) -> None:
    p, d = pair(v2=True, **{"llm.EnableRemoteCacheAccessible": "1"})
    bdesc = CacheDesc(2, [8, 4, 16], DataType.DT_FLOAT16)
    dst = p.cache_manager.allocate_blocks_cache(bdesc, BlocksCacheKey(P_ID, 0))
    src = d.cache_manager.allocate_blocks_cache(CacheDesc(2, [8, 4, 16], DataType.DT_FLOAT16))
    fill(world, src, 13)
    d.cache_manager.push_blocks(BlocksCacheKey(P_ID, 0), src, [2, 3], [7, 1])
    for s, t in zip(views(world, src), views(world, dst)):
        assert np.array_equal(s[2], t[7])
        assert np.array_equal(s[3], t[1])


def test_push_needs_remote_cache_accessible(world: SimWorld) -> None:
    p, d = pair(v2=True)
    dst = p.cache_manager.allocate_cache(desc())
    src = d.cache_manager.allocate_cache(desc())
    key = CacheKeyByIdAndIndex(P_ID, dst.cache_id)
    assert code_of(lambda: d.cache_manager.push_cache(key, src)) is S.LLM_PARAM_INVALID


def test_remote_accessible_pull_needs_cache_key_by_id(world: SimWorld) -> None:
    p, d = pair(v2=True, **{"llm.EnableRemoteCacheAccessible": "1"})
    p.cache_manager.allocate_cache(desc(), [CacheKey(P_ID, 1)])
    dst = d.cache_manager.allocate_cache(desc())
    with pytest.raises(TypeError):
        d.cache_manager.pull_cache(CacheKey(P_ID, 1), dst)


def test_registered_address_limit_is_param_invalid_and_unregister_frees_it(world: SimWorld) -> None:
    p, _ = pair(v2=True, link=False)
    cm = p.cache_manager
    big = CacheDesc(200, [1, 16], DataType.DT_FLOAT16)
    first = cm.register_cache(big, [0x1000 + i for i in range(200)])
    more = CacheDesc(41, [1, 16], DataType.DT_FLOAT16)
    assert code_of(lambda: cm.register_cache(more, [0x9000 + i for i in range(41)])) is S.LLM_PARAM_INVALID
    cm.unregister_cache(first.cache_id)
    cm.register_cache(more, [0x9000 + i for i in range(41)])


def test_metadata_only_address_fails_cleanly_and_changes_nothing(world: SimWorld) -> None:
    p, d = pair(v2=True)
    rdesc = CacheDesc(4, [2, 8, 16], DataType.DT_FLOAT16)
    p.cache_manager.register_cache(rdesc, [0x10 + i * 0x1000 for i in range(4)], [CacheKey(P_ID, 1)])
    dst = d.cache_manager.allocate_cache(desc())
    assert code_of(lambda: d.cache_manager.pull_cache(CacheKey(P_ID, 1), dst)) is S.LLM_PARAM_INVALID
    assert not any(v.any() for v in views(world, dst))


def test_poisoned_remote_source_is_suspect_remote_error_and_changes_nothing(world: SimWorld) -> None:
    """A UCE in the peer's memory: the puller sees LLM_SUSPECT_REMOTE_ERROR (status table)."""
    p, d = pair(v2=True)
    src = p.cache_manager.allocate_cache(desc(), [CacheKey(P_ID, 1)])
    fill(world, src)
    dst = d.cache_manager.allocate_cache(desc())
    world.memory.poison(src.tensor_addrs[3], 16)
    assert code_of(lambda: d.cache_manager.pull_cache(CacheKey(P_ID, 1), dst)) is S.LLM_SUSPECT_REMOTE_ERROR
    assert not any(v.any() for v in views(world, dst))
    world.memory.heal()
    d.cache_manager.pull_cache(CacheKey(P_ID, 1), dst)


def test_poisoned_local_destination_is_device_mem_error_and_keeps_the_key(world: SimWorld) -> None:
    """A UCE in the caller's own memory: LLM_DEVICE_MEM_ERROR; the source key is not consumed."""
    p, d = pair(v2=True)
    src = p.cache_manager.allocate_cache(desc(), [CacheKey(P_ID, 1)])
    fill(world, src)
    dst = d.cache_manager.allocate_cache(desc())
    world.memory.poison(dst.tensor_addrs[0], 8)
    assert code_of(lambda: d.cache_manager.pull_cache(CacheKey(P_ID, 1), dst)) is S.LLM_DEVICE_MEM_ERROR
    world.memory.heal()
    d.cache_manager.pull_cache(CacheKey(P_ID, 1), dst)


def test_pull_over_rank_table_link_before_ok_is_not_yet_link(world: SimWorld) -> None:
    from datadist_sim.llm_datadist.v2.llm_types import RegisterMemStatus

    p, d = pair(v2=True, link=False)
    src = p.cache_manager.register_cache(desc(), _owned_addrs(world), [CacheKey(P_ID, 1)])
    dst = d.cache_manager.allocate_cache(desc())
    from tests.fabric.test_comm_link import RANK_TABLE as rank_table

    p.link("comm", {P_ID: 0, D_ID: 1}, rank_table)
    comm_id = d.link("comm", {P_ID: 0, D_ID: 1}, rank_table)
    assert code_of(lambda: d.cache_manager.pull_cache(CacheKey(P_ID, 1), dst)) is S.LLM_NOT_YET_LINK
    while d.query_register_mem_status(comm_id) is not RegisterMemStatus.OK:
        pass
    d.cache_manager.pull_cache(CacheKey(P_ID, 1), dst)
    assert src.cache_id == 1


def _owned_addrs(world: SimWorld) -> List[int]:
    """Four tensors of process memory kept alive for the test's duration."""
    arrays = [np.zeros((2, 8, 16), dtype=np.float16) for _ in range(4)]
    _KEEP.extend(arrays)
    return [a.ctypes.data for a in arrays]


_KEEP: List[np.ndarray] = []


def test_pull_by_id_and_index_consumes_the_key_of_that_batch(world: SimWorld) -> None:
    p, d = pair(v2=True)
    src = p.cache_manager.allocate_cache(desc(), [CacheKey(P_ID, 1), CacheKey(P_ID, 2)])
    dst = d.cache_manager.allocate_cache(desc(batch=1))
    d.cache_manager.pull_cache(CacheKeyByIdAndIndex(P_ID, src.cache_id, 1), dst)
    assert code_of(lambda: d.cache_manager.pull_cache(CacheKey(P_ID, 2), dst)) is S.LLM_KV_CACHE_NOT_EXIST
    d.cache_manager.pull_cache(CacheKey(P_ID, 1), dst)


def test_pull_by_id_of_a_batch_whose_key_was_removed_consumes_no_other_key(world: SimWorld) -> None:
    p, d = pair(v2=True)
    src = p.cache_manager.allocate_cache(desc(), [CacheKey(P_ID, 1), CacheKey(P_ID, 2)])
    dst = d.cache_manager.allocate_cache(desc(batch=1))
    p.cache_manager.remove_cache_key(CacheKey(P_ID, 2))
    d.cache_manager.pull_cache(CacheKeyByIdAndIndex(P_ID, src.cache_id, 1), dst)
    d.cache_manager.pull_cache(CacheKeyByIdAndIndex(P_ID, src.cache_id, 1), dst)  # nothing consumed
    d.cache_manager.pull_cache(CacheKey(P_ID, 1), dst)


def test_blocks_versus_contiguous_mismatch_is_param_invalid(world: SimWorld) -> None:
    p, d = pair(v2=True)
    blocks = p.cache_manager.allocate_blocks_cache(CacheDesc(4, [2, 8, 16], DataType.DT_FLOAT16))
    dst = d.cache_manager.allocate_cache(desc())
    key = CacheKeyByIdAndIndex(P_ID, blocks.cache_id)
    assert code_of(lambda: d.cache_manager.pull_cache(key, dst)) is S.LLM_PARAM_INVALID


def test_deallocate_and_remove_key_of_registered_cache_are_no_ops(world: SimWorld) -> None:
    p, d = pair(v2=True)
    reg = p.cache_manager.register_cache(desc(), _owned_addrs(world), [CacheKey(P_ID, 1)])
    p.cache_manager.deallocate_cache(reg)
    p.cache_manager.remove_cache_key(CacheKey(P_ID, 1))
    dst = d.cache_manager.allocate_cache(desc())
    d.cache_manager.pull_cache(CacheKey(P_ID, 1), dst)


def test_deallocate_without_any_pool_is_feature_not_enabled(world: SimWorld) -> None:
    opts = v2_options("192.168.1.1:26000")
    del opts["llm.MemPoolConfig"]
    p = make(_prompt_role(), P_ID, opts)
    reg = p.cache_manager.register_cache(desc(), [0x1000 * (i + 1) for i in range(4)])
    assert code_of(lambda: p.cache_manager.deallocate_cache(reg)) is S.LLM_FEATURE_NOT_ENABLED
    p.cache_manager.unregister_cache(reg.cache_id)


def test_fragmented_pool_fails_with_enough_free_bytes_in_total(world: SimWorld) -> None:
    p = make(_prompt_role(), P_ID, v2_options(**{"llm.MemPoolConfig": pool(1 * MIB, 16)}))
    cm = p.cache_manager
    one = CacheDesc(1, [1, 64 * 1024], DataType.DT_UINT8)
    caches = [cm.allocate_cache(one) for _ in range(16)]
    for c in caches[::2]:
        cm.deallocate_cache(c)
    pool_ = world.caches[P_ID].device_pool
    assert pool_ is not None
    assert pool_.free_bytes == 512 * 1024
    two = CacheDesc(1, [1, 128 * 1024], DataType.DT_UINT8)
    assert code_of(lambda: cm.allocate_cache(two)) is S.LLM_OUT_OF_MEMORY


def test_same_pull_in_flight_is_repeat_request_and_pulls_serialise() -> None:
    import threading

    from datadist_sim._world.clock import RealClock
    from datadist_sim._world.current import activate
    from datadist_sim._world.world import SimConfig
    from datadist_sim.llm_datadist.v2.llm_datadist import finalize_all

    w = SimWorld(seed=1, clock=RealClock(), config=SimConfig(bandwidth_bytes_per_s=2e4, link_setup_s=0.0))
    with activate(w):
        try:
            p, d = pair(v2=True)
            p.cache_manager.allocate_cache(desc(batch=1), [CacheKey(P_ID, 1)])  # 4 KiB: ~0.2 s
            dst = d.cache_manager.allocate_cache(desc(batch=1))
            errors: List[BaseException] = []

            def first() -> None:
                try:
                    d.cache_manager.pull_cache(CacheKey(P_ID, 1), dst)
                except BaseException as exc:  # pragma: no cover - reported below
                    errors.append(exc)

            worker = threading.Thread(target=first)
            worker.start()
            deadline = w.now() + 2.0
            while not w.caches[D_ID].inflight and w.now() < deadline:
                pass
            assert code_of(lambda: d.cache_manager.pull_cache(CacheKey(P_ID, 1), dst)) is S.LLM_REPEAT_REQUEST
            worker.join()
            assert errors == []
        finally:
            finalize_all(w)
