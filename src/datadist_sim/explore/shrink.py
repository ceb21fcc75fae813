"""Shrink a failing schedule to the fewest, plainest rules that still fail the same way.

Greedy and deterministic, like a property tester's shrinker: first drop whole rules, then make each rule
plainer one step at a time, keeping a step only when the re-run (same world seed) fails with the same
signature at the same place in the target (``RunResult.group``). Plainer means fewer conditions and
rounder numbers: a world fault tied to the Nth call of some operation becomes one that starts at the
time it fired (a partition from 0.05 s, not one tied to the fourth poll); a fault that heals becomes
one that stays (not a 0.9 ms heal); a rule for one cluster, one for any caller; a ``probability`` the
``nth`` call it fired on; fewer firings; a shorter window; an indeterminate ``landed`` its outcome;
a delay a round number of seconds. It stops when no single step keeps the failure, or when the run
budget is spent.
"""

from __future__ import annotations

import math
from typing import Callable, Iterator, List, Optional, Tuple

from datadist_sim.explore.run import RunResult
from datadist_sim.explore.schedule import Schedule, Spec
from datadist_sim.faults.rules import WORLD_ACTIONS

Check = Callable[[Schedule], RunResult]
MAX_SHRINK_RUNS = 400
_NTH_TRIES = 8


def shrink(failing: RunResult, check: Check, *, budget: int = MAX_SHRINK_RUNS) -> Tuple[RunResult, int]:
    """The plainest failing run found from ``failing`` (same seed, signature and place), and the runs
    it took."""
    best = failing
    runs = 0
    progress = True
    while progress and runs < budget:
        progress = False
        for candidate in _candidates(best.schedule, best.fired_at):
            if runs >= budget:
                break
            runs += 1
            result = check(candidate)
            if result.failed and result.group == failing.group:
                best, progress = result, True
                break
    return best, runs


def _candidates(schedule: Schedule, fired_at: List[Optional[float]]) -> Iterator[Schedule]:
    if len(schedule) > 1:
        for i in range(len(schedule)):
            yield schedule[:i] + schedule[i + 1 :]
    for i, rule in enumerate(schedule):
        when = fired_at[i] if i < len(fired_at) else None
        for simpler in simplify(rule, when):
            yield [*schedule[:i], simpler, *schedule[i + 1 :]]


def _without(rule: Spec, *keys: str) -> Spec:
    return {k: v for k, v in rule.items() if k not in keys}


_TRIGGERS = ("op", "nth", "first", "after", "sequence", "probability", "req_id")


def simplify(rule: Spec, fired_at: Optional[float] = None) -> Iterator[Spec]:
    """One-step simplifications of a rule, the most simplifying first (``fired_at``: when it first fired
    in the run being shrunk)."""
    first = _int(rule.get("first"))
    after = _int(rule.get("after"))
    if rule.get("action") in WORLD_ACTIONS and "op" in rule and fired_at is not None:
        timed = _without(rule, *_TRIGGERS, "start_s", "end_s")
        for start in dict.fromkeys((0.0, _round_down(fired_at), round(fired_at, 6))):
            yield {**timed, "start_s": start}
    if "heal_after_s" in rule or ("end_s" in rule and rule.get("action") in WORLD_ACTIONS):
        yield _without(rule, "heal_after_s", "end_s")
    for key in ("cluster", "remote", "req_id"):
        if key in rule and "op" in rule and rule.get("action") not in WORLD_ACTIONS:
            yield _without(rule, key)
    if "probability" in rule:
        base = _without(rule, "probability", "first", "after", "sequence")
        yield from ({**base, "nth": n} for n in range(1, _NTH_TRIES + 1))
        yield _without(rule, "probability")
    if rule.get("sequence"):
        yield _without(rule, "sequence")
    if after is not None:
        low = after + 1
        base = _without(rule, "after", "first")
        yield {**base, "nth": low}
        yield _without(rule, "after")
    if first is not None and "nth" not in rule:
        if first > 1:
            yield from ({**_without(rule, "first"), "nth": n} for n in range(1, min(first, _NTH_TRIES) + 1))
            yield {**rule, "first": first - 1}
        else:
            yield {**_without(rule, "first"), "nth": 1}
    if not any(k in rule for k in ("nth", "first", "after", "sequence", "probability")) and "op" in rule:
        yield from ({**rule, "nth": n} for n in range(1, _NTH_TRIES + 1))
    if rule.get("landed", False) is None:
        yield {**rule, "landed": True}
        yield {**rule, "landed": False}
    yield from _time(rule)


def _time(rule: Spec) -> Iterator[Spec]:
    """Windows and durations: drop them where a count already says when; else shorten the window; a
    heal time or a delay becomes a round number (up, so it still outlasts what it must)."""
    start, end, heal = _num(rule.get("start_s")), _num(rule.get("end_s")), _num(rule.get("heal_after_s"))
    counted = any(k in rule for k in ("nth", "first")) and "op" in rule
    if counted and (start is not None or end is not None):
        yield _without(rule, "start_s", "end_s")
    if end is not None:
        low = start or 0.0
        if end - low > 1e-3:
            yield {**rule, "end_s": round(low + (end - low) / 2, 6)}
    if start is not None and end is not None and end - start > 1e-3:
        yield {**rule, "start_s": round(start + (end - start) / 2, 6)}
    if start is not None and start > 0 and _round_down(start) != start:
        yield {**rule, "start_s": _round_down(start)}
    if heal is not None and _round_up(heal) != heal:
        yield {**rule, "heal_after_s": _round_up(heal)}
    seconds = _num(rule.get("seconds"))
    if rule.get("action") == "delay" and seconds is not None and _round_up(seconds) != seconds:
        yield {**rule, "seconds": _round_up(seconds)}


def _round_up(value: float) -> float:
    """``value`` up to one significant digit (0.00093 -> 0.001, 1.37 -> 2.0)."""
    if value <= 0:
        return value
    step = 10.0 ** math.floor(math.log10(value))
    return float(round(math.ceil(value / step - 1e-9) * step, 12))


def _round_down(value: float) -> float:
    """``value`` down to two significant digits (0.05127 -> 0.051)."""
    if value <= 0:
        return 0.0
    step = 10.0 ** (math.floor(math.log10(value)) - 1)
    return float(round(math.floor(value / step + 1e-9) * step, 12))


def _int(value: object) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _num(value: object) -> Optional[float]:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
