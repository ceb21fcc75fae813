"""``bench retry`` on the explore executor: the policy x scenario matrix run in two local processes
gives the same cells as in this process, user policies included; a policy that cannot be sent to a
worker is named."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import pytest

from datadist_sim.bench.retry_bench import POLICIES, Spread, policy_factory, run_matrix
from datadist_sim.bench.workload import Workload
from datadist_sim.faults.retime import Timing

SMALL = Workload(requests=60, rate_per_s=10.0)
TIMING = Timing(start_s=1.0, window_s=3.0)
SCENARIOS = [("flaky_link", (1.0,)), ("uce", (1.0,))]
USER = "tests.bench.policies_for_spread:two_tries"


def test_two_workers_give_the_same_cells_as_one() -> None:
    policies = {"no-retry": POLICIES["no-retry"], "mine": policy_factory(USER)}
    here = run_matrix(SMALL, policies, SCENARIOS, TIMING)
    spread = Spread(workers=2, sources={"mine": USER})
    there = run_matrix(SMALL, policies, SCENARIOS, TIMING, spread=spread)
    assert [asdict(c.metrics) for c in there] == [asdict(c.metrics) for c in here]
    assert [c.timeline for c in there] == [c.timeline for c in here]


def test_a_policy_without_a_source_cannot_go_to_a_worker() -> None:
    policies = {"adhoc": POLICIES["no-retry"].__call__}
    with pytest.raises(ValueError, match="adhoc"):
        run_matrix(SMALL, policies, SCENARIOS[:1], TIMING, spread=Spread(workers=2))


def test_bench_retry_on_ray_without_ray_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import sys

    from datadist_sim.bench import main

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    argv = ["retry", "--engine", "ray", "--policies", "no-retry", "--scenarios", "uce", "--clients", ""]
    assert main([*argv, "--requests", "20", "--no-plots", "--out", str(tmp_path)]) == 2
    assert "datadist-sim[ray]" in capsys.readouterr().out
