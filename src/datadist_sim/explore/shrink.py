"""Shrink a failing schedule to the fewest, simplest rules that still fail the same way.

Greedy and deterministic, like a property tester's shrinker: first drop whole rules, then simplify each
rule one step at a time (fewer firings, a ``probability`` replaced by the ``nth`` call it fired on, a
shorter window or heal time, a later start, an indeterminate ``landed`` replaced by its outcome), keeping
a step only when the re-run (same world seed) fails with the same signature at the same place in the target (``RunResult.group``). It stops when no single step
keeps the failure, or when the run budget is spent.
"""

from __future__ import annotations

from typing import Callable, Iterator, Optional, Tuple

from datadist_sim.explore.run import RunResult
from datadist_sim.explore.schedule import Schedule, Spec

Check = Callable[[Schedule], RunResult]
MAX_SHRINK_RUNS = 400
_NTH_TRIES = 8


def shrink(failing: RunResult, check: Check, *, budget: int = MAX_SHRINK_RUNS) -> Tuple[RunResult, int]:
    """The smallest failing run found from ``failing`` (same seed, signature and place), and the runs it took."""
    best = failing
    runs = 0
    progress = True
    while progress and runs < budget:
        progress = False
        for candidate in _candidates(best.schedule):
            if runs >= budget:
                break
            runs += 1
            result = check(candidate)
            if result.failed and result.group == failing.group:
                best, progress = result, True
                break
    return best, runs


def _candidates(schedule: Schedule) -> Iterator[Schedule]:
    if len(schedule) > 1:
        for i in range(len(schedule)):
            yield schedule[:i] + schedule[i + 1 :]
    for i, rule in enumerate(schedule):
        for simpler in simplify(rule):
            yield [*schedule[:i], simpler, *schedule[i + 1 :]]


def _without(rule: Spec, *keys: str) -> Spec:
    return {k: v for k, v in rule.items() if k not in keys}


def simplify(rule: Spec) -> Iterator[Spec]:
    """One-step simplifications of a rule, the most simplifying first."""
    first = _int(rule.get("first"))
    after = _int(rule.get("after"))
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
    """Windows and heal times: drop them where a count already says when; else shorten, start later."""
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
    if heal is not None and heal > 1e-3:
        yield {**rule, "heal_after_s": round(heal / 2, 6)}
    seconds = _num(rule.get("seconds"))
    if rule.get("action") == "delay" and seconds is not None and seconds > 1e-3:
        yield {**rule, "seconds": round(seconds / 2, 6)}


def _int(value: object) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _num(value: object) -> Optional[float]:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
