"""The retry-policy library: parts as pure functions of a state, sessions, the budget, ``call`` on a clock."""

from __future__ import annotations

import random
from typing import List, Optional, Tuple

import pytest
from hypothesis import given
from hypothesis import strategies as st

from datadist_sim import STATUS_TABLE, VirtualClock
from datadist_sim.llm_datadist import LLMException, LLMStatusCode
from datadist_sim.retry import (
    OMNI_INFER_CODES,
    RetryBudget,
    RetryPolicy,
    RetryState,
    budgeted,
    code_aware,
    exponential_jitter,
    fixed_delay,
    immediate,
    no_retry,
    omni_infer,
    relink_after_timeout,
    relink_codes,
    retry_always,
    retry_if_code,
    retry_if_retryable,
    stop_after_attempt,
    stop_after_delay,
    wait_exponential,
    wait_fixed,
    wait_full_jitter,
    wait_none,
)

C = LLMStatusCode


def state(
    attempt: int = 1, code: Optional[C] = C.LLM_TIMEOUT, elapsed: float = 0.0, op: str = ""
) -> RetryState:
    return RetryState(attempt, code, started=10.0, now=10.0 + elapsed, op=op)


def test_stop_parts_and_their_combinations() -> None:
    assert not stop_after_attempt(3)(state(2))
    assert stop_after_attempt(3)(state(3))
    assert stop_after_delay(5.0)(state(elapsed=5.0))
    assert not stop_after_delay(5.0)(state(elapsed=4.9))
    either = stop_after_attempt(3) | stop_after_delay(5.0)
    both = stop_after_attempt(3) & stop_after_delay(5.0)
    assert either(state(1, elapsed=6.0))
    assert not both(state(1, elapsed=6.0))
    assert both(state(3, elapsed=6.0))


def test_wait_parts() -> None:
    assert wait_none()(state()) == 0.0
    assert wait_fixed(2.0)(state(4)) == 2.0
    assert [wait_exponential(0.5, cap=3.0)(state(n)) for n in (1, 2, 3, 4)] == [0.5, 1.0, 2.0, 3.0]
    assert (wait_fixed(1.0) + wait_exponential(1.0))(state(2)) == 3.0


def test_full_jitter_stays_under_the_exponential_cap_and_repeats_for_a_seed() -> None:
    draws = [wait_full_jitter(0.1, 1.0, random.Random(7))(state(n)) for n in range(1, 9)]
    again = [wait_full_jitter(0.1, 1.0, random.Random(7))(state(n)) for n in range(1, 9)]
    assert draws == again
    for n, d in enumerate(draws, start=1):
        assert 0.0 <= d <= min(1.0, 0.1 * 2 ** (n - 1))


def test_retry_if_retryable_follows_the_status_table() -> None:
    pred = retry_if_retryable()
    for code, info in STATUS_TABLE.items():
        assert pred(state(code=code)) is info.is_retryable, code
    assert not pred(state(code=C.LLM_SUSPECT_REMOTE_ERROR))


def test_retry_if_code_and_combinations() -> None:
    busy = retry_if_code([C.LLM_LINK_BUSY])
    assert busy(state(code=C.LLM_LINK_BUSY))
    assert not busy(state(code=C.LLM_TIMEOUT))
    assert (busy | retry_if_code([C.LLM_TIMEOUT]))(state(code=C.LLM_TIMEOUT))
    assert not (busy & retry_always)(state(code=C.LLM_TIMEOUT))


def test_relink_codes_are_the_timeouts_whose_remedy_says_re_establish() -> None:
    assert relink_codes() == {C.LLM_TIMEOUT, C.LLM_WAIT_PROCESS_TIMEOUT}
    relink = relink_after_timeout()
    assert relink(state(code=C.LLM_TIMEOUT, op="pull_cache"))
    assert not relink(state(code=C.LLM_TIMEOUT, op="link_clusters"))
    assert relink(state(code=C.LLM_NOT_YET_LINK, op="pull_cache"))
    assert not relink(state(code=C.LLM_LINK_BUSY, op="pull_cache"))


def test_session_success_retry_and_give_up_reasons() -> None:
    policy = RetryPolicy("t", stop_after_attempt(2), wait_fixed(1.5), retry_if_code([C.LLM_LINK_BUSY]))
    s = policy.start(0.0)
    first = s.decide(C.LLM_LINK_BUSY, 0.0)
    assert (first.retry, first.wait_s, first.reason) == (True, 1.5, "retry")
    assert s.decide(C.LLM_LINK_BUSY, 1.5).reason == "stopped"
    assert policy.start(0.0).decide(C.LLM_FAILED, 0.0).reason == "not retryable"
    assert policy.start(0.0).decide(None, 0.0).reason == "success"


def test_budget_caps_retries_at_a_share_of_recent_calls() -> None:
    budget = RetryBudget(ratio=0.5, window_s=10.0, min_per_s=0.0)
    for _ in range(4):
        budget.deposit(0.0)
    granted = [budget.withdraw(1.0) for _ in range(5)]
    assert granted == [True, True, False, False, False]
    assert budget.refused == 3
    budget.deposit(20.0)  # the old calls and retries have left the window
    assert not budget.withdraw(20.0)  # 1 call * 0.5 < 1 retry
    budget.deposit(20.0)
    assert budget.withdraw(20.0)


def test_budgeted_policy_gives_up_with_reason_budget() -> None:
    policy = budgeted(ratio=0.0, min_per_s=0.0)
    s = policy.start(0.0)
    assert s.decide(C.LLM_TIMEOUT, 0.0).reason == "budget"


def test_code_aware_gives_up_on_non_retryable_and_relinks_after_timeout() -> None:
    policy = code_aware(seed=1)
    assert policy.start(0.0).decide(C.LLM_SUSPECT_REMOTE_ERROR, 0.0).reason == "not retryable"
    d = policy.start(0.0, op="pull_cache").decide(C.LLM_WAIT_PROCESS_TIMEOUT, 1.0)
    assert d.retry
    assert d.relink


def test_omni_infer_matches_reference_13_5() -> None:
    policy = omni_infer()
    s = policy.start(0.0, op="pull_blocks")
    assert [s.decide(C.LLM_TIMEOUT, t).wait_s for t in (0.0, 2.0)] == [2.0, 2.0]
    assert s.decide(C.LLM_TIMEOUT, 4.0).reason == "stopped"
    assert policy.start(0.0).decide(C.LLM_NOT_YET_LINK, 0.0).reason == "not retryable"
    assert C.LLM_NOT_YET_LINK not in OMNI_INFER_CODES


@pytest.mark.parametrize(
    ("factory", "attempts"),
    [
        (no_retry, 1),
        (immediate, 5),
        (fixed_delay, 5),
        (exponential_jitter, 6),
        (code_aware, 6),
        (omni_infer, 3),
    ],
)
def test_each_policy_stops_after_its_attempts(factory: object, attempts: int) -> None:
    policy = factory()  # type: ignore[operator]
    s = policy.start(0.0, op="pull_cache")
    n = 0
    while True:
        d = s.decide(C.LLM_TIMEOUT, float(n))
        n += 1
        if not d.retry:
            break
    assert n == attempts


def test_call_sleeps_on_the_clock_relinks_and_returns() -> None:
    clock = VirtualClock()
    outcomes: List[C] = [C.LLM_WAIT_PROCESS_TIMEOUT, C.LLM_NOT_YET_LINK]
    relinks: List[float] = []

    def pull() -> str:
        if outcomes:
            raise LLMException("boom", status_code=outcomes.pop(0))
        return "ok"

    policy = RetryPolicy("t", stop_after_attempt(5), wait_fixed(2.0), retry_always, relink_after_timeout())
    assert policy.call(pull, clock=clock, op="pull_cache", relink=lambda: relinks.append(clock.now())) == "ok"
    assert clock.now() == 4.0
    assert relinks == [2.0, 4.0]


def test_call_reraises_the_last_error_and_non_llm_errors_at_once() -> None:
    clock = VirtualClock()
    calls = []

    def failing() -> None:
        calls.append(1)
        raise LLMException("down", status_code=C.LLM_LINK_BUSY)

    with pytest.raises(LLMException) as info:
        fixed_delay(1.0, attempts=3).call(failing, clock=clock)
    assert info.value.status_code is C.LLM_LINK_BUSY
    assert (len(calls), clock.now()) == (3, 2.0)

    def bad_args() -> None:
        calls.append(1)
        raise TypeError("cache_key")

    with pytest.raises(TypeError):
        immediate().call(bad_args, clock=clock)
    assert len(calls) == 4


@given(
    events=st.lists(st.tuples(st.floats(0.0, 0.5), st.booleans()), min_size=1, max_size=200),
    ratio=st.floats(0.0, 1.0),
    min_per_s=st.floats(0.0, 2.0),
)
def test_budget_never_grants_more_than_its_share_of_any_window(
    events: List[Tuple[float, bool]], ratio: float, min_per_s: float
) -> None:
    """Property: in every window of ``window_s``, granted retries <= ratio * calls + min_per_s * window."""
    window = 10.0
    budget = RetryBudget(ratio=ratio, window_s=window, min_per_s=min_per_s)
    now, calls, granted = 0.0, [], []
    for gap, is_retry in events:
        now += gap * window
        if is_retry:
            if budget.withdraw(now):
                granted.append(now)
        else:
            budget.deposit(now)
            calls.append(now)
    for t in granted:
        in_window = [g for g in granted if t - window < g <= t]
        seen = [c for c in calls if t - window < c <= t]
        assert len(in_window) <= ratio * len(seen) + min_per_s * window + 1e-9
