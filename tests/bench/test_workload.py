"""The retry benchmark's workload driver: requests, the event clock, faults, policies and determinism."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest

from datadist_sim import Fault, LLMStatusCode
from datadist_sim.bench.workload import Driver, EventClock, Workload, make_requests
from datadist_sim.faults.retime import Timing, bench_rules
from datadist_sim.retry import code_aware, immediate, no_retry

SMALL = Workload(requests=120, rate_per_s=10.0)


def test_event_clock_follows_the_driver_even_backwards() -> None:
    clock = EventClock()
    clock.set(5.0)
    clock.sleep(1.5)
    assert clock.now() == 6.5
    clock.set(5.2)
    clock.advance_to(5.0)
    assert clock.now() == 5.2
    with pytest.raises(ValueError, match="seconds"):
        clock.sleep(-1)


def test_requests_are_poisson_arrivals_with_the_configured_sizes_and_clusters() -> None:
    reqs = make_requests(replace(SMALL, requests=2000, rate_per_s=20.0))
    gaps = [b.arrival - a.arrival for a, b in zip(reqs, reqs[1:])]
    assert all(g >= 0 for g in gaps)
    assert sum(gaps) / len(gaps) == pytest.approx(1 / 20.0, rel=0.1)
    assert {r.nbytes for r in reqs} == {k * 1024 for k in SMALL.cache_kib}
    assert {r.prompt for r in reqs} == set(range(SMALL.prompts))
    assert {r.decode for r in reqs} == set(range(SMALL.decodes))


@pytest.mark.parametrize("mode", ["v1", "v2"])
def test_without_faults_every_request_is_delivered_on_its_first_attempt(mode: str) -> None:
    reqs = Driver(replace(SMALL, mode=mode), no_retry()).run()
    assert all(r.ok and r.codes == ["LLM_SUCCESS"] for r in reqs)
    for r in reqs:
        assert r.finished is not None
        assert r.finished - r.arrival >= r.nbytes / SMALL.bandwidth_bytes_per_s


def test_a_busy_link_queues_the_next_request() -> None:
    wl = replace(SMALL, prompts=1, decodes=1, requests=50, rate_per_s=1e6, cache_kib=(4096,))
    reqs = Driver(wl, no_retry()).run()
    ends = sorted(r.finished for r in reqs if r.finished is not None)
    pull_s = 4096 * 1024 / wl.bandwidth_bytes_per_s
    assert all(b - a >= pull_s * 0.99 for a, b in zip(ends, ends[1:]))


def test_same_seed_same_outcomes_other_seed_other_arrivals() -> None:
    rules = bench_rules("flaky_link", 1.0, Timing(start_s=2.0, window_s=6.0))

    def outcome(seed: int) -> list:
        reqs = Driver(
            replace(SMALL, seed=seed, mode="v2"), code_aware(seed=seed), [r.copy() for r in rules]
        ).run()
        return [(r.arrival, r.codes, r.finished) for r in reqs]

    assert outcome(3) == outcome(3)
    assert outcome(3) != outcome(4)


def test_a_timed_out_pull_breaks_the_link_and_only_a_relinking_policy_recovers() -> None:
    # one pull times out at t >= 2 s; the link it used stays broken unless the client re-links
    rule = Fault.timeout(op="pull_cache", nth=1, start_s=2.0)
    plain = Driver(SMALL, immediate(), [rule]).run()
    relinking = Driver(SMALL, code_aware(), [rule.copy()]).run()
    codes = Counter(c for r in plain for c in r.codes)
    # KvCacheManager mode: GE keeps the broken link's entry, so every later pull over it is sent and
    # times out as well (docs/vendor_facts.md, "v1: a pull over a link a timeout broke")
    assert codes["LLM_WAIT_PROCESS_TIMEOUT"] > 1
    assert codes["LLM_NOT_YET_LINK"] == 0
    assert all(r.ok for r in relinking)
    assert sum(not r.ok for r in plain) > 1


def test_the_status_table_decides_give_up_not_the_policy_s_patience() -> None:
    # a non-retryable code (SUSPECT_REMOTE_ERROR) ends the request on its first attempt under code-aware
    rule = Fault.fail(LLMStatusCode.LLM_SUSPECT_REMOTE_ERROR, op="pull_cache", nth=3)
    reqs = Driver(SMALL, code_aware(), [rule]).run()
    failed = [r for r in reqs if not r.ok]
    assert len(failed) == 1
    assert failed[0].codes == ["LLM_SUSPECT_REMOTE_ERROR"]
    assert failed[0].reason == "not retryable"
