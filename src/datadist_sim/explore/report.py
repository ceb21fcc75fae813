"""What explore prints and writes: the summary, the shrunk failure, and the scenario file.

The scenario file is the ordinary format (``datadist_sim.scenarios``) plus a top-level ``seed``: the
world's seed of the failing run, which ``--replay`` and ``@pytest.mark.datadist_scenario`` use when
they build the world.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any, Dict, List, Optional

from datadist_sim._outputs import write_output
from datadist_sim.explore.run import RunResult
from datadist_sim.explore.schedule import Schedule
from datadist_sim.explore.search import Outcome
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


def scenario_toml(name: str, seed: int, schedule: Schedule, description: str) -> str:
    """A scenario file: ``name``, ``description``, ``seed`` and one ``[[rules]]`` table per rule."""
    lines = [f"name = {_value(name)}", f"description = {_value(description)}", f"seed = {seed}"]
    for rule in schedule:
        lines += ["", "[[rules]]"]
        keys = [k for k in _KEY_ORDER if k in rule] + sorted(k for k in rule if k not in _KEY_ORDER)
        lines += [f"{key} = {_value(rule[key])}" for key in keys if rule[key] is not None]
    return "\n".join(lines) + "\n"


def function_name(target: str) -> str:
    return target.rpartition(":")[2].rpartition(".")[2] or "target"


def write_scenario(out: Path, target: str, result: RunResult) -> Path:
    """Write ``out/<function>-<seed>.toml`` for a failing run; returns the path."""
    name = f"{function_name(target)}-{result.seed}"
    first_line = result.failure.strip().splitlines()[-1] if result.failure.strip() else result.signature
    description = f"Found by datadist-sim explore {target}: {first_line}"
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.toml"
    write_output(path, scenario_toml(name, result.seed, result.schedule, description))  # no symlink followed
    return path


def replay_command(target: str, path: Path) -> str:
    return f"datadist-sim explore {shlex.quote(target)} --replay {shlex.quote(str(path))}"


def rule_lines(schedule: Schedule) -> List[str]:
    return [repr(rule_from_spec(spec)) for spec in schedule]


def failure_text(result: RunResult, title: str) -> List[str]:
    lines = [f"{title} (run {result.index}, world seed {result.seed}): {result.signature}"]
    lines += [f"  {line}" for line in result.failure.splitlines()]
    lines.append(f"last {len(result.trace_tail)} trace events:")
    lines += [f"  {line}" for line in result.trace_tail]
    return lines


def _counts(counts: Dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items()) or "(none)"


def render(outcome: Outcome, target: str, path: Optional[Path]) -> str:
    """The human summary: runs, runs/s, faults fired per kind, codes seen, failures, and the shrunk one."""
    if outcome.baseline.failed:
        return "\n".join(failure_text(outcome.baseline, "the fault-free baseline run fails"))
    failures = outcome.failures
    lines = [
        f"explore {target}: {len(outcome.results)} runs in {outcome.wall_s:.1f} s "
        f"({outcome.runs_per_s:.0f} runs/s); baseline {outcome.baseline_calls} calls, "
        f"{outcome.baseline.sim_time:.3f} simulated s",
        f"faults fired: {_counts(outcome.fired())}",
        f"codes the client saw: {_counts(outcome.codes())}",
        f"failures: {len(failures)}" + (f" (first: run {failures[0].index})" if failures else ""),
    ]
    shrunk = outcome.shrunk
    if shrunk is None:
        return "\n".join(lines)
    first = failures[0]
    lines += [
        "",
        f"shrunk from {len(first.schedule)} to {len(shrunk.schedule)} rule(s) in {outcome.shrink_runs} runs:",
        *(f"  {line}" for line in rule_lines(shrunk.schedule)),
        "",
        *failure_text(shrunk, "failure"),
    ]
    if path is not None:
        lines += ["", f"scenario written to {path}", f"replay: {replay_command(target, path)}"]
    return "\n".join(lines)


def as_json(outcome: Outcome, target: str, path: Optional[Path]) -> Dict[str, Any]:
    shrunk = outcome.shrunk
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
        "codes": outcome.codes(),
        "failures": len(outcome.failures),
        "failing_runs": [r.index for r in outcome.failures],
        "first_failure": None if not outcome.failures else outcome.failures[0].index,
        "shrunk": None
        if shrunk is None
        else {
            "seed": shrunk.seed,
            "rules": shrunk.schedule,
            "signature": shrunk.signature,
            "failure": shrunk.failure,
            "trace_tail": shrunk.trace_tail,
            "shrink_runs": outcome.shrink_runs,
        },
        "scenario": None if path is None else str(path),
        "replay": None if path is None else replay_command(target, path),
    }
