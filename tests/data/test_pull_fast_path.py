"""The pull fast path (issue 15) resolves each tensor's bytes once per cache and copies through them; it
must move exactly the bytes the general path moves, and never through bytes of memory since freed."""

from __future__ import annotations

import numpy as np

from datadist_sim._world.world import SimWorld
from datadist_sim.llm_datadist.v2.llm_types import CacheKeyByIdAndIndex

from .conftest import P_ID, pair
from .test_cache_manager_v2 import desc, fill, views


def test_fast_pull_moves_the_named_batch_into_the_named_batch_and_nothing_else(world: SimWorld) -> None:
    p, d = pair(v2=True)
    src = p.cache_manager.allocate_cache(desc(batch=3))
    dst = d.cache_manager.allocate_cache(desc(batch=3))
    fill(world, src, seed=1)
    fill(world, dst, seed=2)
    before = [v.copy() for v in views(world, dst)]
    d.cache_manager.pull_cache(CacheKeyByIdAndIndex(P_ID, src.cache_id, 2), dst, batch_index=0)
    for s, new, old in zip(views(world, src), views(world, dst), before):
        np.testing.assert_array_equal(new[0], s[2])
        np.testing.assert_array_equal(new[1:], old[1:])


def test_fast_pull_after_free_and_reallocation_reads_the_new_cache_bytes(world: SimWorld) -> None:
    """A cache freed and a new one allocated (possibly at the same addresses) must not be read through
    the old cache's resolved bytes."""
    p, d = pair(v2=True)
    dst = d.cache_manager.allocate_cache(desc(batch=1))
    first = p.cache_manager.allocate_cache(desc(batch=1))
    fill(world, first, seed=3)
    d.cache_manager.pull_cache(CacheKeyByIdAndIndex(P_ID, first.cache_id, 0), dst)
    p.cache_manager.deallocate_cache(first)
    second = p.cache_manager.allocate_cache(desc(batch=1))
    fill(world, second, seed=4)
    d.cache_manager.pull_cache(CacheKeyByIdAndIndex(P_ID, second.cache_id, 0), dst)
    for s, t in zip(views(world, second), views(world, dst)):
        np.testing.assert_array_equal(t, s)
