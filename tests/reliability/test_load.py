"""Load: 100,000 requests in one virtual-time run across 16 Prompt and 16 Decode clusters, with faults of
every kind, and nothing lost: every request ends exactly one way, every Prompt pool is empty again, and
memory grows with live keys, not with history (the trace keeps a bounded window)."""

from __future__ import annotations

import gc
from typing import Dict

from tests.reliability._common import NIGHTLY, STATS, check_books
from tests.reliability._load import run_load

from datadist_sim._world.world import SimWorld

REQUESTS = 1_000_000 if NIGHTLY else 100_000
TRACE_SIZE = 10_000


def test_a_hundred_thousand_requests_with_faults_lose_nothing() -> None:
    objects: Dict[int, int] = {}
    live_keys: Dict[int, int] = {}

    def checkpoint(done: int, world: SimWorld) -> None:
        check_books(world)
        live_keys[done] = sum(len(store.key_table) for store in world.caches.values())
        gc.collect()
        objects[done] = len(gc.get_objects())

    report = run_load(REQUESTS, trace_size=TRACE_SIZE, checkpoint=checkpoint, every=REQUESTS // 5)
    assert sum(report.outcomes.values()) == REQUESTS
    assert set(report.outcomes) <= {"delivered", "delivered by a timed-out pull", "abandoned", "rejected"}
    assert report.outcomes["delivered"] > 0.97 * REQUESTS
    assert report.faults_fired > 0.005 * REQUESTS, "the fault plan fired throughout the run"
    assert set(live_keys.values()) == {0}, "no key outlives its request"
    first, last = min(objects), max(objects)
    assert objects[last] - objects[first] < 2_000, f"objects grew with history: {objects}"
    world = report.world
    assert world is not None
    assert report.trace_kept == TRACE_SIZE < report.trace_total, "the trace is a bounded window"
    assert not world.nodes
    assert world.memory.backed_bytes == 0
    STATS["load requests"] += REQUESTS
    STATS["load requests lost"] += REQUESTS - sum(report.outcomes.values())
    STATS["load faults fired"] += report.faults_fired
    STATS["load simulated seconds"] += int(report.simulated_s)
    for outcome, count in report.outcomes.items():
        STATS[f"load: {outcome}"] += count
