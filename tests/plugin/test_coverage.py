"""Error-path coverage: the codes client code received, counted from the trace."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from datadist_sim import SimWorld
from datadist_sim._coverage import CodeCoverage, received
from datadist_sim._world.trace import TraceEvent
from datadist_sim.llm_datadist import LLMClusterInfo, LLMDataDist, LLMException, LLMRole, LLMStatusCode

from .test_plugin import STRICT

pytest_plugins = ["pytester"]


@pytest.fixture(autouse=True)
def _quiet_config(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")


def _info(remote: int, ip: str, port: int) -> LLMClusterInfo:
    info = LLMClusterInfo()
    info.remote_cluster_id = remote
    info.append_local_ip_info("10.0.0.2", 0)
    info.append_remote_ip_info(ip, port)
    return info


def _pair(world: SimWorld) -> LLMDataDist:
    """A listening Prompt 0 and an initialised Decode 1 in ``world``; returns the Decode."""
    with world.activate():
        prompt = LLMDataDist(LLMRole.PROMPT, 0)
        prompt.init({"ge.exec.deviceId": "0", "llm.listenIpInfo": "10.0.0.1:26000"})
        decode = LLMDataDist(LLMRole.DECODER, 1)
        decode.init({"ge.exec.deviceId": "0"})
    return decode


def test_a_per_cluster_code_returned_by_link_clusters_counts_beside_the_overall_code() -> None:
    coverage = CodeCoverage().start()
    try:
        decode = _pair(SimWorld(seed=1))
        decode.link_clusters([_info(0, "10.0.0.1", 26000)], 1000)
        ret, rets = decode.link_clusters([_info(0, "10.0.0.1", 26000), _info(5, "10.0.0.9", 1)], 1000)
    finally:
        coverage.stop()
    assert ret is LLMStatusCode.LLM_LINK_FAILED
    assert rets == [LLMStatusCode.LLM_ALREADY_LINK, LLMStatusCode.LLM_LINK_FAILED]
    assert coverage.per_code["LLM_ALREADY_LINK"] == 1
    assert coverage.per_code["LLM_LINK_FAILED"] == 1
    assert dict(coverage.per_op["LLM_LINK_FAILED"]) == {"link_clusters": 1}
    assert coverage.failure_codes() == ["LLM_ALREADY_LINK", "LLM_LINK_FAILED"]


def test_raised_codes_count_and_python_exceptions_are_counted_apart() -> None:
    coverage = CodeCoverage().start()
    try:
        decode = _pair(SimWorld(seed=1))
        with pytest.raises(LLMException):  # KvCacheManager mode, initialised without enable_switch_role
            decode.switch_role(LLMRole.PROMPT, {"llm.listenIpInfo": "10.0.0.2:26001"})
        with pytest.raises(TypeError):
            decode.link_clusters("not a list", 1000)  # type: ignore[arg-type]
    finally:
        coverage.stop()
    assert coverage.failure_codes() == ["LLM_FEATURE_NOT_ENABLED"]
    assert dict(coverage.per_op["LLM_FEATURE_NOT_ENABLED"]) == {"switch_role": 1}
    assert coverage.exceptions["TypeError"] == 1


def test_counts_see_every_call_though_the_trace_buffer_keeps_only_the_last_few() -> None:
    world = SimWorld(seed=1, trace_size=3)
    coverage = CodeCoverage().start()
    try:
        decode = _pair(world)
        for _ in range(10):
            decode.link_clusters([_info(7, "10.0.0.9", 1)], 1000)
    finally:
        coverage.stop()
    assert world.trace.dropped > 0
    assert coverage.per_code["LLM_LINK_FAILED"] == 10
    assert coverage.calls == 2 + 10  # the two init calls and the ten links


def test_counts_of_several_worlds_accumulate_and_survive_a_round_trip_through_a_file(tmp_path: Path) -> None:
    coverage = CodeCoverage().start()
    try:
        for seed in (1, 2):
            _pair(SimWorld(seed=seed)).link_clusters([_info(7, "10.0.0.9", 1)], 1000)
    finally:
        coverage.stop()
    assert coverage.per_code["LLM_LINK_FAILED"] == 2
    coverage.dump(tmp_path / "a.json")
    coverage.dump(tmp_path / "b.json")
    both = CodeCoverage.load_all(sorted(tmp_path.glob("*.json")))
    assert both.per_code["LLM_LINK_FAILED"] == 4
    assert both.calls == 2 * coverage.calls


def test_a_stopped_coverage_counts_nothing_more() -> None:
    coverage = CodeCoverage().start()
    coverage.stop()
    _pair(SimWorld(seed=1)).link_clusters([_info(7, "10.0.0.9", 1)], 1000)
    assert coverage.calls == 0


def test_received_reads_the_outcome_and_status_names_in_detail_only() -> None:
    assert received("LLM_SUCCESS", "LLM_SUCCESS,LLM_ALREADY_LINK") == ["LLM_SUCCESS", "LLM_ALREADY_LINK"]
    assert received("LLM_SUCCESS", "PREPARING") == ["LLM_SUCCESS"]  # a poll's state is not a code
    assert received("TypeError", "") == []


def test_the_report_names_the_conditions_never_exercised_and_the_verdict() -> None:
    coverage = CodeCoverage()
    coverage.observe(TraceEvent(0.0, 1, "pull_cache", "LLM_KV_CACHE_NOT_EXIST", kind="call"))
    coverage.observe(TraceEvent(0.0, 1, "link.cut", "ok"))  # a world event: not what a client saw
    text = coverage.report(fail_under=2)
    assert re.search(r"LLM_KV_CACHE_NOT_EXIST\s+1343270914\s+1\s+pull_cache 1", text)
    assert re.search(r"LLM_SUSPECT_REMOTE_ERROR\s+no\s+Suspected UCE memory fault", text)
    assert "documented conditions never exercised (28 codes)" in text
    assert "1 of 28 codes other than LLM_SUCCESS reached client code (required: 2; NOT met)" in text
    assert coverage.calls == 1


def test_plugin_prints_the_table_summed_over_every_test_world(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        from datadist_sim.llm_datadist import LLMClusterInfo, LLMDataDist, LLMRole

        def _link_nowhere():
            d = LLMDataDist(LLMRole.DECODER, 1)
            d.init({"ge.exec.deviceId": "0"})
            info = LLMClusterInfo()
            info.remote_cluster_id = 7
            info.append_local_ip_info("10.0.0.2", 0)
            info.append_remote_ip_info("10.0.0.9", 1)
            return d.link_clusters([info], 1000)[0].name

        def test_a(sim_world):
            assert _link_nowhere() == "LLM_LINK_FAILED"

        def test_b(sim_world):
            assert _link_nowhere() == "LLM_LINK_FAILED"
        """
    )
    result = pytester.runpytest(*STRICT, "--datadist-coverage")
    result.assert_outcomes(passed=2)
    out = result.stdout.str()
    assert "datadist-sim error-path coverage" in out
    assert re.search(r"LLM_LINK_FAILED\s+1343270921\s+2\s+link_clusters 2", out), out
    # measured against the codes GE's engine gives (KvCacheManager mode, faults.engine_codes)
    assert "engine modes used: v2-kv (2 instances)" in out
    assert "1 of 18 codes the engine gives in v2-kv mode reached client code" in out
    assert result.ret == 0


def test_fail_under_fails_a_passing_run_that_reached_too_few_codes(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        def test_nothing_fails(sim_world):
            pass
        """
    )
    result = pytester.runpytest(*STRICT, "--datadist-coverage-fail-under=1")
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "(required: 1; NOT met)" in result.stdout.str()


def test_fail_under_met_leaves_the_run_green(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest
        from datadist_sim.llm_datadist import LLMDataDist, LLMException, LLMRole

        def test_second_init(sim_world):
            d = LLMDataDist(LLMRole.DECODER, 1)
            d.init({"ge.exec.deviceId": "0"})
            again = LLMDataDist(LLMRole.DECODER, 1)
            with pytest.raises(LLMException):
                again.init({"ge.exec.deviceId": "0"})
        """
    )
    result = pytester.runpytest(*STRICT, "--datadist-coverage-fail-under=1")
    result.assert_outcomes(passed=1)
    assert result.ret == 0
    assert "(required: 1; met)" in result.stdout.str()


def test_without_the_option_there_is_no_table(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_a(sim_world):\n    pass\n")
    result = pytester.runpytest(*STRICT)
    assert "error-path coverage" not in result.stdout.str()


def test_the_report_measures_against_the_codes_of_the_modes_used() -> None:
    coverage = CodeCoverage()
    coverage.note_mode("v2")
    coverage.count("pull_cache", "LLM_TIMEOUT", "")
    coverage.count("pull_cache", "LLM_LINK_BUSY", "")  # hixl's engine never gives it: a docs reading
    text = coverage.report()
    assert "engine modes used: v2 (1 instances)" in text
    assert "LLM_WAIT_PROCESS_TIMEOUT" not in coverage.never_received()  # GE's code, not v2's
    assert "LLM_OUT_OF_MEMORY" in coverage.never_received()
    assert "received but not given by the engine in these modes" in text
    assert f"1 of {len(coverage.reachable())} codes the engine gives in v2 mode reached client code" in text
    again = CodeCoverage.from_dict(coverage.as_dict())
    assert again.used_modes() == coverage.used_modes()
