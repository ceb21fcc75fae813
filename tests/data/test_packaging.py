"""Packaging as it ships: the v1 package's ``KvCacheManager`` raises
``llm_datadist_v1.LLMException`` with v1 codes (a plain ``Enum``), ``LLMDataDist`` raises
``llm_datadist.LLMException``; ``SimConfig(unified_exceptions=True)`` gives one class both catch.

Sources: GE ``api/python/llm_datadist_v1/status.py``, ``kv_cache_manager.py``; hixl ``status.py``
(``docs/vendor_facts.md``).
"""

from __future__ import annotations

from typing import Iterator, Tuple

import pytest

import datadist_sim.llm_datadist as hixl
import datadist_sim.llm_datadist_v1 as v1
from datadist_sim._world.current import activate
from datadist_sim._world.world import SimConfig, SimWorld
from datadist_sim.llm_datadist.data_type import DataType
from datadist_sim.llm_datadist.v2.llm_datadist import LLMDataDist, finalize_all
from datadist_sim.llm_datadist.v2.llm_types import CacheDesc, CacheKey, LayerSynchronizer, TransferConfig
from datadist_sim.pytest_plugin import assert_llm_error
from datadist_sim.retry import RetryPolicy, retry_if_code, stop_after_attempt, wait_fixed

from .conftest import P_ID, pair


class Ready(LayerSynchronizer):
    def synchronize_layer(self, layer_index: int, timeout_in_millis: object) -> bool:
        return True


def desc(batch: int = 1) -> CacheDesc:
    return CacheDesc(2, [batch, 4, 16], DataType.DT_FLOAT16)


@pytest.fixture
def unified() -> Iterator[SimWorld]:
    w = SimWorld(seed=3, config=SimConfig(pause_wall_limit_s=0.05, unified_exceptions=True))
    with activate(w):
        yield w
    finalize_all(w)


def v1_pair() -> Tuple[LLMDataDist, LLMDataDist]:
    return pair(v2=False)


def missing_key_pull(d: LLMDataDist) -> None:
    dst = d.kv_cache_manager.allocate_cache(desc())
    d.kv_cache_manager.pull_cache(CacheKey(P_ID, 404), dst)


def test_except_llm_datadist_exception_does_not_catch_a_v1_pull_cache_error(world: SimWorld) -> None:
    _, d = v1_pair()
    escaped: BaseException | None = None
    try:
        try:
            missing_key_pull(d)
        except hixl.LLMException:  # what a client written for one package writes
            pytest.fail("llm_datadist.LLMException caught the v1 package's error")
    except v1.LLMException as exc:
        escaped = exc
    assert isinstance(escaped, v1.LLMException)
    assert not isinstance(escaped, hixl.LLMException)


def test_v1_error_code_is_a_v1_member_not_equal_to_the_llm_datadist_code(world: SimWorld) -> None:
    _, d = v1_pair()
    with pytest.raises(v1.LLMException) as caught:
        missing_key_pull(d)
    code = caught.value.status_code
    assert code is v1.LLMStatusCode.LLM_KV_CACHE_NOT_EXIST
    assert code != hixl.LLMStatusCode.LLM_KV_CACHE_NOT_EXIST
    assert code != int(hixl.LLMStatusCode.LLM_KV_CACHE_NOT_EXIST)
    assert code.name == hixl.LLMStatusCode.LLM_KV_CACHE_NOT_EXIST.name
    assert code.value == int(hixl.LLMStatusCode.LLM_KV_CACHE_NOT_EXIST)
    assert "error code is LLMStatusCode.LLM_KV_CACHE_NOT_EXIST" in str(caught.value)


def test_v1_manager_argument_check_raises_the_v1_class(world: SimWorld) -> None:
    p, _ = v1_pair()
    dst = p.kv_cache_manager.allocate_cache(desc())
    with pytest.raises(v1.LLMException) as caught:
        p.kv_cache_manager.pull_cache(CacheKey(P_ID, 1), dst)  # a Prompt may not pull
    assert caught.value.status_code is v1.LLMStatusCode.LLM_PARAM_INVALID


def test_llm_datadist_calls_in_kv_cache_manager_mode_raise_the_llm_datadist_class(world: SimWorld) -> None:
    _, d = v1_pair()
    with pytest.raises(hixl.LLMException) as caught:
        d.check_link_status(77)
    assert caught.value.status_code is hixl.LLMStatusCode.LLM_NOT_YET_LINK
    ret, _ = d.unlink_clusters([_info(77)], force=True)
    assert ret is hixl.LLMStatusCode.LLM_SUCCESS


def _info(remote: int) -> hixl.LLMClusterInfo:
    from tests.fabric.conftest import info

    return info(remote)


def test_v1_cache_task_answers_v1_codes(world: SimWorld) -> None:
    p, _ = v1_pair()
    src = p.kv_cache_manager.allocate_cache(desc())
    task = p.kv_cache_manager.transfer_cache_async(src, Ready(), [TransferConfig(55, [1, 2])])
    assert task.synchronize() is v1.LLMStatusCode.LLM_NOT_YET_LINK
    assert task.get_results() == [v1.LLMStatusCode.LLM_NOT_YET_LINK]


def test_the_trace_records_a_v1_error_by_its_code_name(world: SimWorld) -> None:
    _, d = v1_pair()
    with pytest.raises(v1.LLMException):
        missing_key_pull(d)
    assert [e.outcome for e in world.trace if e.op == "pull_cache"] == ["LLM_KV_CACHE_NOT_EXIST"]


def test_unified_switch_raises_one_class_both_names_catch_with_llm_datadist_codes(unified: SimWorld) -> None:
    _, d = v1_pair()
    with pytest.raises(hixl.LLMException) as caught:
        missing_key_pull(d)
    assert isinstance(caught.value, v1.LLMException)
    assert caught.value.status_code is hixl.LLMStatusCode.LLM_KV_CACHE_NOT_EXIST


def test_unified_switch_cache_task_answers_llm_datadist_codes(unified: SimWorld) -> None:
    p, _ = v1_pair()
    src = p.kv_cache_manager.allocate_cache(desc())
    task = p.kv_cache_manager.transfer_cache_async(src, Ready(), [TransferConfig(55, [1, 2])])
    assert task.synchronize() is hixl.LLMStatusCode.LLM_NOT_YET_LINK


# -- the tools work with both classes ---------------------------------------------------------------


def test_assert_llm_error_accepts_a_v1_error_named_by_an_llm_datadist_code(world: SimWorld) -> None:
    _, d = v1_pair()
    with assert_llm_error(hixl.LLMStatusCode.LLM_KV_CACHE_NOT_EXIST) as caught:
        missing_key_pull(d)
    assert isinstance(caught.value, v1.LLMException)


def test_retry_policy_judges_a_v1_error_by_its_code_name(world: SimWorld) -> None:
    _, d = v1_pair()
    policy = RetryPolicy(
        "v1",
        retry=retry_if_code([hixl.LLMStatusCode.LLM_KV_CACHE_NOT_EXIST]),
        stop=stop_after_attempt(3),
        wait=wait_fixed(0.5),
    )
    start = world.now()
    with pytest.raises(v1.LLMException):
        policy.call(lambda: missing_key_pull(d), clock=world.clock)
    assert world.now() - start >= 1.0, "two waits of 0.5 s: the v1 error was retried"


def test_retry_policy_accepts_v1_codes_in_its_code_list() -> None:
    policy = retry_if_code([v1.LLMStatusCode.LLM_TIMEOUT, "LLM_NOT_YET_LINK"])
    assert policy.label == "retry_if_code(LLM_NOT_YET_LINK,LLM_TIMEOUT)"


def test_fault_rule_accepts_a_v1_code_by_its_name(world: SimWorld) -> None:
    from datadist_sim import Fault

    rule = Fault.fail(v1.LLMStatusCode.LLM_LINK_BUSY, op="pull_cache")
    assert rule.code is hixl.LLMStatusCode.LLM_LINK_BUSY
    p, d = v1_pair()
    p.kv_cache_manager.allocate_cache(desc(), [CacheKey(P_ID, 1)])
    dst = d.kv_cache_manager.allocate_cache(desc())
    world.faults.add(rule)
    with pytest.raises(v1.LLMException) as caught:
        d.kv_cache_manager.pull_cache(CacheKey(P_ID, 1), dst)
    assert caught.value.status_code is v1.LLMStatusCode.LLM_LINK_BUSY
