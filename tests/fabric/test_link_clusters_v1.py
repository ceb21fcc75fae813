"""link_clusters / unlink_clusters / check_link_status in KvCacheManager mode (reference §5.4-5.6, §12)."""

from __future__ import annotations

import threading
import time
from typing import Callable

import pytest

from datadist_sim._world.world import SimWorld
from datadist_sim.llm_datadist.configs import LLMClusterInfo, LLMRole
from datadist_sim.llm_datadist.status import LLMException, LLMStatusCode

from .conftest import decoder, info, prompt

S = LLMStatusCode


def _raises_code(call: Callable[[], object], code: LLMStatusCode) -> LLMException:
    with pytest.raises(LLMException) as info:
        call()
    assert info.value.status_code is code, info.value
    return info.value


def test_decoder_links_to_listening_prompt_then_unlinks_both_ends(world: SimWorld) -> None:
    prompt(0)
    d = decoder(1)
    assert d.link_clusters([info(0)], timeout=5000) == (S.LLM_SUCCESS, [S.LLM_SUCCESS])
    assert world.is_linked(0, 1)
    d.check_link_status(remote_cluster_id=0)
    assert d.unlink_clusters([info(0)], timeout=5000) == (S.LLM_SUCCESS, [S.LLM_SUCCESS])
    assert world.links() == []


def test_link_returns_codes_as_real_enum_members(world: SimWorld) -> None:
    prompt(0)
    ret, rets = decoder(1).link_clusters([info(0)])
    assert type(ret) is LLMStatusCode
    assert all(type(r) is LLMStatusCode for r in rets)


def test_more_than_16_clusters_in_one_call_returns_cluster_num_exceed_limit(world: SimWorld) -> None:
    d = decoder(100)
    clusters = [info(i, 26000 + i) for i in range(17)]
    assert d.link_clusters(clusters) == (S.LLM_CLUSTER_NUM_EXCEED_LIMIT, [])
    assert d.unlink_clusters(clusters) == (S.LLM_CLUSTER_NUM_EXCEED_LIMIT, [])


def test_exactly_16_clusters_link_in_one_call(world: SimWorld) -> None:
    for i in range(16):
        prompt(i, 26000 + i)
    d = decoder(100)
    ret, rets = d.link_clusters([info(i, 26000 + i) for i in range(16)])
    assert (ret, rets) == (S.LLM_SUCCESS, [S.LLM_SUCCESS] * 16)


def test_link_while_another_link_of_the_instance_is_in_progress_returns_processing_link(
    world: SimWorld,
) -> None:
    prompt(0)
    prompt(2, 26002)
    d = decoder(1)
    world.config.pause_wall_limit_s = 30.0
    results: list[object] = []
    with world.pause(0):
        worker = threading.Thread(target=lambda: results.append(d.link_clusters([info(0)])))
        worker.start()
        deadline = time.monotonic() + 10
        while not d._node.link_mutex.locked():  # type: ignore[union-attr]
            assert time.monotonic() < deadline, "the first link never started"
            time.sleep(0.001)
        assert d.link_clusters([info(2, 26002)]) == (S.LLM_PROCESSING_LINK, [])
        assert d.unlink_clusters([info(2, 26002)]) == (S.LLM_PROCESSING_LINK, [])
    worker.join()
    assert results == [(S.LLM_SUCCESS, [S.LLM_SUCCESS])]


def test_relinking_a_linked_cluster_reports_already_link_per_cluster(world: SimWorld) -> None:
    prompt(0)
    d = decoder(1)
    d.link_clusters([info(0)])
    assert d.link_clusters([info(0)]) == (S.LLM_SUCCESS, [S.LLM_ALREADY_LINK])
    assert world.is_linked(0, 1)


def test_link_to_endpoint_nobody_listens_on_fails_after_the_timeout(world: SimWorld) -> None:
    d = decoder(1)
    start = world.now()
    assert d.link_clusters([info(0)], timeout=5000) == (S.LLM_LINK_FAILED, [S.LLM_LINK_FAILED])
    assert world.now() - start == 5.0
    assert world.links() == []


def test_link_to_listener_with_another_cluster_id_fails(world: SimWorld) -> None:
    prompt(0)
    assert decoder(1).link_clusters([info(9)]) == (S.LLM_LINK_FAILED, [S.LLM_LINK_FAILED])


def test_only_the_decoder_may_link_in_v1(world: SimWorld) -> None:
    p = prompt(0)
    prompt(2, 26002)
    assert p.link_clusters([info(2, 26002)]) == (S.LLM_PARAM_INVALID, [])


def test_linking_to_a_prompt_that_switched_to_decoder_fails(world: SimWorld) -> None:
    p2 = decoder(2, **{"llm.EnableSwitchRole": "1"})
    p2.switch_role(LLMRole.PROMPT, {"llm.listenIpInfo": "192.168.1.2:26000"})
    p2.switch_role(LLMRole.DECODER)
    assert decoder(1).link_clusters([info(2, remote_ip="192.168.1.2")]) == (
        S.LLM_LINK_FAILED,
        [S.LLM_LINK_FAILED],
    )


def test_timeout_shorter_than_link_setup_times_out_and_is_rolled_back(world: SimWorld) -> None:
    prompt(0)
    d = decoder(1)
    ret, rets = d.link_clusters([info(0)], timeout=1)
    assert (ret, rets) == (S.LLM_LINK_FAILED, [S.LLM_WAIT_PROCESS_TIMEOUT])
    assert world.links() == []


def test_failed_clusters_are_rolled_back_and_the_rest_stay_linked(world: SimWorld) -> None:
    prompt(0)
    d = decoder(1)
    ret, rets = d.link_clusters([info(0), info(5, 26005)])
    assert (ret, rets) == (S.LLM_LINK_FAILED, [S.LLM_SUCCESS, S.LLM_LINK_FAILED])
    assert world.is_linked(0, 1)


def test_invalid_cluster_info_is_param_invalid_with_no_per_cluster_codes(world: SimWorld) -> None:
    d = decoder(1)
    no_local = LLMClusterInfo()
    no_local.remote_cluster_id = 0
    no_local.append_remote_ip_info("192.168.1.1", 26000)
    assert d.link_clusters([no_local]) == (S.LLM_PARAM_INVALID, [])
    assert d.link_clusters([]) == (S.LLM_PARAM_INVALID, [])
    other_local = info(3, local_ip="192.168.9.9")
    assert d.link_clusters([info(0), other_local]) == (S.LLM_PARAM_INVALID, [])


def test_unlink_when_prompt_cannot_be_told_returns_notify_prompt_unlink_failed(world: SimWorld) -> None:
    p = prompt(0)
    d = decoder(1)
    d.link_clusters([info(0)])
    with world.pause(0):
        ret, rets = d.unlink_clusters([info(0)], timeout=2000)
    assert (ret, rets) == (S.LLM_UNLINK_FAILED, [S.LLM_NOTIFY_PROMPT_UNLINK_FAILED])
    assert world.links() == [(0, 1)], "the Prompt side stays until it unlinks itself"
    back = LLMClusterInfo()
    back.remote_cluster_id = 1
    back.append_local_ip_info("192.168.1.1", 26000)
    back.append_remote_ip_info("192.168.2.1", 0)
    assert p.unlink_clusters([back], force=True) == (S.LLM_SUCCESS, [S.LLM_SUCCESS])
    assert world.links() == []


def test_unlink_of_a_cluster_never_linked_is_tolerated_as_not_yet_link(world: SimWorld) -> None:
    d = decoder(1)
    assert d.unlink_clusters([info(0)]) == (S.LLM_SUCCESS, [S.LLM_NOT_YET_LINK])


def test_force_unlink_tears_down_only_the_local_side(world: SimWorld) -> None:
    prompt(0)
    d = decoder(1)
    d.link_clusters([info(0)])
    assert d.unlink_clusters([info(0)], force=True) == (S.LLM_SUCCESS, [S.LLM_SUCCESS])
    assert world.links() == [(0, 1)]
    assert d.link_clusters([info(0)]) == (S.LLM_SUCCESS, [S.LLM_SUCCESS]), "re-link replaces the stale end"
    assert world.is_linked(0, 1)


def test_check_link_status_without_a_link_raises_not_yet_link(world: SimWorld) -> None:
    d = decoder(1)
    _raises_code(lambda: d.check_link_status(0), S.LLM_NOT_YET_LINK)


def test_check_link_status_to_a_finalized_prompt_times_out_after_sync_kv_timeout(world: SimWorld) -> None:
    p = prompt(0)
    d = decoder(1, **{"llm.SyncKvCacheWaitTime": "2500"})
    d.link_clusters([info(0)])
    p.finalize()
    start = world.now()
    _raises_code(lambda: d.check_link_status(0), S.LLM_WAIT_PROCESS_TIMEOUT)
    assert world.now() - start == 2.5


def test_check_link_status_on_prompt_is_param_invalid(world: SimWorld) -> None:
    p = prompt(0)
    _raises_code(lambda: p.check_link_status(1), S.LLM_PARAM_INVALID)


def test_check_link_status_in_cache_manager_mode_is_param_invalid(world: SimWorld) -> None:
    d = decoder(1, v2=True)
    exc = _raises_code(lambda: d.check_link_status(0), S.LLM_PARAM_INVALID)
    assert "check_link_status" in str(exc)


def test_a_5_second_timeout_costs_5_simulated_seconds(world: SimWorld) -> None:
    d = decoder(1)
    d.link_clusters([info(0)], timeout=5000)
    assert world.now() == 5.0
