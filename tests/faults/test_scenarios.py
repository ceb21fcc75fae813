"""Every bundled scenario runs, shows the codes it promises, and is reproducible byte for byte."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from datadist_sim import Fault, SimWorld, read_trace, scenarios, summarise_trace
from datadist_sim.cli import main
from datadist_sim.scenarios.runner import run, self_check, trace_of

BUNDLED = scenarios.names()


def test_the_scenario_library_covers_every_fault_family() -> None:
    assert set(BUNDLED) >= {
        "flaky_link",
        "timeout_spike",
        "link_cut_mid_pull",
        "prompt_crash",
        "partition_heal",
        "pool_pressure",
        "busy_link_storm",
        "uce",
        "cluster_limit_misuse",
        "duplicate_requests",
        "role_switch_live_links",
    }


@pytest.mark.parametrize("name", BUNDLED)
def test_scenario_shows_the_codes_it_promises(name: str) -> None:
    scenario = scenarios.load(name)
    assert scenario.expect, f"{name} promises no code"
    report = run(scenario, seed=1)
    missing = [code for code in scenario.expect if code not in report.codes()]
    assert not missing, f"{name}: {missing} not seen in {report.codes()}"
    assert report.delivered > 0


@pytest.mark.parametrize("name", BUNDLED)
def test_scenario_runs_from_the_command_line(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", name, "--seed", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["scenario"] == name
    assert out["missing"] == []
    assert set(out["expected"]) <= set(out["codes"])


@pytest.mark.parametrize("name", ["flaky_link", "prompt_crash", "partition_heal", "uce"])
def test_same_seed_same_scenario_gives_an_identical_trace(name: str) -> None:
    first = trace_of(name, seed=11)
    assert first == trace_of(name, seed=11)
    assert '"kind": "call"' in first
    assert self_check(name, seed=11)


def test_another_seed_gives_another_trace_when_rules_are_random() -> None:
    assert trace_of("flaky_link", seed=1) != trace_of("flaky_link", seed=2)


def test_trace_round_trips_through_json_lines_and_summarises(tmp_path: Path) -> None:
    world = SimWorld(seed=3)
    report = run("busy_link_storm", world=world, trace_path=tmp_path / "t.jsonl")
    events = read_trace(tmp_path / "t.jsonl")
    assert events == list(world.trace)
    summary = summarise_trace(events)
    assert summary.per_code == report.codes()
    assert summary.per_op["pull_cache"]["LLM_LINK_BUSY"] == report.codes()["LLM_LINK_BUSY"]
    assert summary.faults_fired == report.faults_fired
    assert "pull_cache" in summary.table()


def test_trace_streams_to_a_sink_beyond_its_buffer() -> None:
    sink = io.StringIO()
    world = SimWorld(seed=0, trace_size=10, trace_sink=sink)
    run("duplicate_requests", world=world)
    assert len(world.trace) == 10
    assert world.trace.dropped == world.trace.total - 10
    streamed = read_trace(io.StringIO(sink.getvalue()))
    assert len(streamed) == world.trace.total
    assert streamed[-10:] == list(world.trace)


def test_trace_lines_are_readable_and_have_no_memory_addresses() -> None:
    world = SimWorld(seed=0)
    run("uce", world=world)
    lines = world.trace.lines()
    assert any("pull_cache(CacheKey(" in line and "LLM_SUSPECT_REMOTE_ERROR" in line for line in lines)
    assert not any(" at 0x" in line for line in lines)
    assert len(world.trace.lines(last=5)) == 5


def test_rate_scales_random_rules_only() -> None:
    scenario = scenarios.load("flaky_link")
    assert scenario.rules(rate=2.0)[0].probability == pytest.approx(0.3)
    assert scenarios.load("prompt_crash").rules(rate=2.0)[0].probability == 1.0
    quiet = run(scenario, seed=4, rate=0.0)
    assert "LLM_TIMEOUT" not in quiet.codes()


def test_a_scenario_file_of_your_own(tmp_path: Path) -> None:
    path = tmp_path / "mine.toml"
    path.write_text(
        'expect = ["LLM_LINK_BUSY"]\n[workload]\nmode = "v1"\nrequests = 4\n'
        '[[rules]]\naction = "fail"\nop = "pull_cache"\ncode = "LINK_BUSY"\nnth = 2\n'
    )
    report = run(str(path), seed=0)
    assert report.codes()["LLM_LINK_BUSY"] == 1
    world = SimWorld()
    rules = world.faults.load(path)
    assert len(rules) == 1
    assert isinstance(rules[0], Fault)


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ('[[rules]]\naction = "fail"\ncode = "LLM_FAILED"\nopp = "x"\n', "opp"),
        ('[[rules]]\nop = "pull_cache"\n', "action"),
        ('[[rules]]\naction = "fail"\ncode = "NOPE"\n', "NOPE"),
        ("surprise = 1\n", "surprise"),
        ('[workload]\nmode = "v3"\n', "mode"),
    ],
)
def test_a_bad_scenario_file_names_what_is_wrong(tmp_path: Path, text: str, named: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ValueError, match=named):
        scenarios.load(path)


def test_run_command_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "no_such_scenario"]) == 2
    path = tmp_path / "promise.toml"
    path.write_text('expect = ["LLM_LINK_BUSY"]\n[workload]\nrequests = 2\n')
    assert main(["run", str(path)]) == 1
    assert "missing: LLM_LINK_BUSY" in capsys.readouterr().out
    assert main(["run", "--list"]) == 0
    assert "flaky_link" in capsys.readouterr().out
