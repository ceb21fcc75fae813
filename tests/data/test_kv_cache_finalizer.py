"""A v1 ``KvCache`` that is garbage-collected deallocates itself (its ``__del__``, as the real one does).
When the collector frees it, the deallocation waits for the collection to end (``_finalizers``): a
public call sets a context variable, and doing that inside a collection that interrupted another
context-variable operation corrupts memory (seen as a segfault in a long test run)."""

from __future__ import annotations

import gc
from typing import Any, Dict, Iterator

import pytest

from datadist_sim._world.world import SimWorld
from datadist_sim.llm_datadist import _finalizers
from datadist_sim.llm_datadist.data_type import DataType
from datadist_sim.llm_datadist.v2.llm_types import CacheDesc

from .conftest import pair


def _desc() -> CacheDesc:
    return CacheDesc(1, [1, 1024], DataType.DT_UINT8)


def _live_caches(world: SimWorld, cluster_id: int) -> int:
    return len(world.caches[cluster_id].caches)


@pytest.fixture
def no_collections() -> Iterator[None]:
    """Only the collections the test starts (so what it counts is what it did)."""
    enabled = gc.isenabled()
    gc.disable()
    yield
    if enabled:
        gc.enable()


def test_a_dropped_reference_deallocates_at_once(world: SimWorld, no_collections: None) -> None:
    _, d = pair(v2=False, link=False)
    cache = d.kv_cache_manager.allocate_cache(_desc())
    assert _live_caches(world, d.cluster_id) == 1
    del cache
    assert _live_caches(world, d.cluster_id) == 0
    assert not _finalizers.deferred


def test_a_cache_the_collector_frees_is_deallocated_by_the_next_call(
    world: SimWorld, no_collections: None
) -> None:
    _, d = pair(v2=False, link=False)
    cycle: Dict[str, Any] = {"cache": d.kv_cache_manager.allocate_cache(_desc())}
    cycle["self"] = cycle  # only the cyclic collector can free it
    del cycle
    gc.collect()
    assert len(_finalizers.deferred) == 1  # left for after the collection, not run inside it
    assert _live_caches(world, d.cluster_id) == 1
    kept = d.kv_cache_manager.allocate_cache(_desc())  # the next public call runs it first
    assert not _finalizers.deferred
    assert _live_caches(world, d.cluster_id) == 1  # the collected one went, the new one stays
    assert kept.cache_id in world.caches[d.cluster_id].caches
    calls = [e.op for e in world.trace.calls()]
    assert calls[-2:] == ["deallocate_cache", "allocate_cache"]


def test_a_deferred_deallocation_that_fails_is_dropped(world: SimWorld, no_collections: None) -> None:
    """As an error in a finalizer is unraisable, one in a deferred finalizer does not reach the call
    that runs it."""

    def fails(_: object) -> None:
        raise RuntimeError("finalizer failed")

    _finalizers.deferred.append((fails, None))
    _, d = pair(v2=False, link=False)
    d.kv_cache_manager.allocate_cache(_desc())
    assert not _finalizers.deferred
