"""``datadist-sim explore TARGET``: argument parsing, the run, the report, the exit code.

Exit codes: 0 no run failed (or ``--replay`` no longer fails), 1 a run failed (or the baseline did, or
the replayed scenario still fails under a reading replayed), 2 usage error (bad target, kinds, file, or
an engine that cannot run). The target runs in a process of its own (``worker``), so the command
returns within the wall bound whatever the target's threads do.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

from datadist_sim._progress import Progress
from datadist_sim.explore.executor import ENGINES, EngineError
from datadist_sim.explore.run import SIM_LIMIT_S, WALL_LIMIT_S, Limits, RunResult
from datadist_sim.explore.schedule import Schedule, parse_kinds
from datadist_sim.explore.search import READINGS, Options, explore, load
from datadist_sim.explore.worker import Job, Workers

PROG = "datadist-sim explore"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", help="package.module:function, called with the world (fake installed)")
    parser.add_argument("--runs", type=int, default=500, help="runs after the baseline (default 500)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the baseline and of every schedule")
    parser.add_argument(
        "--workers", type=int, help="local processes (default: all cores); with Ray: tasks in flight"
    )
    parser.add_argument("--engine", choices=ENGINES, default="local", help="local processes or Ray tasks")
    parser.add_argument("--address", help="Ray cluster address (default: a local Ray started for the run)")
    parser.add_argument("--faults", metavar="KINDS", help="comma-separated fault kinds (default: all)")
    parser.add_argument("--max-rules", type=int, default=3, help="most rules in one random run (default 3)")
    parser.add_argument(
        "--out", type=Path, default=Path("datadist-explore"), help="where the shrunk scenario file goes"
    )
    parser.add_argument("--replay", type=Path, metavar="FILE", help="run the target once under FILE's rules")
    parser.add_argument(
        "--reading",
        choices=(*READINGS, "both"),
        help="with --replay: what a timed-out transfer leaves of its link: 'table' breaks it (the status "
        "table), 'code' keeps it (hixl comm_entity.cc:536-556), 'both' replays under each (default: the "
        "file's [config], else 'table')",
    )
    parser.add_argument("--json", action="store_true", help="machine-readable report")
    parser.add_argument(
        "--trace",
        metavar="FILE",
        help="JSON-lines trace of the run reported: the replay, else the shrunk failure, else the baseline "
        "({pid} expands to the process id)",
    )
    parser.add_argument(
        "--systematic",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="first each fault at each call of the baseline, then pairs (default: on)",
    )
    parser.add_argument("--sim-limit", type=float, default=SIM_LIMIT_S, help="simulated seconds = a hang")
    parser.add_argument("--wall-limit", type=float, default=WALL_LIMIT_S, help="wall seconds = a hang")


def _usage(message: str) -> int:
    print(f"{PROG}: {message}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    if args.runs < 0 or args.max_rules < 1 or (args.workers is not None and args.workers < 1):
        return _usage("--runs must be >= 0, --max-rules and --workers >= 1")
    if args.reading is not None and args.replay is None:
        return _usage("--reading goes with --replay")
    try:
        kinds = parse_kinds(args.faults)
        target = load(args.target)  # the fake installed first: the module may `import llm_datadist`
    except ValueError as exc:
        return _usage(str(exc))
    if not callable(target):
        return _usage(f"target {args.target!r} is not callable")
    limits = Limits(sim_limit_s=args.sim_limit, wall_limit_s=args.wall_limit)
    if args.replay is not None:
        return _replay(args, target, limits)
    options = Options(
        runs=args.runs,
        seed=args.seed,
        workers=args.workers,
        engine=args.engine,
        address=args.address,
        kinds=kinds,
        max_rules=args.max_rules,
        systematic=args.systematic,
        limits=limits,
    )
    try:
        with Progress(args.runs, "explore") as bar:
            outcome = explore(args.target, options, progress=lambda done, total: bar.update(done))
    except EngineError as exc:
        return _usage(str(exc))
    from datadist_sim.explore import report

    paths: List[Optional[Path]] = [
        None if found.shrunk is None else report.write_scenario(args.out, args.target, found.shrunk)
        for found in outcome.found
    ]
    if args.trace:
        # Runs are deterministic from their seed and rules, so one more run of the reported schedule
        # writes exactly the trace that run had (workers may be other processes, or other machines).
        shown = outcome.shrunk if outcome.shrunk is not None else outcome.baseline
        _traced_run(args.trace, target, shown.seed, shown.schedule, limits, {})
    if args.json:
        print(json.dumps(report.as_json(outcome, args.target, paths), indent=2))
    else:
        print(report.render(outcome, args.target, paths))
    return 1 if outcome.baseline.failed or outcome.failures else 0


def _replay(args: argparse.Namespace, target: Any, limits: Limits) -> int:
    """The target under the file's rules and seed, once per reading asked for: 1 while it still fails
    under any, 0 once the client is fixed."""
    from datadist_sim import scenarios
    from datadist_sim.explore import report

    try:
        scenario = scenarios.load(args.replay)
    except (ValueError, OSError) as exc:
        return _usage(f"--replay {args.replay}: {exc}")
    seed = scenario.seed if scenario.seed is not None else args.seed
    schedule = [dict(s) for s in scenario.rule_specs]
    if args.reading is None:
        readings: Dict[str, Dict[str, Any]] = {"file": dict(scenario.config)}
    elif args.reading == "both":
        readings = {name: {**scenario.config, **READINGS[name]} for name in READINGS}
    else:
        readings = {args.reading: {**scenario.config, **READINGS[args.reading]}}
    results: Dict[str, RunResult] = {}
    with Workers(target, limits) as workers:
        for name, overrides in readings.items():
            if args.trace and len(results) == 0:
                results[name] = _traced_run(args.trace, target, seed, schedule, limits, overrides, workers)
            else:
                results[name] = workers.one(Job(0, seed, schedule, overrides))
    failed = any(r.failed for r in results.values())
    if args.json:
        out: Dict[str, Any] = {"scenario": str(args.replay), "seed": seed, "failed": failed, "readings": {}}
        for name, result in results.items():
            out["readings"][name] = {
                "failed": result.failed,
                "signature": result.signature,
                "where": result.where,
                "failure": result.failure,
                "trace": result.trace_tail,
            }
        print(json.dumps(out, indent=2))
    else:
        for name, result in results.items():
            under = "" if name == "file" else f" under the {name} reading"
            if result.failed:
                print("\n".join(report.failure_text(result, f"{args.replay} still fails{under}")))
            else:
                rules = len(scenario.rule_specs)
                print(f"{args.replay}: the target passes{under} under its {rules} rule(s) (seed {seed})")
    return 1 if failed else 0


def _traced_run(
    template: str,
    target: Any,
    seed: int,
    schedule: Schedule,
    limits: Limits,
    overrides: Dict[str, Any],
    workers: Optional[Workers] = None,
) -> RunResult:
    """One run of ``schedule`` with its whole trace streamed to ``--trace``'s file (``{pid}``: this
    command's process id, though a worker process writes it)."""
    from datadist_sim._outputs import open_output
    from datadist_sim._world.surface import expand_trace_path

    path = expand_trace_path(template)
    open_output(path).close()  # truncated here, in the driver, so a symlink at the name fails the command
    job = Job(0, seed, schedule, overrides, trace_path=path)
    if workers is not None:
        return workers.one(job)
    with Workers(target, limits) as own:
        return own.one(job)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__)
    add_arguments(parser)
    return run(parser.parse_args(argv))
