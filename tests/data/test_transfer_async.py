"""transfer_cache_async (both managers): layer-by-layer sends after synchronize_layer, CacheTask results."""

from __future__ import annotations

from typing import List, Optional

import numpy as np
import pytest

import datadist_sim
from datadist_sim._world.world import SimWorld
from datadist_sim.llm_datadist.data_type import DataType
from datadist_sim.llm_datadist.status import LLMStatusCode
from datadist_sim.llm_datadist.v2.llm_types import (
    BlocksCacheKey,
    CacheDesc,
    CacheKeyByIdAndIndex,
    LayerSynchronizer,
    TransferConfig,
    TransferWithCacheKeyConfig,
)
from datadist_sim.llm_datadist_v1.status import LLMStatusCode as V1Code

from .conftest import D_ID, P_ID, pair

V1 = V1Code
S = LLMStatusCode


class Sync(LayerSynchronizer):
    def __init__(self, fail_at: Optional[int] = None) -> None:
        self.seen: List[int] = []
        self.fail_at = fail_at

    def synchronize_layer(self, layer_index: int, timeout_in_millis: Optional[int]) -> bool:
        self.seen.append(layer_index)
        return layer_index != self.fail_at


def desc(batch: int = 2) -> CacheDesc:
    return CacheDesc(4, [batch, 4, 8], DataType.DT_FLOAT16)


def fill(cache: object, seed: int) -> None:
    rng = np.random.default_rng(seed)
    for v in datadist_sim.tensor_views(cache):  # type: ignore[arg-type]
        v[...] = rng.standard_normal(v.shape).astype(np.float16)


def test_v2_transfer_config_writes_dst_addrs_per_layer(world: SimWorld) -> None:
    p, d = pair(v2=True)
    src = p.cache_manager.allocate_cache(desc())
    dst = d.cache_manager.allocate_cache(desc(batch=1))
    fill(src, 1)
    sync = Sync()
    config = TransferConfig(D_ID, dst.tensor_addrs, src_batch_index=1)
    task = p.cache_manager.transfer_cache_async(src, sync, [config])
    assert task.synchronize() is S.LLM_SUCCESS
    assert task.get_results() == [S.LLM_SUCCESS]
    assert sync.seen == [0, 1]
    for s, t in zip(datadist_sim.tensor_views(src), datadist_sim.tensor_views(dst)):
        assert np.array_equal(s[1], t[0])


def test_v2_failed_synchronize_layer_is_param_invalid(world: SimWorld) -> None:
    p, d = pair(v2=True)
    src = p.cache_manager.allocate_cache(desc())
    dst = d.cache_manager.allocate_cache(desc(batch=1))
    task = p.cache_manager.transfer_cache_async(
        src, Sync(fail_at=1), [TransferConfig(D_ID, dst.tensor_addrs)]
    )
    assert task.synchronize() is S.LLM_PARAM_INVALID


def test_v2_unlinked_destination_is_not_yet_link(world: SimWorld) -> None:
    p, d = pair(v2=True, link=False)
    src = p.cache_manager.allocate_cache(desc())
    dst = d.cache_manager.allocate_cache(desc(batch=1))
    task = p.cache_manager.transfer_cache_async(src, Sync(), [TransferConfig(D_ID, dst.tensor_addrs)])
    assert task.get_results() == [S.LLM_NOT_YET_LINK]


def test_v2_remote_accessible_with_cache_keys(world: SimWorld) -> None:
    p, d = pair(v2=True, **{"llm.EnableRemoteCacheAccessible": "1"})
    src = p.cache_manager.allocate_blocks_cache(CacheDesc(4, [8, 4, 8], DataType.DT_FLOAT16))
    dst = d.cache_manager.allocate_blocks_cache(
        CacheDesc(4, [8, 4, 8], DataType.DT_FLOAT16), BlocksCacheKey(D_ID)
    )
    fill(src, 2)
    config = TransferWithCacheKeyConfig(BlocksCacheKey(D_ID), range(0, 2), range(0, 2))
    task = p.cache_manager.transfer_cache_async(src, Sync(), [config], [1, 2], [5, 6])
    assert task.synchronize() is S.LLM_SUCCESS
    for s, t in zip(datadist_sim.tensor_views(src), datadist_sim.tensor_views(dst)):
        assert np.array_equal(s[1], t[5])
        assert np.array_equal(s[2], t[6])
    with pytest.raises(TypeError):
        p.cache_manager.transfer_cache_async(src, Sync(), [TransferConfig(D_ID, [1, 2, 3, 4])])


def test_v2_cache_key_by_id_target(world: SimWorld) -> None:
    p, d = pair(v2=True, **{"llm.EnableRemoteCacheAccessible": "1"})
    src = p.cache_manager.allocate_cache(desc())
    dst = d.cache_manager.allocate_cache(desc())
    fill(src, 3)
    config = TransferWithCacheKeyConfig(CacheKeyByIdAndIndex(D_ID, dst.cache_id, 1), range(0, 1), range(1, 2))
    assert p.cache_manager.transfer_cache_async(src, Sync(), [config]).synchronize() is S.LLM_SUCCESS
    sv, dv = datadist_sim.tensor_views(src), datadist_sim.tensor_views(dst)
    assert np.array_equal(sv[0][0], dv[2][1])
    assert np.array_equal(sv[1][0], dv[3][1])
    assert not dv[0].any()


def test_v1_transfer_prompt_only_and_moves_bytes(world: SimWorld) -> None:
    p, d = pair(v2=False)
    src = p.kv_cache_manager.allocate_cache(desc(batch=1))
    dst = d.kv_cache_manager.allocate_cache(desc(batch=1))
    fill(src, 4)
    config = TransferConfig(D_ID, dst.per_device_tensor_addrs[0])
    # the v1 package's task answers v1 codes, its manager raises the v1 exception
    assert p.kv_cache_manager.transfer_cache_async(src, Sync(), [config]).synchronize() is V1.LLM_SUCCESS
    for s, t in zip(datadist_sim.tensor_views(src), datadist_sim.tensor_views(dst)):
        assert np.array_equal(s, t)
    from datadist_sim.llm_datadist_v1.status import LLMException

    with pytest.raises(LLMException) as info:
        d.kv_cache_manager.transfer_cache_async(dst, Sync(), [TransferConfig(P_ID, [1, 2, 3, 4])])
    assert info.value.status_code is V1.LLM_PARAM_INVALID


def test_v2_dst_layer_range_is_relative_to_the_source_range(world: SimWorld) -> None:
    """hixl llm_utils.py at 49b96c60 (test_transfer_layer_range.py): source layer 1 of range(1, 2) goes to
    the first layer of the destination range; it used to report success with ``[None]`` and move nothing."""
    p, d = pair(v2=True, **{"llm.EnableRemoteCacheAccessible": "1"})
    src = p.cache_manager.allocate_cache(desc())
    dst = d.cache_manager.allocate_cache(desc())
    fill(src, 5)
    sync = Sync()
    config = TransferWithCacheKeyConfig(CacheKeyByIdAndIndex(D_ID, dst.cache_id), range(1, 2), range(0, 1))
    task = p.cache_manager.transfer_cache_async(src, sync, [config])
    assert task.synchronize() is S.LLM_SUCCESS
    assert task.get_results() == [S.LLM_SUCCESS]
    assert sync.seen == [1]
    sv, dv = datadist_sim.tensor_views(src), datadist_sim.tensor_views(dst)
    assert np.array_equal(sv[2][0], dv[0][0])
    assert np.array_equal(sv[3][0], dv[1][0])
    assert not dv[2].any()
    assert not dv[3].any()
    assert not dv[0][1].any()


def test_v2_relative_layers_reach_a_later_destination_layer(world: SimWorld) -> None:
    p, d = pair(v2=True, **{"llm.EnableRemoteCacheAccessible": "1"})
    src = p.cache_manager.allocate_cache(desc())
    dst = d.cache_manager.allocate_cache(desc())
    fill(src, 6)
    config = TransferWithCacheKeyConfig(CacheKeyByIdAndIndex(D_ID, dst.cache_id, 1), range(1, 2), range(1, 2))
    assert p.cache_manager.transfer_cache_async(src, Sync(), [config]).get_results() == [S.LLM_SUCCESS]
    sv, dv = datadist_sim.tensor_views(src), datadist_sim.tensor_views(dst)
    assert np.array_equal(sv[2][0], dv[2][1])
    assert np.array_equal(sv[3][0], dv[3][1])
    assert not dv[0].any()
    assert not dv[1].any()


class Raising(LayerSynchronizer):
    def synchronize_layer(self, layer_index: int, timeout_in_millis: Optional[int]) -> bool:
        raise RuntimeError("the model step failed")


def test_v2_worker_that_fails_reports_the_default_code_for_every_config(world: SimWorld) -> None:
    """hixl llm_utils.py at 49b96c60: ``TransferAsyncThread`` keeps the exception, and the task answers its
    default code (``LLM_TIMEOUT`` from ``CacheManager``) rather than a success with ``None`` results."""
    p, d = pair(v2=True)
    src = p.cache_manager.allocate_cache(desc())
    dst = d.cache_manager.allocate_cache(desc(batch=1))
    configs = [TransferConfig(D_ID, dst.tensor_addrs), TransferConfig(D_ID, dst.tensor_addrs)]
    task = p.cache_manager.transfer_cache_async(src, Raising(), configs)
    assert task.synchronize() is S.LLM_TIMEOUT
    assert task.get_results() == [S.LLM_TIMEOUT, S.LLM_TIMEOUT]
    assert not any(v.any() for v in datadist_sim.tensor_views(dst))


def test_v2_destination_range_shortened_after_construction_fails_the_task(world: SimWorld) -> None:
    """The setter accepts a shorter destination range; the worker then runs past its end, as in real,
    and the task reports the default code though the first layer was sent."""
    p, d = pair(v2=True, **{"llm.EnableRemoteCacheAccessible": "1"})
    src = p.cache_manager.allocate_cache(desc())
    dst = d.cache_manager.allocate_cache(desc())
    fill(src, 7)
    config = TransferWithCacheKeyConfig(CacheKeyByIdAndIndex(D_ID, dst.cache_id), range(0, 2), range(0, 2))
    config.dst_layer_range = range(1, 2)
    task = p.cache_manager.transfer_cache_async(src, Sync(), [config])
    assert task.get_results() == [S.LLM_TIMEOUT]
    sv, dv = datadist_sim.tensor_views(src), datadist_sim.tensor_views(dst)
    assert np.array_equal(sv[0][0], dv[2][0])


def test_v1_worker_that_fails_leaves_results_none_as_the_v1_package_does(world: SimWorld) -> None:
    """hicann/ge llm_datadist_v1/llm_utils.py:402-410: the v1 worker does not catch; its configs stay
    ``None``, which ``synchronize`` passes over."""
    p, d = pair(v2=False)
    src = p.kv_cache_manager.allocate_cache(desc(batch=1))
    dst = d.kv_cache_manager.allocate_cache(desc(batch=1))
    task = p.kv_cache_manager.transfer_cache_async(
        src, Raising(), [TransferConfig(D_ID, dst.per_device_tensor_addrs[0])]
    )
    assert task.get_results() == [None]
    assert task.synchronize() is V1.LLM_SUCCESS


@pytest.mark.parametrize("mode", ["reject", "serialize"])
def test_pull_during_transfer_on_one_link_is_link_busy_or_waits(mode: str) -> None:
    import threading

    from datadist_sim._world.clock import RealClock
    from datadist_sim._world.current import activate
    from datadist_sim._world.world import SimConfig
    from datadist_sim.llm_datadist.status import LLMException
    from datadist_sim.llm_datadist.v2.llm_datadist import finalize_all
    from datadist_sim.llm_datadist.v2.llm_types import CacheKey

    config = SimConfig(bandwidth_bytes_per_s=500.0, link_setup_s=0.0, link_busy=mode)
    w = SimWorld(seed=2, clock=RealClock(), config=config)
    with activate(w):
        try:
            p, d = pair(v2=True)
            src = p.cache_manager.allocate_cache(desc(batch=1), [CacheKey(P_ID, 1)])
            dst = d.cache_manager.allocate_cache(desc(batch=1))
            task = p.cache_manager.transfer_cache_async(src, Sync(), [TransferConfig(D_ID, dst.tensor_addrs)])
            deadline = w.now() + 2.0
            while not w.caches[P_ID].ops.get(D_ID, {}).get("transfer") and w.now() < deadline:
                pass
            if mode == "reject":
                with pytest.raises(LLMException) as info:
                    d.cache_manager.pull_cache(CacheKey(P_ID, 1), dst)
                assert info.value.status_code is S.LLM_LINK_BUSY
            else:
                d.cache_manager.pull_cache(CacheKey(P_ID, 1), dst)
            assert task.synchronize() is S.LLM_SUCCESS
            assert threading.active_count() >= 1
        finally:
            finalize_all(w)
