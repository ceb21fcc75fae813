"""Argument parsing for ``datadist-sim bench``: one subcommand per benchmark."""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from datadist_sim.bench.workload import Workload


def _scenarios(text: str) -> List[Tuple[str, Tuple[float, ...]]]:
    """``flaky_link:0.5/1/2,uce`` -> [("flaky_link", (0.5, 1.0, 2.0)), ("uce", (1.0,))]."""
    out: List[Tuple[str, Tuple[float, ...]]] = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, _, rates = item.partition(":")
        default = (0.0,) if name == "none" else (1.0,)
        out.append((name, tuple(float(r) for r in rates.split("/")) if rates else default))
    return out


def _plugin(spec: str) -> Tuple[str, Callable[[int], Any]]:
    """``NAME=package.module:function`` -> (NAME, seed -> RetryPolicy); workers build it the same way."""
    from datadist_sim.bench.retry_bench import policy_factory

    name, sep, target = spec.partition("=")
    if not (sep and name and target):
        raise ValueError("expected NAME=MODULE:FACTORY")
    return name, policy_factory(target)  # the current directory first, as python -m


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="datadist-sim bench", description="retry-policy benchmark and simulator performance"
    )
    sub = parser.add_subparsers(dest="bench", required=True)
    retry = sub.add_parser("retry", help="policy x scenario table under faults (simulated time)")
    retry.add_argument(
        "--seed", type=int, default=0, help="the seed every policy, scenario and rate runs with (default 0)"
    )
    retry.add_argument("--out", type=Path, default=Path("bench-results"), help="directory for JSON and PNGs")
    retry.add_argument("--policies", help="comma-separated subset of the built-in policies")
    retry.add_argument(
        "--add-policy",
        action="append",
        default=[],
        metavar="NAME=MODULE:FACTORY",
        help="your own policy: a function returning a RetryPolicy (given seed= if it takes one)",
    )
    retry.add_argument(
        "--scenarios", type=_scenarios, help="e.g. 'none,flaky_link:0.5/1/2,uce' (rates after ':')"
    )
    retry.add_argument("--requests", type=int, help="requests per run (default 500)")
    retry.add_argument(
        "--clients", default="1,2,4,8", help="Decode client counts for the work sweep ('' = skip)"
    )
    retry.add_argument("--no-plots", action="store_true")
    retry.add_argument("--workers", type=int, default=1, help="local processes (default 1: this one)")
    retry.add_argument("--engine", choices=("local", "ray"), default="local", help="local processes or Ray")
    retry.add_argument("--address", help="Ray cluster address (default: a local Ray)")
    perf = sub.add_parser("perf", help="control-plane, data-plane and scaling figures vs baselines")
    perf.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    perf.add_argument("--out", type=Path, default=Path("bench-results"), help="directory for perf.json")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Exit codes: 0 done, 1 a benchmark's own checks failed, 2 usage error."""
    args = build_parser().parse_args(list(argv) if argv is not None else None)
    if args.bench == "retry":
        return _retry(args)
    from datadist_sim.bench.perf import main as perf_main

    return perf_main(quick=args.quick, out=args.out)


def _policies(args: argparse.Namespace, built_in: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The built-in policies (or the ``--policies`` subset) plus ``--add-policy`` ones; None on error."""
    policies = built_in
    if args.policies:
        wanted = [p.strip() for p in args.policies.split(",") if p.strip()]
        unknown = [p for p in wanted if p not in built_in]
        if unknown:
            print(f"unknown policies {unknown}; built in: {', '.join(built_in)}")
            return None
        policies = {p: built_in[p] for p in wanted}
    for spec in args.add_policy:
        try:
            name, factory = _plugin(spec)
        except ValueError as exc:
            print(f"--add-policy {spec!r}: {exc}")
            return None
        policies = {**policies, name: factory}
    return policies


def _retry(args: argparse.Namespace) -> int:
    from datadist_sim.bench import report
    from datadist_sim.bench.retry_bench import POLICIES, SCENARIOS, Spread, run
    from datadist_sim.explore.executor import EngineError

    policies = _policies(args, POLICIES)
    if policies is None:
        return 2
    sources = {spec.partition("=")[0]: spec.partition("=")[2] for spec in args.add_policy}
    workers = args.workers if args.engine == "local" or args.workers != 1 else 0
    spread = Spread(workers=workers, engine=args.engine, address=args.address, sources=sources)
    wl = Workload() if args.requests is None else replace(Workload(), requests=args.requests)
    clients = tuple(int(c) for c in args.clients.split(",") if c.strip())
    wall = time.perf_counter()
    try:
        results = run(args.seed, wl, policies, args.scenarios or SCENARIOS, clients, spread=spread)
    except EngineError as exc:
        print(f"datadist-sim bench retry: {exc}")
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    print(report.table(results.cells))
    if results.clients:
        print("\nTotal work as Decode clients grow (flaky_link, rate 1):\n")
        print(report.clients_table(results.clients))
    report.write_json(results, args.out / "retry.json")
    written = [] if args.no_plots else report.write_plots(results, args.out)
    print(f"\nseed {args.seed}; wall {time.perf_counter() - wall:.1f} s; wrote {args.out / 'retry.json'}")
    for path in written:
        print(f"wrote {path}")
    return 0
