"""Assertion helpers and the sim_time fixture, used directly (the plugin is loaded by its entry point)."""

from __future__ import annotations

import time

import pytest

from datadist_sim import SimWorld, VirtualClock
from datadist_sim.llm_datadist import LLMDataDist, LLMException, LLMRole, LLMStatusCode
from datadist_sim.pytest_plugin import assert_llm_error, assert_traced


def _timeout() -> None:
    raise LLMException("pull timed out", status_code=LLMStatusCode.LLM_TIMEOUT)


@pytest.mark.parametrize(
    "code", [LLMStatusCode.LLM_TIMEOUT, int(LLMStatusCode.LLM_TIMEOUT), "LLM_TIMEOUT", "timeout"]
)
def test_assert_llm_error_accepts_a_member_an_integer_or_a_name(code: object) -> None:
    with assert_llm_error(code) as caught:
        _timeout()
    assert isinstance(caught.value, LLMException)
    assert caught.value.status_code == LLMStatusCode.LLM_TIMEOUT


def test_assert_llm_error_names_both_codes_when_they_differ() -> None:
    wrong = r"expected LLMException\(LLM_LINK_FAILED\), got LLM_TIMEOUT: pull"
    with pytest.raises(AssertionError, match=wrong), assert_llm_error(LLMStatusCode.LLM_LINK_FAILED):
        _timeout()


def test_assert_llm_error_fails_when_nothing_is_raised() -> None:
    nothing = r"expected LLMException\(LLM_TIMEOUT\); nothing was raised"
    with pytest.raises(AssertionError, match=nothing), assert_llm_error("LLM_TIMEOUT"):
        pass


def test_assert_llm_error_reports_another_exception_type() -> None:
    other = r"expected LLMException\(LLM_TIMEOUT\), got ValueError: bad"
    with pytest.raises(AssertionError, match=other), assert_llm_error(LLMStatusCode.LLM_TIMEOUT):
        raise ValueError("bad")


def test_assert_llm_error_on_a_real_call(sim_world: SimWorld) -> None:
    dd = LLMDataDist(LLMRole.PROMPT, 1)
    dd.init({"ge.exec.deviceId": "0", "llm.listenIpInfo": "10.0.0.1:26000"})
    other = LLMDataDist(LLMRole.PROMPT, 2)
    with assert_llm_error(LLMStatusCode.LLM_FAILED):  # the listen endpoint is taken
        other.init({"ge.exec.deviceId": "0", "llm.listenIpInfo": "10.0.0.1:26000"})


def test_assert_traced_finds_calls_by_op_and_outcome(sim_world: SimWorld) -> None:
    LLMDataDist(LLMRole.PROMPT, 1).init({"ge.exec.deviceId": "0", "llm.listenIpInfo": "10.0.0.1:26000"})
    (event,) = assert_traced(sim_world, op="init", outcome=LLMStatusCode.LLM_SUCCESS, kind="call")
    assert event.cluster_id == 1
    assert_traced(sim_world, op="init", count=1)
    assert_traced(sim_world, op="pull_cache", count=0)


def test_assert_traced_failure_lists_what_the_trace_holds(sim_world: SimWorld) -> None:
    LLMDataDist(LLMRole.PROMPT, 1).init({"ge.exec.deviceId": "0", "llm.listenIpInfo": "10.0.0.1:26000"})
    with pytest.raises(AssertionError) as exc:
        assert_traced(sim_world, op="init", outcome=LLMStatusCode.LLM_TIMEOUT)
    message = str(exc.value)
    assert "expected at least one trace event with op='init', outcome='LLM_TIMEOUT'; found 0" in message
    assert "init(" in message
    assert "-> LLM_SUCCESS" in message


def test_sim_time_fixture_puts_time_sleep_on_the_world_clock(
    sim_world: SimWorld, sim_time: VirtualClock
) -> None:
    start = time.monotonic()
    time.sleep(30.0)
    assert sim_time is sim_world.clock
    assert sim_world.now() == pytest.approx(30.0)
    assert time.monotonic() - start == pytest.approx(30.0)
