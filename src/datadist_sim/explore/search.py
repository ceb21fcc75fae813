"""The search: a baseline run, then the schedules in batches on an engine, then each distinct failure
shrunk and replayed under both readings of the contested engine rule.

The driver draws every schedule (from the seed and the run index), so workers only run them; results are
merged in run order. Local runs happen in worker processes (``worker``), never in the driver, so a
target that blocks outside the simulated clock is stopped at the wall bound and reported as a hang.
Failures are grouped by signature and the place in the target where it raised or waited
(``RunResult.group``); the first run of each group is shrunk, one candidate after another. Which runs
fail and what they shrink to therefore do not depend on the engine or the number of workers.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from datadist_sim.explore.executor import adopt_path, default_workers, ordered_map, search_path
from datadist_sim.explore.run import Limits, RunResult, Target, run_one
from datadist_sim.explore.schedule import Baseline, Schedule, schedules
from datadist_sim.explore.shrink import MAX_SHRINK_RUNS, shrink
from datadist_sim.explore.worker import Job, Workers
from datadist_sim.faults.rules import ACTIONS

READINGS: Dict[str, Dict[str, Any]] = {
    "table": {"comm_timeout_keeps_link": False},
    "code": {"comm_timeout_keeps_link": True},
}
"""The two readings of what a timed-out transfer leaves of its link: the status table's (the link is
unrecoverable and must be re-established) and the hixl code's (``comm_entity.cc:536-556`` aborts the
stream and keeps the entity). Each failure is replayed under both."""
READING_NAMES = {
    "table": "the status table's (a timed-out transfer breaks its link)",
    "code": "the hixl code's (a timed-out transfer keeps its link, comm_entity.cc:536-556)",
}
MAX_GROUPS = 10
"""Distinct failures shrunk at most; further groups are counted and listed unshrunk."""

BATCH = 16
"""Runs per Ray task: large enough to hide the hand-off, small enough to spread."""


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
class Found:
    """One distinct failure: its group, how many runs failed that way, the first of them, and what it
    shrank to (None past ``MAX_GROUPS``), with the runs the shrinking took."""

    group: str
    count: int
    first: RunResult
    shrunk: Optional[RunResult] = None
    shrink_runs: int = 0


@dataclass
class Outcome:
    """Everything explore found: the baseline, each run's verdict in order, and each distinct failure
    (``found``, in the order first met) shrunk."""

    baseline: RunResult
    baseline_calls: int
    results: List[RunResult] = field(default_factory=list)
    found: List[Found] = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def shrunk(self) -> Optional[RunResult]:
        """The first distinct failure, shrunk."""
        return self.found[0].shrunk if self.found else None

    @property
    def shrink_runs(self) -> int:
        return self.found[0].shrink_runs if self.found else 0

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

    def masked(self) -> Dict[str, int]:
        total: Counter[str] = Counter()
        for r in self.results:
            total.update(r.masked)
        return dict(sorted(total.items()))

    def codes(self) -> Dict[str, int]:
        total: Counter[str] = Counter()
        for r in self.results:
            total.update(r.codes)
        return dict(sorted(total.items()))


RayJob = Tuple[str, List[str], Limits, List[Tuple[int, int, Schedule]]]
_targets: Dict[str, Target] = {}


def run_batch(job: RayJob) -> List[RunResult]:
    """A Ray task's part: load the target once per process, run each (index, seed, schedule)."""
    spec, paths, limits, runs = job
    target = _targets.get(spec)
    if target is None:
        from datadist_sim._target import load_target

        adopt_path(paths)
        _install_for_good()
        target = _targets[spec] = load_target(spec)
    return [run_one(target, index, seed, schedule, limits) for index, seed, schedule in runs]


def _install_for_good() -> None:
    """A Ray worker process exists to run targets: the fake stays installed (not once per run)."""
    import warnings

    from datadist_sim._install import install

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", r"datadist_sim\.install\(\) shadows the real llm_datadist")
        install(force=True)


def load(target: Union[str, Target]) -> Target:
    """A ``package.module:function`` spec imported with the fake installed (a module's top-level
    ``import llm_datadist`` gets it, and keeps it), or the callable itself."""
    if not isinstance(target, str):
        return target
    from datadist_sim._target import load_target
    from datadist_sim.scenarios.client_run import fake_installed

    with fake_installed():
        loaded: Target = load_target(target)
    return loaded


def baseline_of(
    target: Target, options: Options, workers: Optional[Workers] = None
) -> Tuple[RunResult, Baseline, int]:
    """The fault-free run: its verdict, what it called, and how many calls it made."""
    job = Job(-1, options.seed, [], want_baseline=True)
    if workers is None:
        with Workers(target, options.limits) as own:
            result = own.one(job)
    else:
        result = workers.one(job)
    base = result.baseline if result.baseline is not None else Baseline()
    result.baseline = None
    return result, base, len(base.calls)


def explore(
    target: Union[str, Target],
    options: Options,
    *,
    progress: Optional[Callable[[int, int], None]] = None,
) -> Outcome:
    """Explore ``target`` (a ``package.module:function`` spec, or a callable; a callable runs on local
    workers only, forked from this process).

    Returns with ``results`` empty when the baseline itself failed.
    """
    start = time.perf_counter()
    spec = target if isinstance(target, str) else None
    func = load(target)
    count = options.workers if options.workers is not None else default_workers()
    with Workers(func, options.limits, count) as workers:
        base_result, base, calls = baseline_of(func, options, workers)
        outcome = Outcome(base_result, calls)
        if base_result.failed:
            outcome.wall_s = time.perf_counter() - start
            return outcome
        planned = schedules(
            options.seed, base, options.kinds, options.runs, options.max_rules, options.systematic
        )
        jobs = [Job(i, seed, schedule) for i, (seed, schedule) in enumerate(planned)]
        if options.engine == "ray" and spec is not None:
            outcome.results = _on_ray(spec, jobs, options, progress)
        else:
            outcome.results = workers.run(jobs, progress)
        outcome.found = _distinct(outcome.failures, workers, options)
    outcome.wall_s = time.perf_counter() - start
    return outcome


def _distinct(failures: Sequence[RunResult], workers: Workers, options: Options) -> List[Found]:
    """Each group of failures, in the order first met; the first ``MAX_GROUPS`` shrunk and replayed
    under each reading."""
    found: Dict[str, Found] = {}
    for result in failures:
        if result.group in found:
            found[result.group].count += 1
        else:
            found[result.group] = Found(result.group, 1, result)
    for entry in list(found.values())[:MAX_GROUPS]:
        first = entry.first

        def check(schedule: Schedule, first: RunResult = first) -> RunResult:
            return workers.one(Job(first.index, first.seed, schedule))

        entry.shrunk, entry.shrink_runs = shrink(first, check, budget=options.shrink_budget)
        entry.shrunk.readings = readings_of(workers, entry.shrunk)
    return list(found.values())


def readings_of(workers: Workers, result: RunResult) -> Dict[str, bool]:
    """Whether ``result``'s schedule (same seed) fails under each reading."""
    jobs = [Job(result.index, result.seed, result.schedule, dict(READINGS[name])) for name in READINGS]
    return {name: run.failed for name, run in zip(READINGS, workers.run(jobs))}


def _on_ray(
    spec: str, jobs: Sequence[Job], options: Options, progress: Optional[Callable[[int, int], None]]
) -> List[RunResult]:
    runs = [(job.index, job.seed, job.schedule) for job in jobs]
    paths = search_path()
    batches: List[RayJob] = [
        (spec, paths, options.limits, list(runs[i : i + BATCH])) for i in range(0, len(runs), BATCH)
    ]
    workers = options.workers if options.workers is not None else 0
    out: List[RunResult] = []
    for batch in ordered_map(run_batch, batches, workers=workers, engine="ray", address=options.address):
        out.extend(batch)
        if progress is not None:
            progress(len(out), len(runs))
    return out
