"""The retry benchmark: every policy against every scenario at several fault rates, same seed each.

Each cell is one independent run (a fresh world, the same requests, the scenario's rules re-timed into
the benchmark's fault window); a policy object is built fresh per run, so jitter and budgets never leak
between cells. A second sweep grows the number of Decode clients under the flaky link to show how much
work each policy makes the fabric do per delivered request.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field, replace
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from datadist_sim._progress import Progress
from datadist_sim.bench.metrics import RunMetrics, measure, timeline
from datadist_sim.bench.workload import Driver, Workload
from datadist_sim.faults import retime
from datadist_sim.faults.files import load
from datadist_sim.retry import (
    RetryPolicy,
    budgeted,
    code_aware,
    exponential_jitter,
    fixed_delay,
    immediate,
    no_retry,
    omni_infer,
)

PolicyFactory = Callable[[int], RetryPolicy]

POLICIES: Dict[str, PolicyFactory] = {
    "no-retry": lambda seed: no_retry(),
    "immediate": lambda seed: immediate(),
    "fixed-delay": lambda seed: fixed_delay(),
    "exp-jitter": lambda seed: exponential_jitter(seed=seed),
    "code-aware": lambda seed: code_aware(seed=seed),
    "omni-infer": lambda seed: omni_infer(),
    "budget": lambda seed: budgeted(seed=seed),
}
"""The built-in policies by name; add your own factory (seed -> RetryPolicy) to compare it."""

NO_FAULTS = "none"
SCENARIOS: Tuple[Tuple[str, Tuple[float, ...]], ...] = (
    (NO_FAULTS, (0.0,)),
    ("flaky_link", (0.5, 1.0, 2.0)),
    ("busy_link_storm", (0.5, 1.0, 2.0)),
    ("timeout_spike", (1.0,)),
    ("partition_heal", (1.0,)),
    ("pool_pressure", (1.0,)),
    ("link_cut_mid_pull", (1.0,)),
    ("prompt_crash", (1.0,)),
    ("uce", (1.0,)),
)
"""Default matrix: scenario and the fault rates (multipliers of its probabilities) to run it at."""


@dataclass
class Cell:
    metrics: RunMetrics
    timeline: List[Tuple[float, float]]


@dataclass
class Results:
    seed: int
    workload: Workload
    cells: List[Cell] = field(default_factory=list)
    clients: List[Dict[str, object]] = field(default_factory=list)


def _mode(scenario: str) -> str:
    if scenario == NO_FAULTS:
        return "v1"
    return load(scenario).workload.mode


def timing_for(wl: Workload) -> retime.Timing:
    """Faults from a fifth of the expected run to three fifths: time before to see the steady state,
    and as long after the heal to see whether the system recovers."""
    span = wl.requests / wl.rate_per_s
    return retime.Timing(start_s=0.2 * span, window_s=0.4 * span)


def run_cell(
    wl: Workload, policy: str, factory: PolicyFactory, scenario: str, rate: float, timing: retime.Timing
) -> Cell:
    rules = [] if scenario == NO_FAULTS else retime.bench_rules(scenario, rate, timing)
    wl = replace(wl, mode=_mode(scenario))
    driver = Driver(wl, factory(wl.seed), rules)
    requests = driver.run()
    run_end = max(r.finished or r.arrival for r in requests)
    windows = retime.windows(rules, driver.fired, run_end)
    metrics = measure(policy, scenario, rate, requests, windows, retime.permanent(rules))
    return Cell(metrics, timeline(requests))


@dataclass(frozen=True)
class Spread:
    """Where the cells run: here (one local worker), ``workers`` local processes, or Ray tasks; the
    executor of ``datadist-sim explore``. ``sources`` names the user policies (``--add-policy``) by
    ``package.module:factory`` so a worker can build them; built-in policies go by name."""

    workers: int = 1
    engine: str = "local"
    address: Optional[str] = None
    sources: Dict[str, str] = field(default_factory=dict)

    @property
    def here(self) -> bool:
        return self.engine == "local" and self.workers <= 1


def policy_factory(target: str) -> PolicyFactory:
    """``package.module:factory`` as seed -> RetryPolicy (given ``seed=`` if the factory takes one)."""
    from datadist_sim._target import load_target

    factory = load_target(target, what="policy factory")
    if "seed" in inspect.signature(factory).parameters:
        return lambda seed: factory(seed=seed)
    return lambda seed: factory()


CellJob = Tuple[Workload, str, Optional[str], str, float, retime.Timing, List[str]]


def run_cell_job(job: CellJob) -> Cell:
    """A worker's cell: the policy built here from its name or its source, then ``run_cell``."""
    from datadist_sim.explore.executor import adopt_path

    wl, name, source, scenario, rate, timing, paths = job
    adopt_path(paths)
    factory = POLICIES[name] if source is None else policy_factory(source)
    return run_cell(wl, name, factory, scenario, rate, timing)


def _cells(
    jobs: Sequence[Tuple[str, float, str, PolicyFactory, Workload]],
    timing: retime.Timing,
    spread: Optional[Spread],
    label: str,
) -> List[Cell]:
    """Run the cells in job order, here or on the spread's engine (same cells either way)."""
    cells: List[Cell] = []
    with Progress(len(jobs), label) as bar:
        if spread is None or spread.here:
            for scenario, rate, name, factory, cell_wl in jobs:
                bar.update(len(cells), f"{scenario} x{rate} {name}")
                cells.append(run_cell(cell_wl, name, factory, scenario, rate, timing))
            return cells
        from datadist_sim.explore.executor import ordered_map, search_path

        paths = search_path()
        remote: List[CellJob] = []
        for scenario, rate, name, factory, cell_wl in jobs:
            source = spread.sources.get(name)
            if source is None and POLICIES.get(name) is not factory:
                raise ValueError(f"policy {name!r} cannot run in a worker: add it as NAME=module:factory")
            remote.append((cell_wl, name, source, scenario, rate, timing, paths))
        for cell in ordered_map(
            run_cell_job, remote, workers=spread.workers, engine=spread.engine, address=spread.address
        ):
            cells.append(cell)
            bar.update(len(cells))
    return cells


def run_matrix(
    wl: Workload,
    policies: Dict[str, PolicyFactory],
    scenarios: Sequence[Tuple[str, Sequence[float]]],
    timing: Optional[retime.Timing] = None,
    spread: Optional[Spread] = None,
) -> List[Cell]:
    timing = timing or timing_for(wl)
    jobs = [
        (scenario, rate, name, factory, wl)
        for scenario, rates in scenarios
        for rate in rates
        for name, factory in policies.items()
    ]
    return _cells(jobs, timing, spread, "retry matrix")


def clients_sweep(
    wl: Workload,
    policies: Dict[str, PolicyFactory],
    clients: Sequence[int] = (1, 2, 4, 8),
    scenario: str = "flaky_link",
    per_client_rate: float = 2.5,
    spread: Optional[Spread] = None,
) -> List[Dict[str, object]]:
    """Total work as the number of Decode clients grows (arrivals grow with them)."""
    rows: List[Dict[str, object]] = []
    timing = timing_for(wl)
    jobs: List[Tuple[str, float, str, PolicyFactory, Workload]] = []
    for n in clients:
        sized = replace(
            wl, decodes=n, rate_per_s=per_client_rate * n, requests=int(wl.requests * n / wl.decodes)
        )
        jobs += [(scenario, 1.0, name, factory, sized) for name, factory in policies.items()]
    cells = _cells(jobs, timing, spread, "clients sweep")
    for (_, _, name, _, sized), cell in zip(jobs, cells):
        m = cell.metrics
        rows.append(
            {
                "clients": sized.decodes,
                "policy": name,
                "requests": m.requests,
                "success_rate": m.success_rate,
                "attempts": m.attempts,
                "attempts_per_request": m.attempts / m.requests,
                "link_busy_s": m.link_busy_s,
                "busy_s_per_success": m.link_busy_s / max(1, round(m.success_rate * m.requests)),
            }
        )
    return rows


def run(
    seed: int = 0,
    wl: Workload | None = None,
    policies: Dict[str, PolicyFactory] | None = None,
    scenarios: Sequence[Tuple[str, Sequence[float]]] = SCENARIOS,
    clients: Sequence[int] = (1, 2, 4, 8),
    spread: Optional[Spread] = None,
) -> Results:
    wl = replace(wl or Workload(), seed=seed)
    policies = policies or POLICIES
    results = Results(seed, wl, run_matrix(wl, policies, scenarios, spread=spread))
    if clients:
        results.clients = clients_sweep(wl, policies, clients, spread=spread)
    return results
