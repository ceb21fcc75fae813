"""One seed, one outcome: the same calls in two worlds give the same codes, times and trace."""

from __future__ import annotations

from datadist_sim._world.current import activate
from datadist_sim._world.world import SimWorld
from datadist_sim.llm_datadist.v2.llm_datadist import finalize_all

from .conftest import decoder, info, prompt


def _run(seed: int) -> list[tuple[object, ...]]:
    world = SimWorld(seed=seed)
    with activate(world):
        prompt(0)
        d = decoder(1)
        outcomes = [d.link_clusters([info(0), info(3, 26003)], timeout=800)]
        outcomes.append(d.unlink_clusters([info(0)]))
        outcomes.append(d.link_clusters([info(0)], timeout=1))
        finalize_all(world)
    return [tuple(o) for o in outcomes] + [
        (e.time, e.cluster_id, e.op, e.outcome, e.detail) for e in world.trace
    ]


def test_two_runs_with_one_seed_are_identical() -> None:
    first, second = _run(11), _run(11)
    assert first == second
    assert len(first) > 5
