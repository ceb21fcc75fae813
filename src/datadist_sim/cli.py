"""``datadist-sim``: the command line. ``codes`` prints the status-code table; ``demo`` runs the main job;
``run`` runs a fault scenario; ``exec`` runs a program with the fake installed; ``explore`` searches the
fault schedules that break a client; ``bench`` benchmarks."""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence

from datadist_sim._outputs import UnsafeOutput
from datadist_sim._status_table import STATUS_TABLE, StatusInfo, find_codes

if TYPE_CHECKING:
    from datadist_sim._coverage import CodeCoverage
    from datadist_sim.faults.files import Scenario


def _select(name_filter: Optional[str], retryable: Optional[str]) -> List[StatusInfo]:
    rows = find_codes(name_filter) if name_filter else list(STATUS_TABLE.values())
    if retryable:
        rows = [r for r in rows if r.retryable == retryable]
    return rows


def _table(rows: Sequence[Sequence[str]], headers: Sequence[str]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths))
    body = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    return "\n".join([line.rstrip(), "  ".join("-" * w for w in widths), *body])


def _hex(value: int) -> str:
    return f"0x{value:X}" if value >= 0 else "-"


def cmd_codes(args: argparse.Namespace) -> int:
    rows = _select(args.filter, args.retryable)
    if args.json:
        print(
            json.dumps(
                [
                    {
                        "name": r.name,
                        "value": r.value,
                        "description": r.description,
                        "retryable": r.retryable,
                        "remedy": r.remedy,
                        "source": r.origin,
                    }
                    for r in rows
                ],
                indent=2,
            )
        )
    else:
        cells = [[r.name, str(r.value), _hex(r.value), r.retryable, r.origin, r.description] for r in rows]
        print(_table(cells, ["code", "integer", "hex", "retryable", "source", "meaning"]))
        if args.remedy:
            for r in rows:
                print(f"\n{r.name}: {r.remedy}")
    return 0 if rows else 1


def cmd_demo(args: argparse.Namespace) -> int:
    from datadist_sim._demo import run_demo

    return run_demo(seed=args.seed, as_json=args.json)


def cmd_run(args: argparse.Namespace) -> int:
    """Run a scenario on the reference workload (or ``--client``); 1 when a code it promises did not
    appear or requests were lost, and says which."""
    from datadist_sim import scenarios
    from datadist_sim._world.surface import expand_trace_path
    from datadist_sim.scenarios.runner import run, self_check

    if args.list or not args.scenario:
        for name in scenarios.names():
            print(f"{name:<24} {scenarios.load(name).description}")
        return 0
    try:
        scenario = scenarios.load(args.scenario)
    except (ValueError, FileNotFoundError) as exc:
        print(f"datadist-sim run: {exc}", file=sys.stderr)
        return 2
    if args.seed is None:  # a file explore wrote carries the failing run's seed
        args.seed = scenario.seed if scenario.seed is not None else 0
    if args.client:
        return _run_client(args, scenario)
    report = run(scenario, seed=args.seed, rate=args.rate, trace_path=args.trace)
    missing = [code for code in scenario.expect if code not in report.codes()]
    same = self_check(scenario, args.seed) if args.self_check else None
    failures = _run_failures(scenario, report.lost, report.requests, missing, same)
    if args.json:
        out = report.as_dict()
        out["expected"] = list(scenario.expect)
        out["missing"] = missing
        out["failures"] = failures
        if same is not None:
            out["deterministic"] = same
        print(json.dumps(out, indent=2))
    else:
        print(report.render())
        print(f"\nexpected codes: {', '.join(scenario.expect) or '(none)'}", end="")
        print(f"; missing: {', '.join(missing)}" if missing else "; all seen")
        if same is not None:
            print(f"self-check (same seed twice, traces compared): {'identical' if same else 'DIFFERENT'}")
        if args.trace:
            print(f"trace written to {expand_trace_path(args.trace)}")
        print(f"result: FAILED: {'; '.join(failures)}" if failures else "result: passed")
    return 1 if failures else 0


def _run_client(args: argparse.Namespace, scenario: Scenario) -> int:
    """``run SCENARIO --client package.module:function``: the user's client instead of the reference
    workload; 1 when the function raises, when no fault fired and a promised code never reached the
    client, or when a self-check's traces differ; 2 when it cannot be loaded."""
    from datadist_sim._target import load_target
    from datadist_sim._world.surface import expand_trace_path
    from datadist_sim.scenarios.client_run import fake_installed, run_client

    with fake_installed():  # the user's module may `import llm_datadist` at its top
        try:
            function = load_target(args.client, what="--client")
        except ValueError as exc:
            print(f"datadist-sim run: {exc}", file=sys.stderr)
            return 2
        options = {"name": args.client, "seed": args.seed, "rate": args.rate}
        report = run_client(function, scenario, trace_path=args.trace, keep_trace=args.self_check, **options)
        same = None
        if args.self_check:
            same = run_client(function, scenario, keep_trace=True, **options).trace_text == report.trace_text
    # Promised codes the client never met are told, not failed on, once a fault fired (the client may
    # have met it through another call); a run where nothing fired and they never came tested nothing.
    unseen = [code for code in scenario.expect if code not in report.codes()]
    untested = bool(unseen) and report.faults_fired == 0
    if args.json:
        out = report.as_dict()
        out["expected"], out["missing"], out["untested"] = list(scenario.expect), unseen, untested
        if same is not None:
            out["deterministic"] = same
        print(json.dumps(out, indent=2))
    else:
        print(report.render())
        if unseen:
            print(f"codes the scenario promises that your client never met: {', '.join(unseen)}")
        if untested:
            print("result: FAILED: no fault fired and the promised codes never reached the client")
        if same is not None:
            print(f"self-check (same seed twice, traces compared): {'identical' if same else 'DIFFERENT'}")
        if args.trace:
            print(f"trace written to {expand_trace_path(args.trace)}")
    return 0 if report.passed and same is not False and not untested else 1


def _run_failures(
    scenario: Scenario, lost: int, requests: int, missing: List[str], same: Optional[bool]
) -> List[str]:
    """Why ``run`` exits 1, each reason said: promised codes missing, requests lost (unless the
    scenario's faults destroy data: ``may_lose``), a self-check whose traces differ."""
    failures = []
    if missing:
        failures.append(f"promised code(s) not seen: {', '.join(missing)}")
    if lost and not scenario.may_lose:
        failures.append(f"{lost} of {requests} requests lost")
    if same is False:
        failures.append("the same seed gave a different trace")
    return failures


def _exec_fabric_env(args: argparse.Namespace) -> Dict[str, str]:
    """Environment variables that put every process the program starts into one fabric (``--fabric``):
    ``DATADIST_SIM_FABRIC``. Empty without ``--fabric``: each Python process gets its own world."""
    if args.fabric is None:
        return {}
    from datadist_sim.fabric.host.service import exec_address

    return {"DATADIST_SIM_FABRIC": exec_address(args.fabric, seed=args.seed, trace=args.trace)}


def cmd_fabric(args: argparse.Namespace) -> int:
    """Serve one simulated world to every process that joins it (cross-process mode)."""
    from datadist_sim.fabric.host.service import run

    return run(args)


def cmd_exec(args: argparse.Namespace) -> int:
    """Run an unmodified program with the fake installed; the program's own exit code."""
    import logging

    from datadist_sim._exec import run_program

    program = args.program[1:] if args.program[:1] == ["--"] else args.program
    if not program:
        print("datadist-sim exec: name a program to run: datadist-sim exec -- PROGRAM ARGS", file=sys.stderr)
        return 2
    try:
        extra_env = _exec_fabric_env(args)
    except (RuntimeError, ValueError, OSError) as exc:
        print(f"datadist-sim exec: --fabric: {exc}", file=sys.stderr)
        return 2
    owned = None
    if args.fabric is not None:
        from datadist_sim.fabric.host.service import owns_world

        owned = extra_env["DATADIST_SIM_FABRIC"] if owns_world(args.fabric) else None
    coverage = _exec_coverage(args)
    try:
        code = run_program(
            program,
            seed=args.seed,
            force=args.force,
            log_level=logging.DEBUG if args.verbose else None,
            trace=None if args.fabric is not None else args.trace,  # a fabric writes the one merged trace
            extra_env=extra_env,
            coverage=coverage,
        )
    finally:
        if owned is not None:  # this job's own world ends with it: fabric, files, memory
            from datadist_sim.fabric.host.service import end_world

            end_world(owned)
    if coverage is None:
        return code
    print(
        f"\ndatadist-sim exec: error-path coverage\n{coverage.report(args.coverage_fail_under)}",
        file=sys.stderr,
    )
    if code == 0 and args.coverage_fail_under is not None and not coverage.meets(args.coverage_fail_under):
        return 1
    return code


def _exec_coverage(args: argparse.Namespace) -> Optional[CodeCoverage]:
    """The counts ``exec --coverage`` gathers from every process of the program (None without it)."""
    if not args.coverage and args.coverage_fail_under is None:
        return None
    from datadist_sim._coverage import CodeCoverage

    return CodeCoverage()


def cmd_bench(args: argparse.Namespace) -> int:
    """Hand over to the benchmarks (``datadist_sim.bench.main``); 2 when they are not installed."""
    try:
        from datadist_sim.bench import main as bench_main
    except ImportError as exc:
        print(f"datadist-sim bench: benchmarks not available ({exc})", file=sys.stderr)
        return 2
    return int(bench_main(list(args.args)))


def cmd_explore(args: argparse.Namespace) -> int:
    """Search fault schedules that break the target, shrink the first failure, write it as a scenario."""
    from datadist_sim.explore._main import run

    return run(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="datadist-sim", description=__doc__)
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="log world events (DEBUG, datadist_sim logger) to stderr"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    codes = sub.add_parser("codes", help="the LLMStatusCode table: integer, retryable, meaning, remedy")
    codes.add_argument(
        "filter",
        nargs="?",
        help="a code as logs print it: its integer (1343270938, 507057), hex (0x5010B01A), or part of its "
        "name (TIMEOUT)",
    )
    codes.add_argument("--retryable", choices=["yes", "no", "n.a."])
    codes.add_argument("--remedy", action="store_true", help="also print each code's documented remedy")
    codes.add_argument("--json", action="store_true", help="machine-readable output")
    codes.set_defaults(func=cmd_codes)
    demo = sub.add_parser("demo", help="Prompt + Decode clusters, a link, pulls, a fault, a summary")
    demo.add_argument("--seed", type=int, default=0, help="the world's seed (default 0)")
    demo.add_argument("--json", action="store_true", help="machine-readable summary")
    demo.set_defaults(func=cmd_demo)
    run = sub.add_parser("run", help="run a fault scenario against the reference Prompt/Decode workload")
    run.add_argument("scenario", nargs="?", help="a bundled scenario name (see --list) or a TOML file")
    run.add_argument("--list", action="store_true", help="list the bundled scenarios")
    run.add_argument("--seed", type=int, help="the world's seed (default: the scenario file's seed, else 0)")
    run.add_argument("--rate", type=float, default=1.0, help="scale every rule probability below 1")
    run.add_argument("--trace", metavar="PATH", help="write the trace as JSON lines")
    run.add_argument(
        "--client",
        metavar="MODULE:FUNCTION",
        help="drive your own client instead of the reference workload: FUNCTION(world) runs with the fake "
        "as llm_datadist and the scenario's rules loaded, and raises when a property is violated (exit 1)",
    )
    run.add_argument("--self-check", action="store_true", help="rerun with the seed and compare traces")
    run.add_argument("--json", action="store_true", help="machine-readable report")
    run.set_defaults(func=cmd_run)
    exe = sub.add_parser(
        "exec",
        help="run an unmodified program with the fake installed as llm_datadist",
        usage="datadist-sim exec [--seed N] [--trace PATH] [--force] [--fabric[=shared|ADDRESS]] "
        "[--coverage] [--coverage-fail-under N] "
        "-- PROGRAM [ARGS ...]",
    )
    exe.add_argument("--seed", type=int, help="seed of each Python process's default world")
    exe.add_argument(
        "--trace", metavar="PATH", help="write each process's trace as JSON lines ({pid} expands)"
    )
    exe.add_argument("--force", action="store_true", help="shadow a real llm_datadist if one is importable")
    exe.add_argument(
        "--coverage",
        action="store_true",
        help="at the end, print which status codes the program's client code received, from which "
        "operations, and the documented conditions never exercised (stderr)",
    )
    exe.add_argument(
        "--coverage-fail-under",
        type=int,
        metavar="N",
        help="exit 1 when the program succeeded but fewer than N distinct codes other than LLM_SUCCESS "
        "reached its client code (implies --coverage)",
    )
    exe.add_argument(
        "--fabric",
        nargs="?",
        const="auto",
        metavar="ADDRESS",
        help="cross-process mode: every process the program starts joins one world (DATADIST_SIM_FABRIC). "
        "Plain --fabric: the one already set, else a world of this job's own, ended with it; "
        "--fabric=shared: this user's standing world; or an address",
    )
    exe.add_argument("program", nargs=argparse.REMAINDER, help="the program and its arguments, after --")
    exe.set_defaults(func=cmd_exec)
    fabric = sub.add_parser(
        "fabric", help="serve one simulated world to several processes (cross-process mode)"
    )
    from datadist_sim.fabric.host.service import add_arguments as add_fabric_arguments

    add_fabric_arguments(fabric)
    fabric.set_defaults(func=cmd_fabric)
    explore = sub.add_parser(
        "explore", help="find the fault schedule that breaks a client, shrink it, write a scenario file"
    )
    from datadist_sim.explore._main import add_arguments as add_explore_arguments

    add_explore_arguments(explore)
    explore.set_defaults(func=cmd_explore)
    bench = sub.add_parser(  # prefix "+": every argument, --help too, goes to the benchmarks
        "bench", help="the retry-policy and performance benchmarks", add_help=False, prefix_chars="+"
    )
    bench.add_argument("args", nargs=argparse.REMAINDER, help="passed to the benchmarks (try: bench --help)")
    bench.set_defaults(func=cmd_bench)
    return parser


EXIT_BROKEN_PIPE = 128 + 13
"""The reader of our output went away (``datadist-sim codes | head``): 128 + SIGPIPE, as a shell reports."""


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Exit codes: 0 success; 1 nothing matched, the demo's checks failed, a scenario's promised code
    did not appear or its workload lost requests, or ``run --client``'s function raised; 2 usage error, an
    output named by a symlink (refused), or the benchmarks are not installed; 3 a real llm_datadist
    would be shadowed (``exec`` without ``--force``); 141 the output pipe was closed early (quietly, no
    traceback). ``exec`` otherwise exits with the program's own code (126/127 when it cannot be run,
    128 + N when signal N killed it; 1 when it succeeded but ``--coverage-fail-under`` was not met)."""
    try:
        code = _dispatch(argv)
        sys.stdout.flush()  # a closed pipe shows here, inside the handler, not at interpreter exit
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except UnsafeOutput as exc:  # a --trace/--out name that is a symlink: refused, nothing written
        print(f"datadist-sim: {exc}", file=sys.stderr)
        return 2
    return code


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush does not print a second error."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, io.UnsupportedOperation):
        pass


def _dispatch(argv: Optional[Sequence[str]]) -> int:
    args = build_parser().parse_args(argv)
    if args.verbose:
        from datadist_sim import _log

        handler = _log.enable()
        try:
            return int(args.func(args))
        finally:
            _log.disable(handler)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
