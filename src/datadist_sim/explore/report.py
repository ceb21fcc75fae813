"""What explore prints and writes: the summary, the shrunk failure, and the scenario file.

The scenario file is the ordinary format (``datadist_sim.scenarios``) plus a top-level ``seed``: the
world's seed of the failing run, which ``--replay`` and ``@pytest.mark.datadist_scenario`` use when
they build the world.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from datadist_sim._outputs import write_output
from datadist_sim.explore.run import RunResult
from datadist_sim.explore.schedule import Schedule
from datadist_sim.explore.search import READING_NAMES, READINGS, Found, Outcome
from datadist_sim.faults.files import rule_from_spec

_KEY_ORDER = ("action", "code", "seconds", "landed", "side", "nbytes", "op", "cluster", "remote", "req_id")


def _value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    return json.dumps(str(value))


def scenario_toml(
    name: str, seed: int, schedule: Schedule, description: str, config: Optional[Dict[str, Any]] = None
) -> str:
    """A scenario file: ``name``, ``description``, ``seed``, the ``[config]`` its world needs, and one
    ``[[rules]]`` table per rule."""
    lines = [f"name = {_value(name)}", f"description = {_value(description)}", f"seed = {seed}"]
    if config:
        lines += ["", "[config]", *(f"{key} = {_value(value)}" for key, value in sorted(config.items()))]
    for rule in schedule:
        lines += ["", "[[rules]]"]
        keys = [k for k in _KEY_ORDER if k in rule] + sorted(k for k in rule if k not in _KEY_ORDER)
        lines += [f"{key} = {_value(rule[key])}" for key in keys if rule[key] is not None]
    return "\n".join(lines) + "\n"


def function_name(target: str) -> str:
    return target.rpartition(":")[2].rpartition(".")[2] or "target"


def needs(result: RunResult) -> Optional[str]:
    """The one reading under which ``result`` fails, or None (both, or not replayed under each)."""
    failing = [name for name, failed in result.readings.items() if failed]
    return failing[0] if len(failing) == 1 else None


def write_scenario(out: Path, target: str, result: RunResult) -> Path:
    """Write ``out/<function>-<seed>.toml`` for a failing run (with the ``[config]`` of the one reading
    it needs, if it needs one); returns the path."""
    name = f"{function_name(target)}-{result.seed}"
    first_line = result.failure.strip().splitlines()[0] if result.failure.strip() else result.signature
    if result.signature != "hang" and result.failure.strip():
        first_line = result.failure.strip().splitlines()[-1]
    description = f"Found by datadist-sim explore {target}: {result.group}: {first_line}"
    reading = needs(result)
    config = READINGS[reading] if reading is not None else None
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.toml"
    text = scenario_toml(name, result.seed, result.schedule, description, config)
    write_output(path, text)  # no symlink followed
    return path


def readings_line(result: RunResult) -> str:
    """Which readings of a timed-out link the failure needs, in words ('' before it was replayed)."""
    if not result.readings:
        return ""
    failing = [name for name, failed in result.readings.items() if failed]
    if len(failing) == len(result.readings):
        return "fails under both readings of a timed-out link: a bug on any engine"
    if not failing:
        return "passes under both readings when replayed alone (an interaction with other runs?)"
    passing = [name for name in result.readings if name not in failing]
    return (
        f"fails only under {READING_NAMES[failing[0]]}; passes under {READING_NAMES[passing[0]]}: "
        "it depends on the contested rule"
    )


def replay_command(target: str, path: Path) -> str:
    return f"datadist-sim explore {shlex.quote(target)} --replay {shlex.quote(str(path))}"


def rule_lines(schedule: Schedule) -> List[str]:
    return [repr(rule_from_spec(spec)) for spec in schedule]


def failure_text(result: RunResult, title: str) -> List[str]:
    lines = [f"{title} (run {result.index}, world seed {result.seed}): {result.group}"]
    lines += [f"  {line}" for line in result.failure.splitlines()]
    if result.readings:
        lines.append(readings_line(result))
    if result.masked:
        lines.append(
            f"rules masked (matched, but another rule on the same call won): {_counts(result.masked)}"
        )
    if result.trace_tail:
        around = "around the first fault that fired" if result.fired else "the last"
        lines.append(f"{len(result.trace_tail)} trace events, {around}:")
        lines += [f"  {line}" for line in result.trace_tail]
    return lines


def _counts(counts: Dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items()) or "(none)"


def render(outcome: Outcome, target: str, paths: Sequence[Optional[Path]]) -> str:
    """The human summary: runs, runs/s, faults fired (and masked) per kind, codes seen, and each
    distinct failure with its count, its shrunk rules, the readings it fails under, its trace excerpt
    and the command that replays it."""
    if outcome.baseline.failed:
        return "\n".join(failure_text(outcome.baseline, "the fault-free baseline run fails"))
    failures = outcome.failures
    lines = [
        f"explore {target}: {len(outcome.results)} runs in {outcome.wall_s:.1f} s "
        f"({outcome.runs_per_s:.0f} runs/s); baseline {outcome.baseline_calls} calls, "
        f"{outcome.baseline.sim_time:.3f} simulated s",
        f"faults fired: {_counts(outcome.fired())}",
        f"faults masked (matched a call another rule on it overrode): {_counts(outcome.masked())}",
        f"codes the client saw: {_counts(outcome.codes())}",
        f"failures: {len(failures)} in {len(outcome.found)} distinct place(s)"
        + (f" (first: run {failures[0].index})" if failures else ""),
    ]
    for number, (found, path) in enumerate(zip(outcome.found, paths), 1):
        lines += ["", *_found_lines(number, found, target, path)]
    return "\n".join(lines)


def _found_lines(number: int, found: Found, target: str, path: Optional[Path]) -> List[str]:
    head = f"[{number}] {found.group}: {found.count} run(s), first run {found.first.index}"
    shrunk = found.shrunk
    if shrunk is None:
        return [
            head + " (not shrunk: too many distinct failures)",
            *(f"  {r}" for r in rule_lines(found.first.schedule)),
        ]
    lines = [
        head,
        f"shrunk from {len(found.first.schedule)} to {len(shrunk.schedule)} rule(s) "
        f"in {found.shrink_runs} runs:",
        *(f"  {line}" for line in rule_lines(shrunk.schedule)),
        *failure_text(shrunk, "failure"),
    ]
    if path is not None:
        lines += [f"scenario written to {path}", f"replay: {replay_command(target, path)}"]
    return lines


def _found_json(found: Found, target: str, path: Optional[Path]) -> Dict[str, Any]:
    shrunk = found.shrunk
    return {
        "group": found.group,
        "count": found.count,
        "first_run": found.first.index,
        "shrunk": None
        if shrunk is None
        else {
            "seed": shrunk.seed,
            "rules": shrunk.schedule,
            "signature": shrunk.signature,
            "where": shrunk.where,
            "failure": shrunk.failure,
            "readings": shrunk.readings,
            "trace": shrunk.trace_tail,
            "masked": shrunk.masked,
            "shrink_runs": found.shrink_runs,
        },
        "scenario": None if path is None else str(path),
        "replay": None if path is None else replay_command(target, path),
    }


def as_json(outcome: Outcome, target: str, paths: Sequence[Optional[Path]]) -> Dict[str, Any]:
    distinct = [_found_json(f, target, p) for f, p in zip(outcome.found, paths)]
    return {
        "target": target,
        "baseline": {
            "failed": outcome.baseline.failed,
            "failure": outcome.baseline.failure,
            "calls": outcome.baseline_calls,
            "sim_time": outcome.baseline.sim_time,
        },
        "runs": len(outcome.results),
        "wall_s": round(outcome.wall_s, 3),
        "runs_per_s": round(outcome.runs_per_s, 1),
        "faults_fired": outcome.fired(),
        "faults_masked": outcome.masked(),
        "codes": outcome.codes(),
        "failures": len(outcome.failures),
        "failing_runs": [r.index for r in outcome.failures],
        "first_failure": None if not outcome.failures else outcome.failures[0].index,
        "distinct": distinct,
        "shrunk": distinct[0]["shrunk"] if distinct else None,
        "scenario": distinct[0]["scenario"] if distinct else None,
    }
