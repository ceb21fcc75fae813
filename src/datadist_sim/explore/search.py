"""The search: a baseline run, then the schedules in batches on an engine, then the first failure shrunk.

The driver draws every schedule (from the seed and the run index), so workers only run them; results are
merged in run order, and the shrinking re-runs the target here, in this process, one candidate after
another. Which runs fail and what they shrink to therefore do not depend on the engine or the number of
workers.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

from datadist_sim.explore.executor import adopt_path, default_workers, ordered_map, search_path
from datadist_sim.explore.run import Limits, RunResult, Target, run_one
from datadist_sim.explore.schedule import Baseline, Schedule, schedules
from datadist_sim.explore.shrink import MAX_SHRINK_RUNS, shrink
from datadist_sim.faults.rules import ACTIONS

BATCH = 16
"""Runs per job sent to a worker: large enough to hide the hand-off, small enough to spread."""


@dataclass
class Options:
    runs: int = 200
    seed: int = 0
    workers: Optional[int] = None
    """Local processes (default: all cores) or, with Ray, tasks in flight (default: the cluster's CPUs)."""
    engine: str = "local"
    address: Optional[str] = None
    kinds: Tuple[str, ...] = ACTIONS
    max_rules: int = 3
    systematic: bool = True
    limits: Limits = field(default_factory=Limits)
    shrink_budget: int = MAX_SHRINK_RUNS


@dataclass
class Outcome:
    """Everything explore found: the baseline, each run's verdict in order, and the first failure shrunk."""

    baseline: RunResult
    baseline_calls: int
    results: List[RunResult] = field(default_factory=list)
    shrunk: Optional[RunResult] = None
    shrink_runs: int = 0
    wall_s: float = 0.0

    @property
    def failures(self) -> List[RunResult]:
        return [r for r in self.results if r.failed]

    @property
    def first_failure(self) -> Optional[RunResult]:
        return next((r for r in self.results if r.failed), None)

    @property
    def runs_per_s(self) -> float:
        return len(self.results) / self.wall_s if self.wall_s > 0 else 0.0

    def fired(self) -> Dict[str, int]:
        total: Counter[str] = Counter()
        for r in self.results:
            total.update(r.fired)
        return dict(sorted(total.items()))

    def codes(self) -> Dict[str, int]:
        total: Counter[str] = Counter()
        for r in self.results:
            total.update(r.codes)
        return dict(sorted(total.items()))


Job = Tuple[str, List[str], Limits, List[Tuple[int, int, Schedule]]]
_targets: Dict[str, Target] = {}


def run_batch(job: Job) -> List[RunResult]:
    """A worker's part: load the target once per process, run each (index, seed, schedule)."""
    spec, paths, limits, runs = job
    target = _targets.get(spec)
    if target is None:
        from datadist_sim._target import load_target

        adopt_path(paths)
        _install_for_good()
        target = _targets[spec] = load_target(spec)
    return [run_one(target, index, seed, schedule, limits) for index, seed, schedule in runs]


def _install_for_good() -> None:
    """A worker process exists to run targets: the fake stays installed (not once per run)."""
    import warnings

    from datadist_sim._install import install

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", r"datadist_sim\.install\(\) shadows the real llm_datadist")
        install(force=True)


def baseline_of(target: Target, options: Options) -> Tuple[RunResult, Baseline, int]:
    """The fault-free run: its verdict, what it called, and how many calls it made."""
    worlds: List[object] = []
    result = run_one(target, -1, options.seed, [], options.limits, world_out=worlds)
    world = worlds[0]
    events = list(world.trace)  # type: ignore[attr-defined]
    base = Baseline.from_trace(events, result.sim_time)
    return result, base, len(base.calls)


def explore(
    target: Union[str, Target],
    options: Options,
    *,
    progress: Optional[Callable[[int, int], None]] = None,
) -> Outcome:
    """Explore ``target`` (a ``package.module:function`` spec, or a callable when everything runs here).

    Returns with ``results`` empty when the baseline itself failed.
    """
    start = time.perf_counter()
    spec = target if isinstance(target, str) else None
    if isinstance(target, str):
        from datadist_sim._target import load_target

        func: Target = load_target(target)
    else:
        func = target
    base_result, base, calls = baseline_of(func, options)
    outcome = Outcome(base_result, calls)
    if base_result.failed:
        outcome.wall_s = time.perf_counter() - start
        return outcome
    planned = schedules(
        options.seed, base, options.kinds, options.runs, options.max_rules, options.systematic
    )
    runs = [(i, seed, schedule) for i, (seed, schedule) in enumerate(planned)]
    outcome.results = list(_execute(func, spec, runs, options, progress))
    first = outcome.first_failure
    if first is not None:

        def check(schedule: Schedule) -> RunResult:
            return run_one(func, first.index, first.seed, schedule, options.limits)

        outcome.shrunk, outcome.shrink_runs = shrink(first, check, budget=options.shrink_budget)
    outcome.wall_s = time.perf_counter() - start
    return outcome


def _execute(
    func: Target,
    spec: Optional[str],
    runs: Sequence[Tuple[int, int, Schedule]],
    options: Options,
    progress: Optional[Callable[[int, int], None]],
) -> List[RunResult]:
    workers = options.workers if options.workers is not None else default_workers()
    here = options.engine == "local" and workers <= 1
    out: List[RunResult] = []
    if here or spec is None:
        for index, seed, schedule in runs:
            out.append(run_one(func, index, seed, schedule, options.limits))
            if progress is not None:
                progress(len(out), len(runs))
        return out
    paths = search_path()
    jobs: List[Job] = [
        (spec, paths, options.limits, list(runs[i : i + BATCH])) for i in range(0, len(runs), BATCH)
    ]
    if options.engine == "ray" and options.workers is None:
        workers = 0
    for batch in ordered_map(
        run_batch, jobs, workers=workers, engine=options.engine, address=options.address
    ):
        out.extend(batch)
        if progress is not None:
            progress(len(out), len(runs))
    return out
