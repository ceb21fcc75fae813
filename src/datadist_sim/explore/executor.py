"""Run independent jobs in order on one engine: in this process, local processes, or Ray tasks.

Results come back in job order whatever the engine and the number of workers, and each job carries
everything it depends on (its seed, its schedule), so the outcome of a job never depends on where or
when it ran. ``bench retry`` uses it, and ``explore`` for Ray tasks (its local runs go to ``worker``).
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, TypeVar

T = TypeVar("T")
R = TypeVar("R")
ENGINES = ("local", "ray")
RAY_MISSING = (
    "--engine ray needs Ray, which is not installed here: "
    "pip install 'datadist-sim[ray]' (or pip install ray)"
)


class EngineError(RuntimeError):
    """The engine cannot run here (Ray missing, or the cluster unreachable); a usage error for the CLI."""


def default_workers() -> int:
    return max(1, os.cpu_count() or 1)


def search_path() -> List[str]:
    """The import path a job needs to find the user's module (the current directory first)."""
    return [os.getcwd(), *(p for p in sys.path if p and os.path.isdir(p))]


def adopt_path(paths: Sequence[str]) -> None:
    """In a worker: put the driver's import path entries that exist here after its own."""
    for entry in paths:
        if entry not in sys.path and os.path.isdir(entry):
            sys.path.append(entry)


def ordered_map(
    fn: Callable[[T], R],
    jobs: Sequence[T],
    *,
    workers: int = 1,
    engine: str = "local",
    address: Optional[str] = None,
) -> Iterator[R]:
    """``fn(job)`` for each job, yielded in job order. ``fn`` and the jobs must pickle (a module-level
    function and plain data) unless everything runs here (one local worker)."""
    if engine not in ENGINES:
        raise EngineError(f"unknown engine {engine!r}; engines: {', '.join(ENGINES)}")
    if engine == "ray":
        yield from _ray_map(fn, jobs, workers, address)
        return
    if workers <= 1 or len(jobs) <= 1:
        for job in jobs:
            yield fn(job)
        return
    # spawn, not fork: the driver may hold threads (fork would copy their locks mid-use).
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(min(workers, len(jobs)), mp_context=context) as pool:
        yield from pool.map(fn, jobs)


def start_ray(address: Optional[str]) -> Any:
    """Ray, connected: to the cluster at ``address`` (shipping the current directory as the jobs'
    working directory, so the user's module is there), else a local Ray started for this process."""
    try:
        import ray
    except ImportError:
        raise EngineError(RAY_MISSING) from None
    if not ray.is_initialized():
        options: Dict[str, Any] = {"logging_level": logging.ERROR, "log_to_driver": False}
        if address:
            options["runtime_env"] = {"working_dir": os.getcwd()}
        else:
            options["include_dashboard"] = False
        try:
            ray.init(address=address, **options)
        except Exception as exc:
            raise EngineError(f"cannot start or reach Ray ({address or 'local'}): {exc}") from exc
    return ray


def _ray_map(fn: Callable[[T], R], jobs: Sequence[T], workers: int, address: Optional[str]) -> Iterator[R]:
    ray = start_ray(address)
    remote = ray.remote(num_cpus=1)(fn)
    cap = workers if workers > 0 else max(1, int(ray.cluster_resources().get("CPU", 1)))
    pending: Dict[Any, int] = {}
    done: Dict[int, R] = {}
    submitted = yielded = 0
    while yielded < len(jobs):
        while submitted < len(jobs) and len(pending) < cap:
            pending[remote.remote(jobs[submitted])] = submitted
            submitted += 1
        if yielded not in done:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                done[pending.pop(ref)] = ray.get(ref)
            continue
        yield done.pop(yielded)
        yielded += 1
