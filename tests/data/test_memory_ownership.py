"""Memory belongs to one cluster: no registration of, and no push into, memory another cluster owns.
See ``_world/ownership.py`` and ``docs/vendor_facts.md``."""

from __future__ import annotations

from typing import Callable, List, Optional

import numpy as np
import pytest

from datadist_sim._world.world import SimWorld
from datadist_sim.llm_datadist.configs import LLMRole
from datadist_sim.llm_datadist.data_type import DataType
from datadist_sim.llm_datadist.status import LLMException, LLMStatusCode
from datadist_sim.llm_datadist.v2.llm_types import (
    BlocksCacheKey,
    CacheDesc,
    CacheKey,
    LayerSynchronizer,
    TransferConfig,
)

from ._books import books, contents, fill
from .conftest import D_ID, P_ID, make, pair, v2_options

S = LLMStatusCode
X_ID = 3  # a third instance, linked to nobody


class Ready(LayerSynchronizer):
    def synchronize_layer(self, layer_index: int, timeout_in_millis: Optional[int]) -> bool:
        return True


def desc(batch: int = 2) -> CacheDesc:
    return CacheDesc(4, [batch, 4, 8], DataType.DT_FLOAT16)


def code_of(call: Callable[[], object]) -> LLMStatusCode:
    with pytest.raises(LLMException) as info:
        call()
    return info.value.status_code


def test_register_cache_of_another_clusters_allocated_cache_is_param_invalid(world: SimWorld) -> None:
    p, d = pair(v2=True, link=False)
    theirs = p.cache_manager.allocate_cache(desc())
    fill(theirs, 1)
    before, data = books(world), contents(theirs)
    call = lambda: d.cache_manager.register_cache(desc(), list(theirs.tensor_addrs))  # noqa: E731
    assert code_of(call) is S.LLM_PARAM_INVALID
    assert books(world) == before
    assert contents(theirs) == data


def test_register_blocks_cache_inside_another_clusters_registered_memory_is_param_invalid(
    world: SimWorld,
) -> None:
    p, d = pair(v2=True, link=False)
    buffers = [np.zeros(2 * 4 * 8, np.float16) for _ in range(4)]
    p.cache_manager.register_cache(desc(), [int(b.ctypes.data) for b in buffers])
    before = books(world)
    inside = [int(b.ctypes.data) + 64 for b in buffers]  # a range that starts inside theirs
    bdesc = CacheDesc(4, [1, 4, 8], DataType.DT_FLOAT16)
    call = lambda: d.cache_manager.register_blocks_cache(bdesc, inside, BlocksCacheKey(D_ID, 0))  # noqa: E731
    assert code_of(call) is S.LLM_PARAM_INVALID
    assert books(world) == before


def test_register_cache_of_own_allocated_cache_is_allowed(world: SimWorld) -> None:
    p, _ = pair(v2=True, link=False)
    mine = p.cache_manager.allocate_cache(desc())
    p.cache_manager.register_cache(desc(), list(mine.tensor_addrs), [CacheKey(P_ID, 1)])


def _transfer(p: object, src: object, addrs: List[int]) -> List[Optional[LLMStatusCode]]:
    task = p.cache_manager.transfer_cache_async(src, Ready(), [TransferConfig(D_ID, addrs)])  # type: ignore[attr-defined]
    return task.get_results()  # type: ignore[no-any-return]


@pytest.mark.parametrize("target", ["third cluster", "sender", "nothing"])
def test_transfer_config_dst_addrs_not_of_the_destination_write_nothing(world: SimWorld, target: str) -> None:
    p, d = pair(v2=True)
    x = make(LLMRole.DECODER, X_ID, v2_options())
    src = p.cache_manager.allocate_cache(desc())
    fill(src, 2)
    victim = {"third cluster": x.cache_manager.allocate_cache(desc(batch=1)), "sender": src}.get(target)
    landing = d.cache_manager.allocate_cache(desc(batch=1))
    addrs = [0x1000 * (i + 1) for i in range(4)] if victim is None else list(victim.tensor_addrs)
    watched = [c for c in (victim, landing) if c is not None]
    before, data = books(world), contents(*watched)
    assert _transfer(p, src, addrs) == [S.LLM_PARAM_INVALID]
    assert books(world) == before
    assert contents(*watched) == data


def test_transfer_config_dst_addrs_inside_a_destination_cache_land(world: SimWorld) -> None:
    """The control: the destination's own memory, also from an offset inside one of its tensors."""
    p, d = pair(v2=True)
    src = p.cache_manager.allocate_cache(desc(batch=1))
    fill(src, 3)
    landing = d.cache_manager.allocate_cache(desc(batch=2))
    row = desc(batch=1).size
    assert _transfer(p, src, [a + row for a in landing.tensor_addrs]) == [S.LLM_SUCCESS]
    assert contents(src) == [c[row:] for c in contents(landing)]


def test_raw_pointer_registered_by_another_cluster_is_allowed_when_clusters_run_in_separate_processes(
    world: SimWorld,
) -> None:
    """In a fabric each cluster is its own process, so one number can be two processes' own memory;
    simulated addresses stay checked there."""
    p, d = pair(v2=True, link=False)
    buffers = [np.zeros(2 * 4 * 8, np.float16) for _ in range(4)]
    addrs = [int(b.ctypes.data) for b in buffers]
    p.cache_manager.register_cache(desc(), addrs)
    assert code_of(lambda: d.cache_manager.register_cache(desc(), addrs)) is S.LLM_PARAM_INVALID
    world.memory.raw_per_process = True  # what the fabric's address space says
    d.cache_manager.register_cache(desc(), addrs)
    theirs = p.cache_manager.allocate_cache(desc())
    call = lambda: d.cache_manager.register_cache(desc(), list(theirs.tensor_addrs))  # noqa: E731
    assert code_of(call) is S.LLM_PARAM_INVALID
