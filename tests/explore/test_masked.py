"""A rule that matched a call but whose effect another rule on that call overrode is reported as masked,
not fired: in the trace and the plan's counts, the run summary, the pytest failure report and explore's
report."""

from __future__ import annotations

from typing import Dict, List

import pytest
from tests.explore import clients

from datadist_sim import Fault, SimWorld
from datadist_sim.explore import Limits
from datadist_sim.explore.run import run_one
from datadist_sim.faults.plan import never_fired, only_masked
from datadist_sim.scenarios import Scenario
from datadist_sim.scenarios.client_run import fake_installed, run_client

pytest_plugins = ["pytester"]


def pulls(world: SimWorld) -> None:
    """The careful connector's pulls, its rules left in the plan afterwards (``careful`` clears them)."""
    import llm_datadist

    clients._prompt(llm_datadist)
    clients.Connector(llm_datadist).serve()


FAIL_THEN_TIMEOUT: List[Dict[str, object]] = [
    {"action": "fail", "code": "LLM_FAILED", "op": "pull_cache", "nth": 1},
    {"action": "timeout", "op": "pull_cache", "nth": 1},
]


def test_a_timeout_after_a_fail_on_the_same_pull_is_masked_in_the_plan_and_the_trace() -> None:
    world = SimWorld(seed=1)
    fail = Fault.fail("LLM_FAILED", op="pull_cache", nth=1)
    timeout = Fault.timeout(op="pull_cache", nth=1)
    with fake_installed(), world.activate():
        world.faults.add(fail, timeout)
        pulls(world)
    assert (world.faults.fired(fail), world.faults.masked(fail)) == (1, 0)
    assert (world.faults.fired(timeout), world.faults.masked(timeout)) == (0, 1)
    assert only_masked(world.faults) == [timeout]
    assert timeout not in never_fired(world.faults)
    outcomes = {(e.op, e.outcome) for e in world.trace if e.op.startswith("fault.")}
    assert ("fault.timeout", "masked") in outcomes
    assert ("fault.timeout", "fired") not in outcomes


def test_explore_counts_masked_rules_apart_from_fired_ones() -> None:
    result = run_one(clients.careful, 0, 1, FAIL_THEN_TIMEOUT, Limits())
    assert result.fired == {"fail": 1}
    assert result.masked == {"timeout": 1}


def test_the_client_run_summary_says_masked() -> None:
    scenario = Scenario(name="masked", rule_specs=tuple(FAIL_THEN_TIMEOUT))
    report = run_client(pulls, scenario)
    assert report.faults_fired == 1
    assert len(report.masked) == 1
    assert "Fault.timeout" in report.masked[0]
    assert "rule masked" in report.render()
    assert report.never_fired == []


def test_the_pytest_failure_report_says_masked(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(
        """
        from datadist_sim import Fault
        from tests.explore import test_masked as here

        def test_masked(sim_world, llm_datadist):
            sim_world.faults.add(Fault.fail("LLM_FAILED", op="pull_cache", nth=1))
            sim_world.faults.add(Fault.timeout(op="pull_cache", nth=1))
            here.pulls(sim_world)
            assert False
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    assert (
        "rule masked (matched, but another rule on the same call won): Fault.timeout" in result.stdout.str()
    )
