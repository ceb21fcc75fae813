"""The plugin in CI: the seed from the command line, the environment or the ini file (in that order),
and a failure report that names the rules that never fired."""

from __future__ import annotations

import re

import pytest

pytest_plugins = ["pytester"]

STRICT = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:benchmark", "-W", "error")
INI = "[pytest]\nasyncio_default_fixture_loop_scope = function\n"
SEED_TEST = """
def test_seed(sim_world):
    assert sim_world.seed == {seed}
"""


def _header(pytester: pytest.Pytester, *args: str) -> str:
    result = pytester.runpytest(*STRICT, *args)
    match = re.search(r"datadist-sim: seed .*", result.stdout.str())
    assert match is not None, result.stdout.str()
    return match.group(0)


def test_the_ini_option_seeds_every_world(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DATADIST_SIM_SEED", raising=False)
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\ndatadist_seed = 11\n")
    pytester.makepyfile(SEED_TEST.format(seed=11))
    header = _header(pytester)
    assert header == "datadist-sim: seed 11 (rerun with --datadist-seed=11) from the datadist_seed ini option"


def test_the_environment_wins_over_the_ini_option(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DATADIST_SIM_SEED", "22")
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\ndatadist_seed = 11\n")
    pytester.makepyfile(SEED_TEST.format(seed=22))
    assert _header(pytester).endswith("from $DATADIST_SIM_SEED")


def test_the_command_line_wins_over_environment_and_ini(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DATADIST_SIM_SEED", "22")
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\ndatadist_seed = 11\n")
    pytester.makepyfile(SEED_TEST.format(seed=33))
    assert _header(pytester, "--datadist-seed=33").endswith("from --datadist-seed")


def test_a_seed_that_is_not_an_integer_is_a_usage_error(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DATADIST_SIM_SEED", "seven")
    pytester.makeini(INI)
    pytester.makepyfile(SEED_TEST.format(seed=7))
    result = pytester.runpytest(*STRICT)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "$DATADIST_SIM_SEED is not an integer: 'seven'" in result.stderr.str()


def test_the_failure_report_names_each_rule_that_never_fired(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DATADIST_SIM_SEED", raising=False)
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(
        """
        from datadist_sim import Fault

        def test_fails(sim_world):
            sim_world.faults.add(Fault.timeout(op="pull_cache", nth=3))
            sim_world.faults.add(Fault.hang(1))
            assert False
        """
    )
    result = pytester.runpytest(*STRICT, "--datadist-seed=1")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["rule never fired: Fault.timeout(op=('pull_cache',), nth=3)"])
    assert "rule never fired: Fault.hang" not in result.stdout.str()


FAILING_TESTS = """
def test_fails_with_the_world(sim_world):
    assert False

def test_fails_without_the_world():
    assert False

def test_passes(sim_world):
    pass
"""


def test_a_quiet_run_that_fails_names_the_seed(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``pytest -q`` (the README's CI command) prints no header; a failed run names its seed at the end,
    also when the failing test never asked for a world."""
    monkeypatch.setenv("DATADIST_SIM_SEED", "4242")
    pytester.makeini(INI)
    path = pytester.makepyfile(FAILING_TESTS)
    result = pytester.runpytest(
        *STRICT, "-q", f"{path}::test_fails_without_the_world", f"{path}::test_passes"
    )
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "datadist-sim: seed 4242 (rerun with --datadist-seed=4242) from $DATADIST_SIM_SEED" in out


def test_a_quiet_run_that_passes_stays_quiet(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DATADIST_SIM_SEED", "4242")
    pytester.makeini(INI)
    path = pytester.makepyfile(FAILING_TESTS)
    result = pytester.runpytest(*STRICT, "-q", f"{path}::test_passes")
    assert result.ret == pytest.ExitCode.OK
    assert "4242" not in result.stdout.str()


def test_the_junit_report_carries_the_seed(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The suite's properties hold the run's seed; each test that had a world holds its world's."""
    import xml.etree.ElementTree as ET

    monkeypatch.setenv("DATADIST_SIM_SEED", "4242")
    pytester.makeini(INI)
    pytester.makepyfile(FAILING_TESTS)
    report = pytester.path / "report.xml"
    pytester.runpytest(*STRICT, "-q", f"--junitxml={report}")
    root = ET.parse(report).getroot()
    suite = root.find("testsuite")
    assert suite is not None
    suite_props = {p.get("name"): p.get("value") for p in suite.findall("properties/property")}
    assert suite_props == {"datadist_seed": "4242"}
    per_test = {
        case.get("name"): {p.get("name"): p.get("value") for p in case.findall("properties/property")}
        for case in suite.findall("testcase")
    }
    assert per_test["test_fails_with_the_world"] == {"datadist_seed": "4242"}
    assert per_test["test_passes"] == {"datadist_seed": "4242"}
    assert per_test["test_fails_without_the_world"] == {}
