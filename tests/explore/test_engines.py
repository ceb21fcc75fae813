"""The same exploration on one local worker, two local processes and Ray gives the same verdict for
every run and the same shrunk schedule (everything derives from the seed; results merge in run order)."""

from __future__ import annotations

from typing import Any, List, Tuple

import pytest

from datadist_sim.explore import Options, explore

BUGGY = "tests.explore.clients:buggy"
RUNS = 64  # the systematic pass reaches the pulls (and the first failures) before run 50


def _verdicts(outcome: Any) -> List[Tuple[Any, ...]]:
    return [(r.index, r.seed, r.failed, r.signature, r.fired, r.codes, r.sim_time) for r in outcome.results]


@pytest.fixture(scope="module")
def one_worker() -> Any:
    outcome = explore(BUGGY, Options(runs=RUNS, workers=1))
    assert outcome.failures, "the runs must include failures for the comparison to mean something"
    return outcome


def test_two_local_workers_agree_with_one_run_for_run(one_worker: Any) -> None:
    two = explore(BUGGY, Options(runs=RUNS, workers=2))
    assert _verdicts(two) == _verdicts(one_worker)
    assert two.shrunk is not None
    assert one_worker.shrunk is not None
    assert two.shrunk.schedule == one_worker.shrunk.schedule


def test_ray_tasks_agree_with_one_local_worker_run_for_run(one_worker: Any) -> None:
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    try:
        on_ray = explore(BUGGY, Options(runs=RUNS, workers=2, engine="ray"))
    finally:
        ray.shutdown()
    assert _verdicts(on_ray) == _verdicts(one_worker)
    assert on_ray.shrunk is not None
    assert one_worker.shrunk is not None
    assert on_ray.shrunk.schedule == one_worker.shrunk.schedule
