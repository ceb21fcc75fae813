"""datadist-sim explore: finds a planted bug, shrinks it to one rule, replays it; a careful client
survives the same runs; the failure verdicts (hang, invariants, baseline) and the command's exit codes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List

import pytest
from tests.explore import clients, targets

from datadist_sim import SimWorld, scenarios
from datadist_sim.cli import main
from datadist_sim.explore import Limits, Options, explore
from datadist_sim.explore.run import run_one

BUGGY = "tests.explore.clients:buggy"
CAREFUL = "tests.explore.clients:careful"
TWICE = "tests.explore.clients:twice"
LANDED = "tests.explore.clients:landed"
RUNS = 200


@pytest.fixture(scope="module")
def buggy_outcome() -> Any:
    return explore(BUGGY, Options(runs=RUNS, workers=1))


def test_planted_bug_is_found_within_a_few_hundred_runs_and_shrunk_to_one_rule(buggy_outcome: Any) -> None:
    first = buggy_outcome.first_failure
    assert first is not None
    assert first.index < RUNS
    shrunk = buggy_outcome.shrunk
    assert shrunk is not None
    assert len(shrunk.schedule) == 1
    assert shrunk.schedule[0]["op"] == "pull_cache"
    assert shrunk.signature == "RuntimeError"
    assert "unhandled LLM_NOT_YET_LINK" in shrunk.failure


def test_careful_client_survives_the_same_runs() -> None:
    outcome = explore(CAREFUL, Options(runs=RUNS, workers=1))
    assert not outcome.baseline.failed
    assert len(outcome.results) == RUNS
    assert outcome.failures == []
    assert sum(outcome.fired().values()) > 0  # the runs did inject faults


def test_careful_client_survives_swarm_runs_of_every_kind() -> None:
    outcome = explore(CAREFUL, Options(runs=150, workers=1, systematic=False, seed=5))
    assert outcome.failures == []
    assert set(outcome.fired()) >= {"fail", "delay", "timeout", "kill"}


def test_careful_kv_cache_manager_client_sees_only_codes_its_mode_gives_and_survives() -> None:
    """KvCacheManager mode: explore draws the v1 codes (``LLM_WAIT_PROCESS_TIMEOUT`` for a timeout, never
    the CacheManager's ``LLM_TIMEOUT``), and a client that handles them correctly is never failed."""
    outcome = explore("tests.explore.clients:kv_careful", Options(runs=300, workers=1, seed=3))
    assert outcome.failures == []
    assert set(outcome.fired()) >= {"fail", "timeout", "kill", "cut_link"}
    seen = {code for result in outcome.results for code in result.codes}
    assert "LLM_WAIT_PROCESS_TIMEOUT" in seen
    assert "LLM_TIMEOUT" not in seen
    assert "LLM_OUT_OF_MEMORY" not in seen


def test_careful_hixl_backend_client_sees_only_codes_its_mode_gives_and_survives() -> None:
    """The hixl transfer backend: explore draws that mode's codes (a failed link set-up is ``LLM_FAILED``
    or ``LLM_TIMEOUT``, never the default backend's ``LLM_LINK_FAILED``), and a client that handles them
    is never failed."""
    from datadist_sim.faults import engine_codes

    outcome = explore("tests.explore.clients:hixl_careful", Options(runs=300, workers=1, seed=3))
    assert outcome.failures == []
    assert set(outcome.fired()) >= {"fail", "timeout", "kill", "cut_link", "partition"}
    seen = {code for result in outcome.results for code in result.codes}
    assert "LLM_TIMEOUT" in seen
    allowed = {c.name for c in engine_codes.union(engine_codes.OPS, ["hixl"])} | {"LLM_SUCCESS"}
    assert seen <= allowed, seen - allowed
    assert "LLM_LINK_FAILED" not in seen
    assert "LLM_WAIT_PROCESS_TIMEOUT" not in seen


def _one_pull(world: SimWorld, seen: Dict[str, Any]) -> None:
    """Link, then one pull of request 0 into a zeroed slot; what the pull gave and the slot are noted."""
    import llm_datadist as llm

    from datadist_sim import tensor_views

    assert clients._prompt(llm) is not None
    d = llm.LLMDataDist(llm.LLMRole.DECODER, clients.D_ID)
    d.init(clients._options())
    dst = d.cache_manager.allocate_cache(clients._desc(llm, clients.REQUESTS))
    assert d.link_clusters([clients._cluster(llm)], 2000)[0] == llm.LLMStatusCode.LLM_SUCCESS
    try:
        d.cache_manager.pull_cache(llm.CacheKey(clients.P_ID, 0), dst, batch_index=0)
        seen["code"] = "LLM_SUCCESS"
    except llm.LLMException as exc:
        seen["code"] = exc.status_code.name
    world.faults.clear()
    seen["zeros"] = all(not view[0].any() for view in tensor_views(dst))


def test_a_peer_killed_mid_transfer_times_the_pull_out_and_writes_nothing() -> None:
    """The systematic pass's kill inside the pull: it comes after the pull began (the link's return)
    and before the pull returned in the baseline; the pull times out (``LLM_TIMEOUT``, as the engine's
    stream sync does: hixl ``comm_entity.cc:554-556``, ``llm_log.h:154-156``) and its destination
    slot keeps its bytes (zeros): never success over torn bytes."""
    from datadist_sim.explore.schedule import ambiguous

    seen: Dict[str, Any] = {}
    base_run = run_one(lambda w: _one_pull(w, seen), -1, 0, [], Limits(), want_baseline=True)
    base = base_run.baseline
    assert base is not None
    assert seen == {"code": "LLM_SUCCESS", "zeros": False}
    link, pull = (next(c for c in base.calls if c.op == op) for op in ("link_clusters", "pull_cache"))
    kill = next(s for s in ambiguous(base, ("kill",)) if "start_s" in s)
    assert kill["cluster"] == clients.P_ID
    assert link.time < kill["start_s"] < pull.time
    result = run_one(lambda w: _one_pull(w, seen), 0, 1, [kill], Limits())
    assert not result.failed, result.failure
    assert seen == {"code": "LLM_TIMEOUT", "zeros": True}
    assert result.fired == {"kill": 1}


def test_bug_met_only_when_the_peer_dies_mid_transfer_is_found_by_the_systematic_pass() -> None:
    """``mid_transfer`` takes a timed-out pull for a live peer; the systematic pass's kill inside the
    first pull fails it, and that run shrinks to one rule."""
    outcome = explore("tests.explore.clients:mid_transfer", Options(runs=40, workers=1))
    timed = [r for r in outcome.results if [s.get("action") for s in r.schedule] == ["kill"]]
    mid = [r for r in timed if "start_s" in r.schedule[0]]
    assert mid
    assert all(r.failed for r in mid)
    assert outcome.shrunk is not None
    assert len(outcome.shrunk.schedule) == 1
    assert outcome.shrunk.schedule[0]["action"] in ("kill", "hang", "partition")
    assert "taken for alive" in outcome.shrunk.failure


def test_two_fault_bug_is_found_by_the_systematic_pairs_and_shrunk_to_two_rules() -> None:
    outcome = explore(TWICE, Options(runs=300, workers=1))
    assert outcome.first_failure is not None
    assert all(len(r.schedule) == 2 for r in outcome.failures)  # no single fault breaks it
    assert outcome.shrunk is not None
    rules = outcome.shrunk.schedule
    assert len(rules) == 2
    assert {r["op"] for r in rules} == {"pull_cache"}


def test_shrunk_run_fails_again_when_replayed_from_its_scenario_file(
    buggy_outcome: Any, tmp_path: Path
) -> None:
    from datadist_sim.explore.report import write_scenario

    path = write_scenario(tmp_path, BUGGY, buggy_outcome.shrunk)
    assert path.name == f"buggy-{buggy_outcome.shrunk.seed}.toml"
    loaded = scenarios.load(path)
    assert loaded.seed == buggy_outcome.shrunk.seed
    assert [dict(s) for s in loaded.rule_specs] == buggy_outcome.shrunk.schedule
    assert main(["explore", BUGGY, "--replay", str(path)]) == 1
    assert main(["explore", CAREFUL, "--replay", str(path)]) == 0


def test_trace_option_writes_the_replayed_run_with_pid_expanded(buggy_outcome: Any, tmp_path: Path) -> None:
    import os

    from datadist_sim import read_trace
    from datadist_sim.explore.report import write_scenario

    path = write_scenario(tmp_path, BUGGY, buggy_outcome.shrunk)
    template = tmp_path / "t-{pid}.jsonl"
    assert main(["explore", BUGGY, "--replay", str(path), "--trace", str(template)]) == 1
    written = tmp_path / f"t-{os.getpid()}.jsonl"
    events = read_trace(written)
    assert any(e.kind == "call" and e.op == "pull_cache" for e in events)
    assert any(e.op.startswith("fault.") and e.outcome == "fired" for e in events)  # the shrunk rule


def test_trace_option_writes_the_baseline_when_nothing_fails(tmp_path: Path) -> None:
    from datadist_sim import read_trace

    out = tmp_path / "base.jsonl"
    assert main(["explore", CAREFUL, "--runs", "2", "--workers", "1", "--trace", str(out)]) == 0
    events = read_trace(out)
    assert any(e.kind == "call" and e.op == "pull_cache" for e in events)
    assert not any(e.op.startswith("fault.") for e in events)  # the fault-free baseline


def test_scenario_file_loads_into_a_running_world_which_keeps_its_own_seed(
    buggy_outcome: Any, tmp_path: Path
) -> None:
    from datadist_sim.explore.report import write_scenario

    path = write_scenario(tmp_path, BUGGY, buggy_outcome.shrunk)
    world = SimWorld(seed=3)
    rules = world.faults.load(path)
    assert len(rules) == 1
    assert world.seed == 3


def test_command_writes_the_scenario_prints_the_replay_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["explore", BUGGY, "--runs", "120", "--workers", "1", "--out", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    written = list(tmp_path.glob("buggy-*.toml"))
    assert len(written) == 1
    assert f"--replay {written[0]}" in out
    assert "Fault.delay(" in out or "Fault.timeout(" in out
    assert "runs/s" in out
    assert "faults fired:" in out
    assert "codes the client saw:" in out


def test_command_exits_0_when_no_run_fails_and_reports_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explore", CAREFUL, "--runs", "30", "--workers", "1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["runs"] == 30
    assert report["failures"] == 0
    assert report["shrunk"] is None


def test_failing_baseline_exits_1_with_its_failure(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explore", "tests.explore.targets:always_fails", "--runs", "5"]) == 1
    assert "baseline run fails" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv",
    [
        ["explore", "tests.explore.targets:missing"],
        ["explore", "no_colon_here"],
        ["explore", CAREFUL, "--faults", "fail,bogus"],
        ["explore", CAREFUL, "--runs", "-1"],
    ],
)
def test_usage_errors_exit_2(argv: List[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert "datadist-sim explore:" in capsys.readouterr().err


def test_ray_engine_without_ray_is_a_usage_error_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    assert main(["explore", CAREFUL, "--runs", "3", "--engine", "ray"]) == 2
    assert "datadist-sim[ray]" in capsys.readouterr().err


def test_simulated_time_past_the_bound_is_a_hang() -> None:
    result = run_one(targets.sleeps_forever, 0, 0, [], Limits(sim_limit_s=30.0))
    assert result.failed
    assert result.signature == "hang"
    assert "simulated time passed 30 s" in result.failure


def test_a_patched_time_sleep_retry_loop_past_the_bound_is_a_hang() -> None:
    result = run_one(targets.backs_off_forever, 0, 0, [], Limits(sim_limit_s=60.0))
    assert result.failed
    assert result.signature == "hang"
    assert "simulated time passed 60 s" in result.failure


def test_a_target_that_never_lets_time_pass_hangs_on_the_wall_bound() -> None:
    result = run_one(targets.spins, 0, 0, [], Limits(wall_limit_s=0.05))
    assert result.failed
    assert result.signature == "hang"
    assert "wall time" in result.failure


def test_a_call_the_real_engine_never_returns_from_is_a_hang() -> None:
    """A hixl-backend unlink of a peer hung for good waits forever on hardware; the simulator raises
    ``BlocksForever`` there, and explore counts the run a hang, not an exception of the client's."""
    result = run_one(targets.unlinks_a_peer_hung_for_good, 0, 0, [], Limits())
    assert result.failed
    assert result.signature == "hang"
    assert "would wait forever" in result.failure


def test_unbalanced_pool_books_fail_a_run_whose_target_passed() -> None:
    result = run_one(targets.unbalances_a_pool, 0, 0, [], Limits())
    assert result.failed
    assert result.signature == "invariant"
    assert "device pool" in result.failure


def test_faults_fired_are_counted_per_kind_from_the_trace() -> None:
    schedule: List[Dict[str, object]] = [
        {"action": "fail", "code": "LLM_FAILED", "op": "pull_cache", "first": 2}
    ]
    result = run_one(
        __import__("tests.explore.clients", fromlist=["careful"]).careful, 0, 0, schedule, Limits()
    )
    assert not result.failed
    assert result.fired == {"fail": 2}
    assert result.codes["LLM_FAILED"] == 2


def test_bug_that_needs_a_landed_timeout_is_found_by_the_systematic_pass_and_shrunk_to_one_rule() -> None:
    from datadist_sim.explore.schedule import systematic
    from datadist_sim.explore.search import baseline_of

    options = Options(runs=RUNS, workers=1)
    _, base, _ = baseline_of(clients.landed, options)
    systematic_runs = sum(1 for _ in systematic(base, options.kinds))
    outcome = explore(LANDED, options)
    first = outcome.first_failure
    assert first is not None
    assert first.index < systematic_runs
    assert len(outcome.found) == 1
    shrunk = outcome.shrunk
    assert shrunk is not None
    assert len(shrunk.schedule) == 1
    rule = shrunk.schedule[0]
    assert (rule["action"], rule["landed"], rule["op"]) == ("timeout", True, "pull_cache")
    assert "unhandled LLM_KV_CACHE_NOT_EXIST" in shrunk.failure


def test_landed_and_lost_timeouts_and_a_peer_kill_come_first_at_each_transfer_call() -> None:
    from datadist_sim.explore.schedule import systematic
    from datadist_sim.explore.search import baseline_of

    options = Options(runs=RUNS, workers=1)
    _, base, _ = baseline_of(clients.careful, options)
    pulls = [c for c in base.calls if c.op == "pull_cache"]
    first = [s[0] for s in list(systematic(base, options.kinds))[: 4 * len(pulls)]]
    for n, site in enumerate(pulls):
        landed, lost, kill, mid = first[4 * n : 4 * n + 4]
        assert (landed["action"], landed["landed"], landed["nth"]) == ("timeout", True, site.nth)
        assert (lost["action"], lost["landed"], lost["nth"]) == ("timeout", False, site.nth)
        assert (kill["action"], kill["op"], kill["cluster"]) == ("kill", "pull_cache", clients.P_ID)
        assert (mid["action"], mid["cluster"]) == ("kill", clients.P_ID)
        assert site.time - base.min_transfer_s < mid["start_s"] < site.time
