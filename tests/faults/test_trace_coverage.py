"""Every public engine method of the face is traced as one call, whatever it calls inside."""

from __future__ import annotations

import inspect
from typing import List

import pytest
from tests.data.conftest import P_ID, pair
from tests.data.test_cache_manager_v2 import desc

from datadist_sim import SimWorld
from datadist_sim.llm_datadist.v2.cache_manager import CacheManager
from datadist_sim.llm_datadist.v2.llm_datadist import LLMDataDist
from datadist_sim.llm_datadist.v2.llm_types import CacheKey
from datadist_sim.llm_datadist_v1.kv_cache_manager import KvCacheManager

UNTRACED = {
    "check_cache_key",  # a static argument check: no engine, no instance
    "set_is_call_linked",  # bookkeeping the face does for itself
    "is_initialized",  # a state query
}


def _public_methods(cls: type) -> List[str]:
    return [
        name
        for name, member in inspect.getmembers(cls)
        if not name.startswith("_")
        and callable(member)
        and not isinstance(inspect.getattr_static(cls, name), property)
    ]


@pytest.mark.parametrize("cls", [CacheManager, KvCacheManager, LLMDataDist])
def test_every_public_method_is_traced(cls: type) -> None:
    missing = [
        n for n in _public_methods(cls) if n not in UNTRACED and not hasattr(getattr(cls, n), "__wrapped__")
    ]
    assert not missing


def test_a_call_is_traced_once_with_its_outcome_and_arguments(world: SimWorld) -> None:
    p, _ = pair(v2=True)
    before = len(world.trace.calls())
    p.cache_manager.allocate_cache(desc(), [CacheKey(P_ID, 5)])
    with pytest.raises(TypeError):
        p.cache_manager.allocate_cache("desc")  # type: ignore[arg-type]
    calls = world.trace.calls()[before:]
    assert [(c.op, c.outcome, c.cluster_id) for c in calls] == [
        ("allocate_cache", "LLM_SUCCESS", P_ID),
        ("allocate_cache", "TypeError", P_ID),
    ]
    assert "req_id=5" in calls[0].args
    assert calls[1].args == "'desc'"


def test_a_list_argument_changed_after_the_call_is_traced_as_it_was_at_the_call(world: SimWorld) -> None:
    p, _ = pair(v2=True)
    keys = [CacheKey(P_ID, 7)]
    p.cache_manager.allocate_cache(desc(), keys)
    keys[0] = CacheKey(P_ID, 8)
    keys.append(CacheKey(P_ID, 9))
    (call,) = [c for c in world.trace.calls() if c.op == "allocate_cache"]
    assert "req_id=7" in call.args
    assert "req_id=8" not in call.args
    assert "req_id=9" not in call.args
