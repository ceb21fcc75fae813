"""The gate both one-pass pulls open first (``pull_gate.ready_link``): a pull goes whole in one step only
over a link whose every check it makes would pass, and is left to the planned path otherwise. Each test
closes the gate by one condition and checks that it is closed, then that the same pull through the face
still gives what the planned path gives (``test_pull_paths_agree`` compares the two paths at large).
Also: the poison flag the gate reads follows the poisoned ranges, and the copy's parties are named
around a commit that copies through the address space."""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Tuple

import numpy as np
import pytest

from datadist_sim import Fault
from datadist_sim._world import ownership
from datadist_sim._world.pull_gate import ready_link
from datadist_sim._world.world import SimWorld
from datadist_sim.llm_datadist.status import LLMException
from datadist_sim.llm_datadist.status import LLMStatusCode as S
from datadist_sim.llm_datadist.v2.llm_types import CacheKey

from .conftest import D_ID, P_ID, pair
from .test_cache_manager_v2 import desc, fill, views

Close = Callable[[SimWorld, pytest.MonkeyPatch], Any]
"""Closes the gate by one condition (undone by the monkeypatch, or by the function it returns)."""


def _no_link(world: SimWorld, mp: pytest.MonkeyPatch) -> None:
    mp.delitem(world.node(D_ID).peers, P_ID)  # type: ignore[union-attr]


def _broken(world: SimWorld, mp: pytest.MonkeyPatch) -> None:
    mp.setattr(world.node(D_ID).peers[P_ID], "broken", True)  # type: ignore[union-attr]


def _peer_lost(world: SimWorld, mp: pytest.MonkeyPatch) -> None:
    mp.setattr(world.node(D_ID).peers[P_ID], "peer_lost", True)  # type: ignore[union-attr]


def _killed(world: SimWorld, mp: pytest.MonkeyPatch) -> None:
    mp.setattr(world, "killed", {P_ID})


def _fault_rule(world: SimWorld, mp: pytest.MonkeyPatch) -> Callable[[], None]:
    rule = world.faults.add(Fault.fail(S.LLM_FAILED, op="push_cache"))  # not even on a pull
    return lambda: world.faults.remove(rule)


def _poison(world: SimWorld, mp: pytest.MonkeyPatch) -> None:
    mp.setattr(world.memory, "has_poison", True)


def _no_local_store(world: SimWorld, mp: pytest.MonkeyPatch) -> None:
    mp.delitem(world.caches, D_ID)


def _no_peer_store(world: SimWorld, mp: pytest.MonkeyPatch) -> None:
    mp.delitem(world.caches, P_ID)


def _no_peer_instance(world: SimWorld, mp: pytest.MonkeyPatch) -> None:
    real = world.node
    mp.setattr(world, "node", lambda cluster_id: None if cluster_id == P_ID else real(cluster_id))


def _caller_dead(world: SimWorld, mp: pytest.MonkeyPatch) -> None:
    mp.setattr(world.node(D_ID), "alive", False)


def _peer_dead(world: SimWorld, mp: pytest.MonkeyPatch) -> None:
    mp.setattr(world.node(P_ID), "alive", False)


def _one_sided(world: SimWorld, mp: pytest.MonkeyPatch) -> None:
    mp.setattr(world.node(D_ID).peers[P_ID], "by_table", True)  # type: ignore[union-attr]


def _not_ready_yet(world: SimWorld, mp: pytest.MonkeyPatch) -> None:
    mp.setattr(world.node(D_ID).peers[P_ID], "since", world.now() + 1.0)  # type: ignore[union-attr]


def _peer_forgot(world: SimWorld, mp: pytest.MonkeyPatch) -> None:
    mp.delitem(world.node(P_ID).peers, D_ID)  # type: ignore[union-attr]


def _hixl_other_instance(world: SimWorld, mp: pytest.MonkeyPatch) -> None:
    """On the hixl backend the link is one-sided: the peer need not hold it, but it must have been made
    to the live instance, not one that finalized and came back under the same id."""
    mp.delitem(world.node(P_ID).peers, D_ID)  # type: ignore[union-attr]
    mp.setattr(world.node(D_ID), "hixl", True)
    mp.setattr(world.node(D_ID).peers[P_ID], "instance", object())  # type: ignore[union-attr]


CLOSERS: List[Close] = [
    _no_link,
    _broken,
    _peer_lost,
    _killed,
    _fault_rule,
    _poison,
    _no_local_store,
    _no_peer_store,
    _no_peer_instance,
    _caller_dead,
    _peer_dead,
    _one_sided,
    _not_ready_yet,
    _peer_forgot,
    _hixl_other_instance,
]


def _linked(world: SimWorld) -> Tuple[Any, Any, Any]:
    """A linked v2 pair, a keyed one-batch cache on the Prompt (filled) and one on the Decode; returns
    the Decode's manager and both caches."""
    p, d = pair(v2=True)
    src = p.cache_manager.allocate_cache(desc(batch=1), [CacheKey(P_ID, 1)])
    dst = d.cache_manager.allocate_cache(desc(batch=1))
    fill(world, src, seed=3)
    return d.cache_manager, src, dst


def test_the_gate_opens_on_a_healthy_link_and_hands_over_both_stores(world: SimWorld) -> None:
    _linked(world)
    node = world.node(D_ID)
    assert node is not None
    ready = ready_link(world, node, P_ID)
    assert ready is not None
    peer, local, store, now = ready
    assert peer is node.peers[P_ID]
    assert local is world.caches[D_ID]
    assert store is world.caches[P_ID]
    assert now == world.now()


@pytest.mark.parametrize("close", CLOSERS, ids=lambda f: f.__name__.strip("_"))
def test_each_condition_closes_the_gate(world: SimWorld, close: Close) -> None:
    _linked(world)
    node = world.node(D_ID)
    assert node is not None
    with pytest.MonkeyPatch.context() as mp:
        undo = close(world, mp)
        assert ready_link(world, node, P_ID) is None
    if undo is not None:
        undo()
    assert ready_link(world, node, P_ID) is not None, "the condition gone, the gate opens again"


@pytest.mark.parametrize("close", [_broken, _fault_rule, _poison])
def test_a_pull_the_gate_turns_away_still_runs_as_the_planned_path_runs_it(
    world: SimWorld, close: Close
) -> None:
    """The gate decides only which way a pull goes: over a broken link it is still the documented
    ``LLM_NOT_YET_LINK`` with nothing written and the key kept; with a rule loaded that does not match
    it, or poison elsewhere, the bytes move and the key is consumed."""
    manager, src, dst = _linked(world)
    before = [v.copy() for v in views(world, dst)]
    with pytest.MonkeyPatch.context() as mp:
        undo = close(world, mp)
        if close is _broken:
            with pytest.raises(LLMException) as failed:
                manager.pull_cache(CacheKey(P_ID, 1), dst)
            assert failed.value.status_code is S.LLM_NOT_YET_LINK
            for new, old in zip(views(world, dst), before):
                np.testing.assert_array_equal(new, old)
            assert world.caches[P_ID].key_table, "a failed pull consumes no key"
            return
        manager.pull_cache(CacheKey(P_ID, 1), dst)
    if undo is not None:
        undo()
    for s, t in zip(views(world, src), views(world, dst)):
        np.testing.assert_array_equal(t, s)
    assert not world.caches[P_ID].key_table, "the pull consumed its key"


def test_the_poison_flag_follows_the_poisoned_ranges(world: SimWorld) -> None:
    """``has_poison`` is kept where the poisoned ranges change: set by a poisoning, kept while any range
    stays, cleared by healing the last one, by healing all, and by freeing the poisoned allocation."""
    manager, _, dst = _linked(world)
    memory = world.memory
    assert memory.has_poison is False
    base = dst.tensor_addrs[0]
    memory.poison(base, 16)
    memory.poison(base + 64, 16)
    assert memory.has_poison is True
    memory.heal(base, 16)
    assert memory.has_poison is True, "one range is still poisoned"
    memory.heal(base + 64, 1)
    assert memory.has_poison is False
    memory.poison(base, 16)
    memory.heal()
    assert memory.has_poison is False
    memory.poison(base, 16)
    manager.deallocate_cache(dst)
    assert memory.has_poison is False, "freeing the allocation clears its poison"


def test_a_commit_through_the_address_space_names_the_copy_s_parties(
    world: SimWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pull the one pass cannot take (registered memory on the Prompt: no pool views) commits range by
    range through the address space, with the pull's parties named for the copy (the caller's memory
    is written, from the peer's), and named no longer once it is done."""
    p, d = pair(v2=True)
    buffers = [np.arange(8 * 16 * 2, dtype=np.uint8) for _ in range(4)]  # one batch of 8 x 16 float16
    src = p.cache_manager.register_cache(desc(batch=1), [b.ctypes.data for b in buffers], [CacheKey(P_ID, 1)])
    dst = d.cache_manager.allocate_cache(desc(batch=1))
    seen: List[Optional[Tuple[object, object]]] = []
    real = world.space_copy

    def spy(ranges: List[Tuple[int, int, int]]) -> None:
        seen.append(ownership.copy_parties())
        real(ranges)

    monkeypatch.setattr(world, "space_copy", spy)
    d.cache_manager.pull_cache(CacheKey(P_ID, 1), dst)
    assert seen == [(D_ID, P_ID)]
    assert ownership.copy_parties() is None
    for b, t in zip(buffers, views(world, dst)):
        np.testing.assert_array_equal(t.view(np.uint8).ravel(), b)
    assert src.cache_id
