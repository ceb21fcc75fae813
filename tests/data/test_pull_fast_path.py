"""The pull fast path resolves each tensor's bytes once per cache and copies through them; it
must move exactly the bytes the general path moves, and never through bytes of memory since freed.
Beside other threads it holds the world's and both stores' locks and leaves to the general path what
that path would make wait or refuse (``pull_shortcut._beside_others``)."""

from __future__ import annotations

import threading
from typing import Any, Tuple

import numpy as np
import pytest

from datadist_sim._world import pull_shortcut, pulls, transfer
from datadist_sim._world.requests import whole_batch
from datadist_sim._world.world import SimWorld
from datadist_sim.llm_datadist.status import LLMException
from datadist_sim.llm_datadist.status import LLMStatusCode as S
from datadist_sim.llm_datadist.v2.llm_types import CacheKey, CacheKeyByIdAndIndex
from datadist_sim.llm_datadist.v2.llm_utils import pack_pulled_key

from ._pull_paths import thread_beside
from .conftest import D_ID, P_ID, pair
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


def _request(world: SimWorld, key: CacheKey, dst: Any) -> Tuple[Any, pulls.PullRequest]:
    packed = pack_pulled_key(key)
    return world.node(D_ID), pulls.PullRequest(dst.cache_id, packed, whole_batch(-1, 0, 2), False)


def test_fast_pull_beside_another_thread_declines_while_a_transfer_runs_on_the_link(world: SimWorld) -> None:
    """Beside other threads the fast path holds the locks from its checks to its commit, so it must not
    overtake a transfer already registered on the link (the slow path waits for the link's mutex, or is
    ``LLM_LINK_BUSY``): it declines, changing nothing, and runs once the link is free."""
    p, d = pair(v2=True)
    src = p.cache_manager.allocate_cache(desc(batch=1), [CacheKey(P_ID, 1)])
    dst = d.cache_manager.allocate_cache(desc(batch=1))
    fill(world, src, seed=5)
    before = [v.copy() for v in views(world, dst)]
    node, request = _request(world, CacheKey(P_ID, 1), dst)
    with thread_beside():
        with transfer.link_activity(world, world.node(P_ID), D_ID, "push"):  # the other end pushes
            assert pull_shortcut.fast_pull(world, node, request) is False
            for new, old in zip(views(world, dst), before):
                np.testing.assert_array_equal(new, old)
            assert world.caches[P_ID].key_table, "the key is still there"
        assert pull_shortcut.fast_pull(world, node, request) is True
    for s, t in zip(views(world, src), views(world, dst)):
        np.testing.assert_array_equal(t, s)
    assert not world.caches[P_ID].key_table, "the pull consumed its key"


def test_fast_pull_beside_another_thread_declines_the_same_pull_in_flight(world: SimWorld) -> None:
    """The same pull (key and destination) in flight on another thread: the fast path leaves it to the
    slow path, whose answer is ``LLM_REPEAT_REQUEST``."""
    p, d = pair(v2=True)
    p.cache_manager.allocate_cache(desc(batch=1), [CacheKey(P_ID, 1)])
    dst = d.cache_manager.allocate_cache(desc(batch=1))
    node, request = _request(world, CacheKey(P_ID, 1), dst)
    with thread_beside():
        world.caches[D_ID].inflight.add((request.key, request.dst_cache_id))
        assert pull_shortcut.fast_pull(world, node, request) is False
        with pytest.raises(LLMException) as refused:
            d.cache_manager.pull_cache(CacheKey(P_ID, 1), dst)
        assert refused.value.status_code is S.LLM_REPEAT_REQUEST
        world.caches[D_ID].inflight.clear()
        d.cache_manager.pull_cache(CacheKey(P_ID, 1), dst)
    assert not world.caches[P_ID].key_table


def test_a_pull_beside_another_thread_waits_for_a_store_lock_held_elsewhere(world: SimWorld) -> None:
    """A cache freed or allocated on another thread holds its store's lock: the fast path, which takes
    store locks without waiting, leaves such a pull to the slow path, which waits for the lock; either
    way nothing is written into a store mid-change, and the pull then runs whole."""
    p, d = pair(v2=True)
    src = p.cache_manager.allocate_cache(desc(batch=1), [CacheKey(P_ID, 1)])
    dst = d.cache_manager.allocate_cache(desc(batch=1))
    fill(world, src, seed=6)
    before = [v.copy() for v in views(world, dst)]
    finished = threading.Event()

    def pull() -> None:
        d.cache_manager.pull_cache(CacheKey(P_ID, 1), dst)
        finished.set()

    with world.caches[D_ID].lock:  # the destination's store, mid-change on this thread
        puller = threading.Thread(target=pull)
        puller.start()
        assert not finished.wait(0.2), "the pull went on while the destination's store was mid-change"
        for new, old in zip(views(world, dst), before):
            np.testing.assert_array_equal(new, old)
    puller.join(5)
    assert finished.is_set()
    for s, t in zip(views(world, src), views(world, dst)):
        np.testing.assert_array_equal(t, s)


def test_a_blocks_pull_goes_whole_in_one_pass_and_matches_the_planned_path(
    world: SimWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The commonest ``pull_blocks`` (blocks into blocks, every tensor) takes ``block_pulls``' one pass,
    and moves the bytes and lets pass the time that the planned path does for the same pull."""
    from datadist_sim._world import block_pulls
    from datadist_sim.llm_datadist import BlocksCacheKey, CacheDesc, DataType

    p, d = pair(v2=True)
    bdesc = CacheDesc(2, [16, 8, 16], DataType.DT_FLOAT16)
    src = p.cache_manager.allocate_blocks_cache(bdesc, BlocksCacheKey(P_ID, 0))
    fill(world, src, seed=5)
    outcomes = []
    for one_pass in (True, False):
        taken = []
        real = block_pulls.blocks_at_once

        def spy(*args: Any, _real: Any = real, _taken: Any = taken, _one: bool = one_pass) -> bool:
            _taken.append(True)
            return bool(_real(*args)) if _one else False

        monkeypatch.setattr(pull_shortcut, "blocks_at_once", spy)
        dst = d.cache_manager.allocate_blocks_cache(bdesc)
        fill(world, dst, seed=6)
        start = world.now()
        d.cache_manager.pull_blocks(BlocksCacheKey(P_ID, 0), dst, [9, 2, 15], [0, 7, 3])
        outcomes.append(([v.copy() for v in views(world, dst)], world.now() - start))
        assert taken == [True]
        d.cache_manager.deallocate_blocks_cache(dst)
    (fast, fast_s), (planned, planned_s) = outcomes
    assert fast_s == pytest.approx(planned_s)
    for a, b in zip(fast, planned):
        np.testing.assert_array_equal(a, b)
    for s, t in zip(views(world, src), fast):
        np.testing.assert_array_equal(t[[0, 7, 3]], s[[9, 2, 15]])
