"""Explore figures: runs per second on each engine, and how many runs a bug takes to be found.

    PYTHONPATH=src python benchmarks/bench_explore.py throughput [--runs 1000]
    PYTHONPATH=src python benchmarks/bench_explore.py discovery [--seeds 10] [--max-runs 20000]

``throughput`` explores ``tests.explore.clients:careful`` (or ``--client careful_20``: 20 requests; no
run fails, so every run is counted and nothing is shrunk) with one local worker, two local processes,
and Ray with two tasks in flight (``--engines local`` leaves Ray out), and prints runs/s including
start-up (forking workers, starting Ray). ``discovery`` counts the runs until the first failure of the
one-fault bug (``buggy``), the two-fault bug (``twice``: two faults on one request) and the bug that
needs a landed timeout (``landed``), with the systematic pass and with swarm runs only, over seeds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import List, Optional

from datadist_sim.explore import Limits, Options, explore
from datadist_sim.explore.run import run_one
from datadist_sim.explore.schedule import schedules
from datadist_sim.explore.search import baseline_of

TARGET = "tests.explore.clients:"


def throughput(runs: int, client: str, engines: List[str]) -> None:
    for label, workers, engine in (
        ("local, 1 worker", 1, "local"),
        ("local, 2 workers", 2, "local"),
        ("ray, 2 tasks", 2, "ray"),
    ):
        if label.split(",")[0] not in engines:
            continue
        start = time.perf_counter()
        outcome = explore(
            TARGET + client, Options(runs=runs, workers=workers, engine=engine, systematic=False)
        )
        wall = time.perf_counter() - start
        print(f"| {label} | {runs} | {wall:.1f} | {runs / wall:.0f} | {len(outcome.failures)} |", flush=True)


def first_failure(target: str, seed: int, systematic: bool, max_runs: int) -> Optional[int]:
    from datadist_sim._target import load_target

    func = load_target(target)
    options = Options(runs=max_runs, seed=seed, systematic=systematic)
    _, base, _ = baseline_of(func, options)
    planned = schedules(seed, base, options.kinds, max_runs, options.max_rules, systematic)
    for index, (world_seed, schedule) in enumerate(planned):
        if run_one(func, index, world_seed, schedule, Limits()).failed:
            return index + 1
    return None


def discovery(seeds: int, max_runs: int) -> None:
    for name in ("buggy", "twice", "landed"):
        for systematic in (True, False):
            found: List[int] = []
            missed = 0
            for seed in range(seeds):
                runs = first_failure(TARGET + name, seed, systematic, max_runs)
                if runs is None:
                    missed += 1
                else:
                    found.append(runs)
            mode = "systematic + swarm" if systematic else "swarm only"
            shown = f"{statistics.median(found):.0f} / {min(found)}-{max(found)}" if found else "-"
            print(f"| {name} | {mode} | {shown} | {missed} of {seeds} |", flush=True)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="what", required=True)
    t = sub.add_parser("throughput")
    t.add_argument("--runs", type=int, default=1000)
    t.add_argument("--client", default="careful", help="careful (3 requests) or careful_20 (20)")
    t.add_argument("--engines", default="local,ray", help="local and/or ray")
    d = sub.add_parser("discovery")
    d.add_argument("--seeds", type=int, default=10)
    d.add_argument("--max-runs", type=int, default=20000)
    args = parser.parse_args(argv)
    if args.what == "throughput":
        print("| engine | runs | wall s | runs/s | failures |\n|---|---|---|---|---|")
        throughput(args.runs, args.client, args.engines.split(","))
    else:
        print(
            "| client | schedules | runs to first failure (median / range) | not found |\n|---|---|---|---|"
        )
        discovery(args.seeds, args.max_runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
