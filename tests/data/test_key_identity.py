"""Which keys are one engine key: the cluster id is no part of it (hixl ``CheckCacheKeys``, GE v1 flow
function). See ``docs/vendor_facts.md``, "Keys and memory ownership"."""

from __future__ import annotations

from typing import Callable

import pytest

import datadist_sim
from datadist_sim._status_v1 import LLM_ERRORS, as_code
from datadist_sim._world.world import SimWorld
from datadist_sim.llm_datadist.data_type import DataType
from datadist_sim.llm_datadist.status import LLMStatusCode
from datadist_sim.llm_datadist.v2.llm_types import BlocksCacheKey, CacheDesc, CacheKey

from ._books import books, fill
from .conftest import P_ID, pair

S = LLMStatusCode
NO_ID = 2**64 - 1
OTHER = 99  # a cluster id no instance has


def desc(batch: int = 2) -> CacheDesc:
    return CacheDesc(2, [batch, 4, 8], DataType.DT_FLOAT16)


def code_of(call: Callable[[], object]) -> LLMStatusCode:
    """The code of the exception ``call`` raises: ``llm_datadist``'s, or for a ``KvCacheManager`` the v1
    package's (its code read by name)."""
    with pytest.raises(LLM_ERRORS) as info:
        call()
    return as_code(info.value.status_code)


def refused_and_unchanged(world: SimWorld, call: Callable[[], object]) -> LLMStatusCode:
    """The code ``call`` fails with, after checking it changed no book of any instance."""
    before = books(world)
    code = code_of(call)
    assert books(world) == before
    return code


# -- v2 (CacheManager): CheckCacheKeys --------------------------------------------------------------


def test_keys_differing_only_in_cluster_id_are_one_key_and_bind_nothing(world: SimWorld) -> None:
    p, d = pair(v2=True)
    cm = p.cache_manager
    keys = [CacheKey(P_ID, 10), CacheKey(OTHER, 10)]
    assert refused_and_unchanged(world, lambda: cm.allocate_cache(desc(), keys)) is S.LLM_PARAM_INVALID
    dst = d.cache_manager.allocate_cache(desc())
    assert code_of(lambda: d.cache_manager.pull_cache(CacheKey(P_ID, 10), dst)) is S.LLM_KV_CACHE_NOT_EXIST
    cm.allocate_cache(desc(), [CacheKey(P_ID, 10)])  # the key was never bound


def test_two_keys_with_one_prefix_id_are_param_invalid(world: SimWorld) -> None:
    p, _ = pair(v2=True, link=False)
    cm = p.cache_manager
    across_clusters = [CacheKey(P_ID, NO_ID, prefix_id=5), CacheKey(OTHER, NO_ID, prefix_id=5)]
    assert (
        refused_and_unchanged(world, lambda: cm.allocate_cache(desc(), across_clusters))
        is S.LLM_PARAM_INVALID
    )
    # the prefix id is the key whatever the request ids say
    different_reqs = [CacheKey(P_ID, 1, prefix_id=5), CacheKey(P_ID, 2, prefix_id=5)]
    assert (
        refused_and_unchanged(world, lambda: cm.allocate_cache(desc(), different_reqs)) is S.LLM_PARAM_INVALID
    )


def test_placeholders_differing_only_in_cluster_are_param_invalid(world: SimWorld) -> None:
    p, _ = pair(v2=True, link=False)
    cm = p.cache_manager
    pads = [CacheKey(P_ID, NO_ID), CacheKey(OTHER, NO_ID)]
    assert refused_and_unchanged(world, lambda: cm.allocate_cache(desc(), pads)) is S.LLM_PARAM_INVALID
    # placeholders of different models are different keys
    cm.allocate_cache(desc(), [CacheKey(P_ID, NO_ID), CacheKey(OTHER, NO_ID, model_id=1)])


def test_prefix_key_and_request_key_with_one_id_and_model_collide_in_one_call(world: SimWorld) -> None:
    p, _ = pair(v2=True, link=False)
    cm = p.cache_manager
    mixed = [CacheKey(P_ID, 7), CacheKey(P_ID, NO_ID, prefix_id=7)]
    assert refused_and_unchanged(world, lambda: cm.allocate_cache(desc(), mixed)) is S.LLM_PARAM_INVALID
    # in separate calls they go to separate tables and both bind
    cm.allocate_cache(desc(batch=1), [CacheKey(P_ID, 7)])
    cm.allocate_cache(desc(batch=1), [CacheKey(P_ID, NO_ID, prefix_id=7)])


def test_placeholder_of_a_model_whose_blocks_key_is_bound_is_param_invalid(world: SimWorld) -> None:
    """A blocks key and a placeholder both name ``(UINT64_MAX, model_id)`` in the request table."""
    p, _ = pair(v2=True, link=False)
    cm = p.cache_manager
    cm.allocate_blocks_cache(CacheDesc(2, [4, 4, 8], DataType.DT_FLOAT16), BlocksCacheKey(P_ID, 0))
    keys = [CacheKey(P_ID, NO_ID), CacheKey(P_ID, 1)]
    assert refused_and_unchanged(world, lambda: cm.allocate_cache(desc(), keys)) is S.LLM_PARAM_INVALID
    cm.allocate_cache(desc(), [CacheKey(P_ID, NO_ID, model_id=1), CacheKey(P_ID, 1)])


def test_register_cache_with_keys_differing_only_in_cluster_is_param_invalid(world: SimWorld) -> None:
    """The real ``register_cache`` skips ``CheckCacheKeys`` and binds first-wins; the simulator refuses
    (a deliberate difference, docs/vendor_facts.md)."""
    p, _ = pair(v2=True, link=False)
    cm = p.cache_manager
    keys = [CacheKey(P_ID, 10), CacheKey(OTHER, 10)]
    call = lambda: cm.register_cache(desc(), [0x1000, 0x2000], keys)  # noqa: E731
    assert refused_and_unchanged(world, call) is S.LLM_PARAM_INVALID


# -- v1 (KvCacheManager): the GE flow function ------------------------------------------------------


def test_v1_keys_differing_only_in_cluster_bind_once_at_the_last_index(world: SimWorld) -> None:
    """GE does not refuse repeats: the id is bound once and its batch is the last one naming it, so a
    pull of ``CacheKey(P, 10)`` receives batch 1 (``cache_manager.cpp:90-113``)."""
    p, d = pair(v2=False)
    src = p.kv_cache_manager.allocate_cache(desc(), [CacheKey(P_ID, 10), CacheKey(OTHER, 10)])
    fill(src, 1)
    dst = d.kv_cache_manager.allocate_cache(desc(batch=1))
    d.kv_cache_manager.pull_cache(CacheKey(P_ID, 10), dst)
    for s, t in zip(datadist_sim.tensor_views(src), datadist_sim.tensor_views(dst)):
        assert s[1].tobytes() == t[0].tobytes()
    assert code_of(lambda: d.kv_cache_manager.pull_cache(CacheKey(P_ID, 10), dst)) is S.LLM_KV_CACHE_NOT_EXIST


def test_v1_repeated_placeholders_are_accepted(world: SimWorld) -> None:
    """The v1 ``allocate_cache`` docstring's own example pads with one placeholder three times."""
    p, d = pair(v2=False)
    pad = CacheKey(P_ID, NO_ID)
    src = p.kv_cache_manager.allocate_cache(desc(batch=4), [pad, pad, pad, CacheKey(P_ID, 3)])
    fill(src, 2)
    dst = d.kv_cache_manager.allocate_cache(desc(batch=1))
    d.kv_cache_manager.pull_cache(CacheKey(P_ID, 3), dst)
    for s, t in zip(datadist_sim.tensor_views(src), datadist_sim.tensor_views(dst)):
        assert s[3].tobytes() == t[0].tobytes()


def test_v1_key_already_bound_is_llm_failed_and_binds_nothing(world: SimWorld) -> None:
    """``LLM_CACHE_KEY_ALREADY_EXIST`` is not in the v1 public set, so it leaves as ``LLM_FAILED``."""
    p, _ = pair(v2=False, link=False)
    km = p.kv_cache_manager
    km.allocate_cache(desc(batch=1), [CacheKey(P_ID, 4)])
    again = [CacheKey(P_ID, 5), CacheKey(OTHER, 4)]
    assert refused_and_unchanged(world, lambda: km.allocate_cache(desc(), again)) is S.LLM_FAILED


def test_v1_keys_of_one_call_take_the_first_keys_model_id(world: SimWorld) -> None:
    p, d = pair(v2=False)
    p.kv_cache_manager.allocate_cache(desc(), [CacheKey(P_ID, 1), CacheKey(P_ID, 2, model_id=5)])
    dst = d.kv_cache_manager.allocate_cache(desc(batch=1))
    dm = d.kv_cache_manager
    assert code_of(lambda: dm.pull_cache(CacheKey(P_ID, 2, model_id=5), dst)) is S.LLM_KV_CACHE_NOT_EXIST
    dm.pull_cache(CacheKey(P_ID, 2), dst)


def test_v1_last_key_of_a_call_picks_the_table(world: SimWorld) -> None:
    """A prefix key followed by a request key lands in the request table (``llm_flow_service.cc:568-577``)."""
    p, d = pair(v2=False)
    keys = [CacheKey(P_ID, NO_ID, prefix_id=3), CacheKey(P_ID, 1)]
    src = p.kv_cache_manager.allocate_cache(desc(), keys)
    fill(src, 3)
    dst = d.kv_cache_manager.allocate_cache(desc(batch=1))
    dm = d.kv_cache_manager
    assert code_of(lambda: dm.pull_cache(CacheKey(P_ID, NO_ID, prefix_id=3), dst)) is S.LLM_KV_CACHE_NOT_EXIST
    dm.pull_cache(CacheKey(P_ID, 3), dst)  # the prefix id answers as a request id, and is consumed
    for s, t in zip(datadist_sim.tensor_views(src), datadist_sim.tensor_views(dst)):
        assert s[0].tobytes() == t[0].tobytes()
    assert code_of(lambda: dm.pull_cache(CacheKey(P_ID, 3), dst)) is S.LLM_KV_CACHE_NOT_EXIST
