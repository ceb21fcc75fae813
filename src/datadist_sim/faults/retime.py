"""Bundled scenarios, re-timed for the benchmark's longer run, and the fault windows a run saw.

The bundled scenarios are written for a short reference workload (faults within the first seconds). The
benchmark runs longer (about 50 simulated seconds by default), so a scenario's schedule is shifted to
begin at ``start_s`` and stretched to last ``window_s`` (its rules keep their relative timing); a
probabilistic rule with no window of its own (a flaky link) holds for ``window_s``. ``rate`` scales
every probability, as ``FaultPlan.load(..., rate=)`` does.

It lives with the rules because it reads and rewrites their timing fields and nothing else; the
benchmark (``datadist_sim.bench``) only installs what it returns.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List, Optional, Tuple

from datadist_sim.faults.files import load
from datadist_sim.faults.rules import Fault

Window = Tuple[float, float]


@dataclass(frozen=True)
class Timing:
    start_s: float = 10.0
    window_s: float = 20.0


def _counted(rule: Fault) -> bool:
    return rule.nth is not None or rule.first is not None or rule.after is not None or bool(rule.sequence)


def _end(rule: Fault) -> Optional[float]:
    if rule.end_s is not None:
        return float(rule.end_s)
    if rule.heal_after_s is not None and rule.start_s is not None and not _counted(rule):
        return float(rule.start_s + rule.heal_after_s)
    return None


def bench_rules(name: str, rate: float, timing: Timing) -> List[Fault]:
    """The scenario's rules at ``rate``, moved into the benchmark's fault window."""
    rules = load(name).rules(rate)
    starts = [r.start_s for r in rules if r.start_s is not None]
    origin = min(starts) if starts else 0.0
    spans = [end - origin for end in (_end(r) for r in rules) if end is not None]
    stretch = timing.window_s / max(spans) if spans and max(spans) > 0 else 1.0
    out = []
    for rule in rules:
        offset = 0.0 if rule.start_s is None else (rule.start_s - origin) * stretch
        start = timing.start_s + offset
        end: Optional[float] = None
        if rule.end_s is not None:
            end = timing.start_s + (rule.end_s - origin) * stretch
        elif rule.heal_after_s is None and not _counted(rule) and rule.action != "kill":
            end = start + timing.window_s
        heal = None if rule.heal_after_s is None else rule.heal_after_s * stretch
        out.append(rule.copy(start_s=start, end_s=end, heal_after_s=heal))
    return out


def permanent(rules: List[Fault]) -> bool:
    """A rule that never heals (a killed cluster stays dead)."""
    return any(r.action == "kill" for r in rules)


def windows(rules: List[Fault], fired: List[float], run_end: float) -> List[Window]:
    """Where faults held: each rule's own window, or from the first to the last time one fired."""
    out: List[Window] = []
    for rule in rules:
        start = 0.0 if rule.start_s is None else rule.start_s  # ``bench_rules`` gives each rule a start
        if rule.action == "kill":
            out.append((min(fired) if fired else start, run_end))
        elif rule.end_s is not None:
            out.append((start, rule.end_s))
        elif rule.heal_after_s is not None and not _counted(rule):
            out.append((start, start + rule.heal_after_s))
    if fired and not out:
        out.append((min(fired), max(fired)))
    return [(a, b if math.isfinite(b) else run_end) for a, b in out]
