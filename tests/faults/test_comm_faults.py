"""Rank-table links (``link`` / ``query_register_mem_status``) under world faults, and what a timed-out
transfer leaves of such a link."""

from __future__ import annotations

from typing import Callable, List, Tuple

import pytest
from tests.data.conftest import D_ID, P_ID, make, v2_options
from tests.data.test_cache_manager_v2 import desc
from tests.fabric.test_comm_link import RANK_TABLE

from datadist_sim import Fault, SimWorld
from datadist_sim.llm_datadist.configs import LLMRole
from datadist_sim.llm_datadist.status import LLMException
from datadist_sim.llm_datadist.status import LLMStatusCode as S
from datadist_sim.llm_datadist.v2.llm_datadist import LLMDataDist
from datadist_sim.llm_datadist.v2.llm_types import CacheKey, RegisterMemStatus

RANKS = {P_ID: 0, D_ID: 1}


def code_of(call: Callable[[], object]) -> S:
    try:
        call()
    except LLMException as exc:
        return exc.status_code
    return S.LLM_SUCCESS


def _poll(dd: LLMDataDist, comm_id: int) -> List[RegisterMemStatus]:
    seen = []
    for _ in range(1000):
        seen.append(dd.query_register_mem_status(comm_id))
        if seen[-1] is not RegisterMemStatus.PREPARING:
            return seen
    raise AssertionError("never left PREPARING")


def _pair(total_time: str = "3") -> Tuple[LLMDataDist, LLMDataDist]:
    p = make(LLMRole.PROMPT, P_ID, v2_options(**{"llm.LinkTotalTime": total_time}))
    d = make(LLMRole.DECODER, D_ID, v2_options(**{"llm.LinkTotalTime": total_time}))
    return p, d


@pytest.mark.parametrize("action", ["partition", "hang"])
def test_rank_table_link_that_a_fault_cuts_off_fails_after_link_total_time(
    world: SimWorld, action: str
) -> None:
    p, d = _pair()
    rule = world.faults.add(Fault.partition(P_ID, D_ID) if action == "partition" else Fault.hang(P_ID))
    start = world.now()
    p_comm = p.link("pd", RANKS, RANK_TABLE)
    d_comm = d.link("pd", RANKS, RANK_TABLE)
    assert _poll(d, d_comm)[-1] is RegisterMemStatus.FAILED
    assert world.now() - start >= 3.0  # the exchange waited llm.LinkTotalTime
    assert p.query_register_mem_status(p_comm) is RegisterMemStatus.FAILED
    assert not world.is_linked(P_ID, D_ID)
    dst = d.cache_manager.allocate_cache(desc(batch=1))
    assert code_of(lambda: d.cache_manager.pull_cache(CacheKey(P_ID, 1), dst)) is S.LLM_NOT_YET_LINK
    world.faults.remove(rule)  # healed: a new link is made as usual
    d.unlink(d_comm)
    p.unlink(p_comm)
    p_comm = p.link("pd", RANKS, RANK_TABLE)
    d_comm = d.link("pd", RANKS, RANK_TABLE)
    assert _poll(d, d_comm)[-1] is RegisterMemStatus.OK
    assert world.is_linked(P_ID, D_ID)


def test_rank_table_link_whose_member_was_killed_fails(world: SimWorld) -> None:
    p, d = _pair()
    p.link("pd", RANKS, RANK_TABLE)
    d_comm = d.link("pd", RANKS, RANK_TABLE)
    world.faults.add(Fault.kill(P_ID))
    assert _poll(d, d_comm)[-1] is RegisterMemStatus.FAILED


def test_member_that_never_joins_fails_after_30_s_when_link_total_time_is_0(world: SimWorld) -> None:
    d = make(LLMRole.DECODER, D_ID, v2_options())
    start = world.now()
    comm = d.link("lonely", RANKS, RANK_TABLE)
    assert _poll(d, comm)[-1] is RegisterMemStatus.FAILED
    waited = world.now() - start
    assert 30.0 <= waited < 30.0 + 2 * world.config.poll_interval_s


def test_partition_after_the_link_is_ok_leaves_it_ok(world: SimWorld) -> None:
    p, d = _pair()
    p_comm = p.link("pd", RANKS, RANK_TABLE)
    d_comm = d.link("pd", RANKS, RANK_TABLE)
    assert _poll(d, d_comm)[-1] is RegisterMemStatus.OK
    world.faults.add(Fault.partition(P_ID, D_ID))
    assert p.query_register_mem_status(p_comm) is RegisterMemStatus.OK
    assert d.query_register_mem_status(d_comm) is RegisterMemStatus.OK


@pytest.mark.parametrize("keeps", [False, True], ids=["documented", "code"])
def test_timed_out_transfer_on_a_rank_table_link_breaks_it_unless_the_code_switch_is_on(
    world: SimWorld, keeps: bool
) -> None:
    """Default (status table): the link is unrecoverable, later pulls get NOT_YET_LINK until unlink and
    link. ``comm_timeout_keeps_link`` (hixl comm_entity.cc): only the stream is aborted, pulls go on."""
    world.config.comm_timeout_keeps_link = keeps
    p, d = _pair()
    p_comm = p.link("pd", RANKS, RANK_TABLE)
    d_comm = d.link("pd", RANKS, RANK_TABLE)
    assert _poll(d, d_comm)[-1] is RegisterMemStatus.OK
    p.cache_manager.allocate_cache(desc(batch=2), [CacheKey(P_ID, 1), CacheKey(P_ID, 2)])
    dst = d.cache_manager.allocate_cache(desc(batch=2))
    world.faults.add(Fault.timeout(op="pull_cache", nth=1))
    assert code_of(lambda: d.cache_manager.pull_cache(CacheKey(P_ID, 1), dst)) is S.LLM_TIMEOUT
    second = code_of(lambda: d.cache_manager.pull_cache(CacheKey(P_ID, 2), dst, batch_index=1))
    assert second is (S.LLM_SUCCESS if keeps else S.LLM_NOT_YET_LINK)
    assert d.query_register_mem_status(d_comm) is RegisterMemStatus.OK  # the status never changes
    if not keeps:
        d.unlink(d_comm)
        p.unlink(p_comm)
        p_comm = p.link("pd", RANKS, RANK_TABLE)
        d_comm = d.link("pd", RANKS, RANK_TABLE)
        assert _poll(d, d_comm)[-1] is RegisterMemStatus.OK
        assert (
            code_of(lambda: d.cache_manager.pull_cache(CacheKey(P_ID, 2), dst, batch_index=1))
            is S.LLM_SUCCESS
        )
