"""What explore reports: every distinct failure (grouped by where the target raised), each shrunk, with
the readings of a timed-out link it fails under, a trace excerpt around the fault that fired, and a
scenario file and replay that carry the reading it needs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from datadist_sim import scenarios
from datadist_sim.cli import main
from datadist_sim.explore import Options, explore

pytest_plugins = ["pytester"]

BOTH = "tests.explore.clients:both"
TRUSTS = "tests.explore.clients:trusts_the_link"


@pytest.fixture(scope="module")
def both_outcome() -> Any:
    return explore(BOTH, Options(runs=200, workers=1, kinds=("timeout",)))


def test_every_distinct_failure_is_reported_with_its_count_and_its_own_shrunk_schedule(
    both_outcome: Any,
) -> None:
    groups = {found.group: found for found in both_outcome.found}
    assert len(groups) == 2, list(groups)
    assert all(group.startswith("RuntimeError at tests/explore/clients.py:") for group in groups)
    assert sum(found.count for found in groups.values()) == len(both_outcome.failures)
    sizes = sorted(len(found.shrunk.schedule) for found in groups.values())
    assert sizes == [1, 2]  # the landed timeout alone; two timeouts on one request
    for found in groups.values():
        assert found.shrunk.group == found.group


def test_the_trace_excerpt_centres_on_the_fault_that_fired(both_outcome: Any) -> None:
    for found in both_outcome.found:
        excerpt = found.shrunk.trace_tail
        fired = [n for n, line in enumerate(excerpt) if "fault.timeout" in line and "fired" in line]
        assert fired, excerpt
        assert 0 < fired[0] <= 5  # a few events before it, the client's reaction after
        assert any("pull_cache" in line for line in excerpt[fired[0] + 1 :])


def test_the_command_prints_each_distinct_failure_and_writes_a_file_each(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["explore", BOTH, "--runs", "200", "--workers", "1", "--faults", "timeout", "--out", str(tmp_path)]
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "in 2 distinct place(s)" in out
    assert "[1] RuntimeError at" in out
    assert "[2] RuntimeError at" in out
    assert len(list(tmp_path.glob("both-*.toml"))) == 2
    assert "fails under both readings" in out


@pytest.fixture(scope="module")
def trusts_outcome() -> Any:
    return explore(TRUSTS, Options(runs=40, workers=1, kinds=("timeout",)))


def test_a_failure_that_needs_the_status_tables_reading_says_so(trusts_outcome: Any) -> None:
    assert len(trusts_outcome.found) == 1
    shrunk = trusts_outcome.shrunk
    assert shrunk.readings == {"table": True, "code": False}


def test_its_scenario_file_carries_the_reading_and_replay_follows_it_or_the_option(
    trusts_outcome: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from datadist_sim.explore.report import readings_line, write_scenario

    assert "fails only under the status table's" in readings_line(trusts_outcome.shrunk)
    path = write_scenario(tmp_path, TRUSTS, trusts_outcome.shrunk)
    assert scenarios.load(path).config == {"comm_timeout_keeps_link": False}
    assert main(["explore", TRUSTS, "--replay", str(path)]) == 1
    assert main(["explore", TRUSTS, "--replay", str(path), "--reading", "code"]) == 0
    capsys.readouterr()
    assert main(["explore", TRUSTS, "--replay", str(path), "--reading", "both", "--json"]) == 1
    readings = json.loads(capsys.readouterr().out)["readings"]
    assert {name: r["failed"] for name, r in readings.items()} == {"table": True, "code": False}


def test_replay_and_the_scenario_marker_build_the_world_with_the_files_reading(
    trusts_outcome: Any, tmp_path: Path, pytester: pytest.Pytester
) -> None:
    from datadist_sim.explore.report import write_scenario

    path = write_scenario(tmp_path, TRUSTS, trusts_outcome.shrunk)
    text = path.read_text().replace("comm_timeout_keeps_link = false", "comm_timeout_keeps_link = true")
    path.write_text(text)
    assert main(["explore", TRUSTS, "--replay", str(path)]) == 0  # the code's reading: it passes
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(
        f"""
        import pytest

        @pytest.mark.datadist_scenario({str(path)!r})
        def test_reading(sim_world):
            assert sim_world.config.comm_timeout_keeps_link is True
            assert sim_world.faults.rules
        """
    )
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)


def test_the_marker_replay_follows_the_files_reading_or_the_option(
    trusts_outcome: Any, tmp_path: Path, pytester: pytest.Pytester
) -> None:
    from datadist_sim.explore.report import write_scenario

    path = write_scenario(tmp_path, TRUSTS, trusts_outcome.shrunk)  # [config]: the table's reading
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(
        """
        import pytest
        from tests.explore import clients

        @pytest.mark.datadist_explore(runs=5)
        def test_trusting(sim_world, llm_datadist):
            clients.trusts_the_link(sim_world)
        """
    )
    replay = f"--datadist-replay={path}"
    pytester.runpytest("-p", "no:cacheprovider", replay).assert_outcomes(failed=1)
    code = pytester.runpytest("-p", "no:cacheprovider", replay, "--datadist-reading=code")
    code.assert_outcomes(passed=1)
