"""``datadist_sim.tensor_views`` on memory a client may not read raises the public
``datadist_sim.MemoryAccessError``, whose code says why, and which the world's own error class still
catches."""

from __future__ import annotations

import pytest
from tests.data.conftest import P_ID, pair
from tests.data.test_cache_manager_v2 import desc

import datadist_sim
from datadist_sim import LLMStatusCode, MemoryAccessError, SimWorld, tensor_views
from datadist_sim._world.errors import SimError
from datadist_sim.llm_datadist.v2.llm_types import CacheKey


def test_it_is_public_and_the_worlds_error_still_catches_it() -> None:
    assert "MemoryAccessError" in datadist_sim.__all__
    assert issubclass(MemoryAccessError, SimError)


def test_poisoned_memory_raises_it_with_the_uce_code(world: SimWorld) -> None:
    p, _ = pair(v2=True, link=False)
    cache = p.cache_manager.allocate_cache(desc(), [CacheKey(P_ID, 1)])
    world.memory.poison(cache.tensor_addrs[1], 8)
    with pytest.raises(MemoryAccessError, match="uncorrectable memory error") as err:
        tensor_views(cache)
    assert err.value.code is LLMStatusCode.LLM_DEVICE_MEM_ERROR


def test_memory_freed_with_its_instance_raises_it_with_param_invalid(world: SimWorld) -> None:
    p, _ = pair(v2=True, link=False)
    cache = p.cache_manager.allocate_cache(desc(), [CacheKey(P_ID, 1)])
    p.finalize()  # the pool goes with the instance
    with pytest.raises(MemoryAccessError, match="not inside a live allocation") as err:
        tensor_views(cache)
    assert err.value.code is LLMStatusCode.LLM_PARAM_INVALID


def test_a_deallocated_kv_cache_raises_it(world: SimWorld) -> None:
    p, _ = pair(v2=False, link=False)
    cache = p.kv_cache_manager.allocate_cache(desc(), [CacheKey(P_ID, 1)])
    p.kv_cache_manager.deallocate_cache(cache)
    with pytest.raises(MemoryAccessError, match="deallocated") as err:
        tensor_views(cache)
    assert err.value.code is LLMStatusCode.LLM_PARAM_INVALID


def test_an_except_clause_for_the_worlds_error_keeps_working(world: SimWorld) -> None:
    p, _ = pair(v2=True, link=False)
    cache = p.cache_manager.allocate_cache(desc(), [CacheKey(P_ID, 1)])
    world.memory.poison(cache.tensor_addrs[0], 8)
    with pytest.raises(SimError):
        tensor_views(cache)
