"""A v1 ``KvCache`` that is garbage-collected deallocates itself (its ``__del__``, as the real one does),
during the collection as before; but a public call made while a collection runs leaves the call's
context variable alone (``_finalizers``): setting one inside a collection that interrupted another
context-variable operation corrupts memory (seen as a segfault in a long test run)."""

from __future__ import annotations

import gc
from typing import Any, Dict, Iterator, List, Optional

import pytest

from datadist_sim._world.world import SimWorld
from datadist_sim.llm_datadist import _engine, _finalizers
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


class _SpyScope:
    """Stands in for the face's context variable and counts what sets it."""

    def __init__(self) -> None:
        self.sets: List[object] = []

    def get(self) -> Optional[object]:
        return None

    def set(self, value: object) -> object:
        self.sets.append(value)
        return len(self.sets)

    def reset(self, token: object) -> None:
        pass


def test_a_cache_the_collector_frees_is_deallocated_during_the_collection(
    world: SimWorld, no_collections: None
) -> None:
    _, d = pair(v2=False, link=False)
    cycle: Dict[str, Any] = {"cache": d.kv_cache_manager.allocate_cache(_desc())}
    cycle["self"] = cycle  # only the cyclic collector can free it
    del cycle
    assert _live_caches(world, d.cluster_id) == 1
    gc.collect()
    assert _live_caches(world, d.cluster_id) == 0
    assert world.trace.calls()[-1].op == "deallocate_cache"
    assert not _finalizers.collecting


def test_a_call_inside_a_collection_leaves_the_context_variable_alone(
    world: SimWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, d = pair(v2=False, link=False)
    spy = _SpyScope()
    monkeypatch.setattr(_engine, "_SCOPE", spy)
    kept = d.kv_cache_manager.allocate_cache(_desc())
    assert len(spy.sets) == 1  # an ordinary call sets it
    monkeypatch.setattr(_finalizers, "collecting", True)
    cache = d.kv_cache_manager.allocate_cache(_desc())
    d.kv_cache_manager.deallocate_cache(cache)
    assert len(spy.sets) == 1  # the calls made while collecting did not
    assert kept.cache_id in world.caches[d.cluster_id].caches
    assert [e.op for e in world.trace.calls()[-2:]] == ["allocate_cache", "deallocate_cache"]


def test_a_failed_v1_call_leaves_nothing_that_keeps_its_cache_alive(
    world: SimWorld, no_collections: None
) -> None:
    """The v1 face raises its own exception from inside ``api_call``; no frame of that path may hold the
    new exception, or its traceback would be a cycle holding the call's ``KvCache`` until a collection
    (the cache would then free itself later than the user dropped it)."""
    from datadist_sim.llm_datadist_v1 import CacheKeyByIdAndIndex, LLMException

    _, d = pair(v2=False, link=False)
    cache = d.kv_cache_manager.allocate_cache(_desc())
    with pytest.raises(LLMException):  # no link to cluster 1: the v1 package's exception
        d.kv_cache_manager.pull_cache(CacheKeyByIdAndIndex(1, 1, 0), cache, 0)
    del cache
    assert _live_caches(world, d.cluster_id) == 0  # freed by the reference drop, no collection run
    assert world.trace.calls()[-1].op == "deallocate_cache"
