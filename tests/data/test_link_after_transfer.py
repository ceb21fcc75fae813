"""A timed-out transfer breaks its link (documented remedy: re-establish it), and the documented
conflicts of ``check_link_status`` / ``unlink`` with a running pull give ``LLM_LINK_BUSY`` (§11, §12)."""

from __future__ import annotations

import threading
import time
from typing import List, Tuple

import pytest
from tests.fabric.conftest import DECODE_IP, PROMPT_IP, info

from datadist_sim._status_v1 import LLM_ERRORS, as_code
from datadist_sim._world.clock import RealClock
from datadist_sim._world.current import activate
from datadist_sim._world.transfer import transfers_running
from datadist_sim._world.world import SimConfig, SimWorld
from datadist_sim.llm_datadist import DataType
from datadist_sim.llm_datadist.status import LLMException, LLMStatusCode
from datadist_sim.llm_datadist.v2.llm_datadist import LLMDataDist, finalize_all
from datadist_sim.llm_datadist.v2.llm_types import CacheDesc, CacheKey

from .conftest import D_ID, P_ID, pair

S = LLMStatusCode


def _desc(batch: int, elems: int) -> CacheDesc:
    return CacheDesc(1, [batch, elems], DataType.DT_UINT8)


def _link_info() -> object:
    return info(P_ID, 26000, remote_ip=PROMPT_IP, local_ip=DECODE_IP)


@pytest.mark.parametrize(("v2", "code"), [(True, S.LLM_TIMEOUT), (False, S.LLM_WAIT_PROCESS_TIMEOUT)])
def test_a_timed_out_pull_leaves_the_link_needing_re_establishment(
    world: SimWorld, v2: bool, code: LLMStatusCode
) -> None:
    world.config.bandwidth_bytes_per_s = 1e6
    p, d = pair(v2=v2, **{"llm.SyncKvCacheWaitTime": "100"})
    pm = p.cache_manager if v2 else p.kv_cache_manager
    dm = d.cache_manager if v2 else d.kv_cache_manager
    big = pm.allocate_cache(_desc(1, 1 << 20), [CacheKey(P_ID, 1)])
    small = pm.allocate_cache(_desc(1, 16), [CacheKey(P_ID, 2)])
    big_dst, small_dst = dm.allocate_cache(_desc(1, 1 << 20)), dm.allocate_cache(_desc(1, 16))
    # the KvCacheManager raises the v1 package's exception (codes matched by name)
    with pytest.raises(LLM_ERRORS) as exc:
        dm.pull_cache(CacheKey(P_ID, 1), big_dst)
    assert as_code(exc.value.status_code) is code
    with pytest.raises(LLM_ERRORS) as exc:
        dm.pull_cache(CacheKey(P_ID, 2), small_dst)
    # v2: the link is gone (the status table's remedy); v1: GE keeps the entry and the broken peer never
    # answers, so the pull times out (docs/vendor_facts.md, "v1 pull over a link a timeout broke")
    assert as_code(exc.value.status_code) is (S.LLM_NOT_YET_LINK if v2 else S.LLM_WAIT_PROCESS_TIMEOUT)
    if not v2:
        with pytest.raises(LLMException) as exc:
            d.check_link_status(P_ID)
        assert exc.value.status_code is S.LLM_WAIT_PROCESS_TIMEOUT
    assert d.link_clusters([_link_info()])[0] in (S.LLM_SUCCESS, S.LLM_ALREADY_LINK)
    assert d.unlink_clusters([_link_info()], force=True)[0] is S.LLM_SUCCESS
    assert d.link_clusters([_link_info()]) == (S.LLM_SUCCESS, [S.LLM_SUCCESS])
    dm.pull_cache(CacheKey(P_ID, 2), small_dst)
    for dm_, caches in ((dm, (big_dst, small_dst)), (pm, (big, small))):
        for cache in caches:
            dm_.deallocate_cache(cache)


def _slow_world() -> SimWorld:
    config = SimConfig(bandwidth_bytes_per_s=2000.0, link_setup_s=0.0)
    return SimWorld(seed=5, clock=RealClock(), config=config)


def _pull_in_background(
    d: LLMDataDist, v2: bool, world: SimWorld, dst: object
) -> Tuple[threading.Thread, List[BaseException]]:
    manager = d.cache_manager if v2 else d.kv_cache_manager
    errors: List[BaseException] = []

    def run() -> None:
        try:
            manager.pull_cache(CacheKey(P_ID, 1), dst)
        except BaseException as exc:  # collected for the assertion below
            errors.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    deadline = time.monotonic() + 5
    while not transfers_running(world, d._node, P_ID):  # type: ignore[arg-type]
        assert time.monotonic() < deadline, errors
        time.sleep(0.001)
    return worker, errors


def test_check_link_status_during_a_pull_is_link_busy() -> None:
    world = _slow_world()
    with activate(world):
        try:
            p, d = pair(v2=False, **{"llm.SyncKvCacheWaitTime": "5000"})
            p.kv_cache_manager.allocate_cache(_desc(1, 1000), [CacheKey(P_ID, 1)])
            dst = d.kv_cache_manager.allocate_cache(_desc(1, 1000))
            worker, errors = _pull_in_background(d, False, world, dst)
            with pytest.raises(LLMException) as exc:
                d.check_link_status(P_ID)
            assert exc.value.status_code is S.LLM_LINK_BUSY
            worker.join()
            assert errors == [], "the running pull itself completes"
            d.check_link_status(P_ID)
        finally:
            finalize_all(world)


def test_unlink_during_a_pull_is_link_busy_in_cache_manager_mode() -> None:
    world = _slow_world()
    with activate(world):
        try:
            p, d = pair(v2=True, **{"llm.SyncKvCacheWaitTime": "5000"})
            p.cache_manager.allocate_cache(_desc(1, 1000), [CacheKey(P_ID, 1)])
            dst = d.cache_manager.allocate_cache(_desc(1, 1000))
            worker, errors = _pull_in_background(d, True, world, dst)
            assert d.unlink_clusters([_link_info()]) == (S.LLM_LINK_BUSY, [S.LLM_LINK_BUSY])
            worker.join()
            assert errors == [], "the running pull itself completes"
            assert world.is_linked(D_ID, P_ID)
            assert d.unlink_clusters([_link_info()]) == (S.LLM_SUCCESS, [S.LLM_SUCCESS])
        finally:
            finalize_all(world)


def test_per_link_bandwidth_sets_the_transfer_time(world: SimWorld) -> None:
    from datadist_sim import HCCS_BYTES_PER_S, ROCE_BYTES_PER_S

    p, d = pair(v2=True)
    src = p.cache_manager.allocate_cache(_desc(2, 1 << 20), [CacheKey(P_ID, 1), CacheKey(P_ID, 2)])
    dst = d.cache_manager.allocate_cache(_desc(2, 1 << 20))
    rtt = world.config.message_rtt_s
    start = world.now()
    d.cache_manager.pull_cache(CacheKey(P_ID, 1), dst, batch_index=0)
    assert world.now() - start == pytest.approx((1 << 20) / ROCE_BYTES_PER_S + rtt)
    world.set_link_bandwidth(D_ID, P_ID, HCCS_BYTES_PER_S)
    start = world.now()
    d.cache_manager.pull_cache(CacheKey(P_ID, 2), dst, batch_index=1)
    assert world.now() - start == pytest.approx((1 << 20) / HCCS_BYTES_PER_S + rtt)
    with pytest.raises(ValueError, match="bytes_per_s"):
        world.set_link_bandwidth(D_ID, P_ID, 0)
    d.cache_manager.deallocate_cache(dst)
    p.cache_manager.deallocate_cache(src)
