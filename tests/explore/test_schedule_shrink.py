"""Schedules (systematic pass, swarm draws) and the shrinker, on their own: no client involved."""

from __future__ import annotations

from typing import List

import pytest

from datadist_sim._world.trace import TraceEvent
from datadist_sim.explore.run import RunResult
from datadist_sim.explore.schedule import Baseline, Schedule, parse_kinds, schedules, systematic
from datadist_sim.explore.shrink import shrink
from datadist_sim.scenarios import rule_from_spec


def _baseline() -> Baseline:
    events = [
        TraceEvent(0.0, 2, "link_clusters", "LLM_SUCCESS", kind="call"),
        TraceEvent(
            0.05, 2, "pull_cache", "LLM_SUCCESS", args="CacheKey(cluster_id=1, req_id=0)", kind="call"
        ),
        TraceEvent(
            0.06, 2, "pull_cache", "LLM_SUCCESS", args="CacheKey(cluster_id=1, req_id=1)", kind="call"
        ),
        TraceEvent(0.06, 1, "node.init", "ok"),
    ]
    return Baseline.from_trace(events, 0.06)


def test_baseline_numbers_each_operation_per_cluster_and_reads_request_ids() -> None:
    base = _baseline()
    assert [(c.op, c.cluster, c.nth, c.req_id) for c in base.calls] == [
        ("link_clusters", 2, 1, None),
        ("pull_cache", 2, 1, 0),
        ("pull_cache", 2, 2, 1),
    ]
    assert base.clusters == [1, 2]


def test_systematic_pass_puts_the_ambiguous_timeouts_first_then_each_call_kind_at_each_call() -> None:
    kinds = ("fail", "delay", "timeout")
    singles = [s for s in systematic(_baseline(), kinds) if len(s) == 1]
    shown = [(s[0]["action"], s[0]["op"], s[0]["nth"], s[0].get("landed")) for s in singles]
    ambiguous = [("timeout", "pull_cache", nth, landed) for nth in (1, 2) for landed in (True, False)]
    rest = [
        (kind, op, nth, False if kind == "timeout" else None)
        for op, nth in (("link_clusters", 1), ("pull_cache", 1), ("pull_cache", 2))
        for kind in kinds
    ]
    assert shown == ambiguous + [r for r in rest if r not in ambiguous]
    for schedule in singles:
        rule_from_spec(schedule[0])  # each is a valid rule


def test_systematic_pass_breaks_the_link_between_two_pulls_of_one_request() -> None:
    events = [
        TraceEvent(0.0, 2, "link_clusters", "LLM_SUCCESS", kind="call"),
        TraceEvent(
            0.05, 2, "pull_blocks", "LLM_SUCCESS", args="CacheKey(cluster_id=1, req_id=4)", kind="call"
        ),
        TraceEvent(
            0.07, 2, "pull_blocks", "LLM_SUCCESS", args="CacheKey(cluster_id=1, req_id=4)", kind="call"
        ),
        TraceEvent(0.07, 1, "node.init", "ok"),
    ]
    base = Baseline.from_trace(events, 0.07)
    rules = [s[0] for s in systematic(base, ("cut_link",)) if len(s) == 1]
    assert rules[0] == {"action": "cut_link", "cluster": 2, "remote": 1, "start_s": 0.05}


def test_systematic_pass_kills_each_peer_strictly_inside_each_transfer() -> None:
    """With transfers lasting at least 1 ms, each pull that returned at ``t`` was running over
    ``(t - 1 ms, t)``: the kill of its peer comes half a millisecond before ``t``, after the kill at the
    call itself."""
    events = [
        TraceEvent(0.0, 2, "link_clusters", "LLM_SUCCESS", kind="call"),
        TraceEvent(
            0.05, 2, "pull_cache", "LLM_SUCCESS", args="CacheKey(cluster_id=1, req_id=0)", kind="call"
        ),
        TraceEvent(0.06, 2, "transfer_cache_async", "LLM_SUCCESS", kind="call"),
        TraceEvent(0.06, 1, "node.init", "ok"),
    ]
    base = Baseline.from_trace(events, 0.06, min_transfer_s=0.001)
    kills = [s[0] for s in systematic(base, ("kill",)) if len(s) == 1 and s[0]["action"] == "kill"]
    timed = [k for k in kills if "start_s" in k]
    assert timed == [{"action": "kill", "cluster": 1, "start_s": pytest.approx(0.0495)}]
    at_call = next(i for i, k in enumerate(kills) if k.get("op") == "pull_cache")
    assert kills.index(timed[0]) == at_call + 1
    assert not [k for k in systematic(Baseline.from_trace(events, 0.06), ("kill",)) if "start_s" in k[0]]


def test_systematic_pairs_put_the_second_fault_on_the_next_call_of_the_same_operation() -> None:
    pairs = [s for s in systematic(_baseline(), ("timeout",)) if len(s) == 2]
    assert pairs
    for first, second in pairs:
        assert (first["op"], first["cluster"]) == (second["op"], second["cluster"])
        assert second["nth"] == first["nth"] + 1


def test_schedules_derive_from_the_seed_and_keep_to_the_kinds() -> None:
    kinds = parse_kinds("fail,timeout")
    one = schedules(3, _baseline(), kinds, 60, 3, systematic_first=False)
    assert one == schedules(3, _baseline(), kinds, 60, 3, systematic_first=False)
    assert one != schedules(4, _baseline(), kinds, 60, 3, systematic_first=False)
    assert {rule["action"] for _, schedule in one for rule in schedule} <= {"fail", "timeout"}
    assert all(1 <= len(schedule) <= 3 for _, schedule in one)
    for _, schedule in one:
        for spec in schedule:
            rule_from_spec(spec)


def test_unknown_fault_kind_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="bogus"):
        parse_kinds("timeout,bogus")


def _verdict(schedule: Schedule, signature: str) -> RunResult:
    return RunResult(0, 7, schedule, failed=bool(signature), signature=signature)


def test_shrink_drops_other_rules_and_simplifies_the_one_that_matters() -> None:
    calls: List[Schedule] = []

    def check(schedule: Schedule) -> RunResult:
        calls.append(schedule)
        timeouts = [r for r in schedule if r["action"] == "timeout"]
        return _verdict(schedule, "RuntimeError" if timeouts else "")

    start: Schedule = [
        {"action": "delay", "seconds": 3.0, "op": "pull_cache", "first": 3},
        {
            "action": "timeout",
            "landed": None,
            "op": "pull_cache",
            "probability": 0.5,
            "start_s": 0.0,
            "end_s": 4.0,
        },
        {"action": "kill", "cluster": 1, "start_s": 0.2},
    ]
    best, runs = shrink(_verdict(start, "RuntimeError"), check)
    assert best.schedule == [{"action": "timeout", "landed": True, "op": "pull_cache", "nth": 1}]
    assert runs == len(calls)


def test_shrink_keeps_a_step_only_when_the_failure_is_the_same() -> None:
    def check(schedule: Schedule) -> RunResult:
        # with the delay alone the run still fails, but differently: not the same bug
        kinds = {r["action"] for r in schedule}
        return _verdict(schedule, "RuntimeError" if "timeout" in kinds else "hang")

    start: Schedule = [
        {"action": "delay", "seconds": 3.0, "op": "pull_cache", "nth": 1},
        {"action": "timeout", "op": "pull_cache", "nth": 2},
    ]
    best, _ = shrink(_verdict(start, "RuntimeError"), check)
    assert best.schedule == [{"action": "timeout", "op": "pull_cache", "nth": 2}]


def test_shrink_ends_on_a_partition_from_a_time_that_stays_not_one_tied_to_a_poll_with_a_tiny_heal() -> None:
    def check(schedule: Schedule) -> RunResult:
        # the bug needs the partition in place from 0.05 s on (whatever triggers it), healed or not
        rule = next((r for r in schedule if r["action"] == "partition"), None)
        breaks = rule is not None and ("op" in rule or float(rule.get("start_s", 0.0)) >= 0.05)  # type: ignore[arg-type]
        result = _verdict(schedule, "RuntimeError" if breaks else "")
        result.fired_at = [0.0512 for _ in schedule]
        return result

    start: Schedule = [
        {
            "action": "partition",
            "cluster": 2,
            "remote": 1,
            "op": "check_link_status",
            "nth": 4,
            "heal_after_s": 0.0009,
        }
    ]
    failing = check(start)
    best, _ = shrink(failing, check)
    assert best.schedule == [{"action": "partition", "cluster": 2, "remote": 1, "start_s": 0.051}]


def test_shrink_drops_the_calling_cluster_of_a_call_rule_when_any_caller_fails_the_same_way() -> None:
    def check(schedule: Schedule) -> RunResult:
        return _verdict(schedule, "RuntimeError" if schedule else "")

    start: Schedule = [{"action": "timeout", "landed": True, "op": "pull_cache", "cluster": 2, "nth": 1}]
    best, _ = shrink(check(start), check)
    assert best.schedule == [{"action": "timeout", "landed": True, "op": "pull_cache", "nth": 1}]
