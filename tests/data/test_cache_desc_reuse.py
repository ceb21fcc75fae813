"""A ``CacheDesc`` the caller reuses is never changed by the cache APIs; the API says the cache's kind.

hixl ``llm_utils.py`` at 49b96c60 (``pack_cache_desc(desc, is_blocks=...)``) and its
``tests/python/test_cache_descriptor_state.py`` at 7bf37005: a desc given to ``allocate_blocks_cache`` or
``register_blocks_cache`` (which succeeded or failed) and then to ``allocate_cache`` or ``register_cache``
makes a regular cache; the desc packs as it did before the calls.
"""

from __future__ import annotations

from itertools import product
from typing import Any, List

import numpy as np
import pytest

from datadist_sim import Fault
from datadist_sim._world.world import SimWorld
from datadist_sim.llm_datadist.data_type import DataType
from datadist_sim.llm_datadist.status import LLMException, LLMStatusCode
from datadist_sim.llm_datadist.v2.cache_manager import CacheManager
from datadist_sim.llm_datadist.v2.llm_types import Cache, CacheDesc, CacheKey
from datadist_sim.llm_datadist.v2.llm_utils import pack_cache_desc

from .conftest import P_ID, pair

_KEEP: List[np.ndarray] = []


def own_addrs(n: int = 2, nbytes: int = 1024) -> List[int]:
    arrays = [np.zeros(nbytes, dtype=np.uint8) for _ in range(n)]
    _KEEP.extend(arrays)
    return [a.ctypes.data for a in arrays]


def make(api: str, cm: CacheManager, desc: CacheDesc, **kw: Any) -> Cache:
    if api.startswith("register"):
        return getattr(cm, api)(desc, own_addrs(), **kw)  # type: ignore[no-any-return]
    return getattr(cm, api)(desc, **kw)  # type: ignore[no-any-return]


BLOCKS = ("allocate_blocks_cache", "register_blocks_cache")
REGULAR = ("allocate_cache", "register_cache")


def new_desc() -> CacheDesc:
    return CacheDesc(2, [4, 8, 16], DataType.DT_FLOAT16)


@pytest.mark.parametrize(("blocks_api", "regular_api"), list(product(BLOCKS, REGULAR)))
def test_a_desc_used_for_blocks_makes_a_regular_cache_afterwards(
    world: SimWorld, blocks_api: str, regular_api: str
) -> None:
    p, _ = pair(v2=True, link=False)
    desc = new_desc()
    before = pack_cache_desc(desc)
    blocks = make(blocks_api, p.cache_manager, desc)
    assert pack_cache_desc(desc) == before
    regular = make(regular_api, p.cache_manager, desc)
    assert blocks.is_blocks_cache
    assert not regular.is_blocks_cache
    assert pack_cache_desc(desc) == before
    # the engine holds it as a regular cache: a copy by batch works on it, as on no blocks cache
    p.cache_manager.copy_cache(regular, regular, 1, 0)


@pytest.mark.parametrize("api", BLOCKS + REGULAR)
def test_the_api_says_the_kind_whatever_the_desc_flag(world: SimWorld, api: str) -> None:
    p, _ = pair(v2=True, link=False)
    for flag in (False, True):
        desc = new_desc()
        desc._is_blocks = flag
        cache = make(api, p.cache_manager, desc)
        assert cache.is_blocks_cache is (api in BLOCKS)
        assert desc._is_blocks is flag


@pytest.mark.parametrize(("blocks_api", "regular_api"), list(product(BLOCKS, REGULAR)))
def test_a_failed_blocks_call_leaves_the_desc_as_it_was(
    world: SimWorld, blocks_api: str, regular_api: str
) -> None:
    p, _ = pair(v2=True, link=False)
    desc = new_desc()
    before = pack_cache_desc(desc)
    world.faults.add(Fault.fail(LLMStatusCode.LLM_FAILED, op=blocks_api, nth=1))  # the engine call fails
    with pytest.raises(LLMException) as caught:
        make(blocks_api, p.cache_manager, desc)
    assert caught.value.status_code is LLMStatusCode.LLM_FAILED
    assert pack_cache_desc(desc) == before
    assert not make(regular_api, p.cache_manager, desc).is_blocks_cache


def test_a_regular_cache_made_first_keeps_its_desc_when_the_desc_is_reused_for_blocks(
    world: SimWorld,
) -> None:
    p, _ = pair(v2=True, link=False)
    desc = new_desc()
    regular = p.cache_manager.allocate_cache(desc, [CacheKey(P_ID, 1)])
    before = pack_cache_desc(regular.cache_desc)
    p.cache_manager.allocate_blocks_cache(desc)
    assert pack_cache_desc(regular.cache_desc) == before
    assert not regular.is_blocks_cache
