"""``unlink_clusters`` on the hixl backend (``llm.TransferBackend = "hixl"``) against a peer that is hung,
cut off or gone: the codes and the time the vendor's engine gives (chain in ``docs/vendor_facts.md``,
"hixl-backend unlink against a hung peer", and ``_world/hixl_disconnect.py``).

The engine's disconnect has its own fixed 30 s socket timeouts (hixl ``link_mgr/hixl_entity.cc:19,
76-82``), not the call's ``timeout``; it never gives ``LLM_TIMEOUT``: a hung peer is waited out (the
reply's read retries on ``EAGAIN``, ``common/msg_handler_plugin.cc:155-161``), one that is cut off or
gone makes the disconnect skip the reply (``adxl/channel_msg_handler.cc:585-586, 608-611``). All times
are simulated.
"""

from __future__ import annotations

from typing import Tuple

import pytest
from tests.fabric.conftest import DECODE_IP, PROMPT_IP, info
from tests.fabric.test_hixl_backend import P_PORT, hixl, hixl_pair, to_prompt

from datadist_sim import BlocksForever, Fault, SimWorld
from datadist_sim.llm_datadist import LLMRole, LLMStatusCode
from datadist_sim.llm_datadist.v2.llm_datadist import LLMDataDist

S = LLMStatusCode
CALL_TIMEOUT_MS = 1000
"""Far below the engine's 30 s: a wait past it that is not LLM_TIMEOUT shows the call's own is unused."""


def linked() -> Tuple[LLMDataDist, LLMDataDist]:
    """The Prompt (cluster 0) and the Decoder (1), the Decoder holding a link to the Prompt."""
    p, d = hixl_pair()
    assert d.link_clusters([to_prompt()]) == (S.LLM_SUCCESS, [S.LLM_SUCCESS])
    return p, d


def test_hixl_unlink_from_a_hung_peer_waits_out_the_hang_then_succeeds_never_llm_timeout(
    world: SimWorld,
) -> None:
    """Peer alive but not answering for 95 s: the engine retries the reply's 30 s reads until the peer
    answers (``msg_handler_plugin.cc:155-161``), so the call returns ``LLM_SUCCESS`` when the hang ends,
    not ``LLM_TIMEOUT`` at the call's timeout nor at the disconnect's 30 s."""
    _, d = linked()
    world.faults.add(Fault.hang(0, heal_after_s=95.0))
    start = world.now()
    assert d.unlink_clusters([to_prompt()], CALL_TIMEOUT_MS) == (S.LLM_SUCCESS, [S.LLM_SUCCESS])
    assert world.now() - start == pytest.approx(95.0, abs=0.01)
    assert world.links() == []


def test_hixl_force_unlink_from_a_hung_peer_waits_the_same(world: SimWorld) -> None:
    """``force`` is ignored by the hixl engine (``hixl_transfer_engine.cc:195``): the same wait."""
    _, d = linked()
    world.faults.add(Fault.hang(0, heal_after_s=40.0))
    start = world.now()
    assert d.unlink_clusters([to_prompt()], CALL_TIMEOUT_MS, force=True) == (S.LLM_SUCCESS, [S.LLM_SUCCESS])
    assert world.now() - start == pytest.approx(40.0, abs=0.01)


def test_hixl_unlink_from_a_hung_peer_that_dies_in_the_wait_is_failed_and_drops_the_link(
    world: SimWorld,
) -> None:
    """The hung peer is killed 50 s in: the reply's read sees the socket close (``msg_handler_plugin.cc:
    165-167``), ``RecvMsg`` fails: ``LLM_FAILED`` then, and the entity is gone anyway
    (``comm_entity_manager.cc:48-56``)."""
    _, d = linked()
    start = world.now()
    world.faults.add(Fault.hang(0))
    world.faults.add(Fault.kill(0, start_s=start + 50.0))
    assert d.unlink_clusters([to_prompt()], CALL_TIMEOUT_MS) == (S.LLM_FAILED, [S.LLM_FAILED])
    assert world.now() - start == pytest.approx(50.0, abs=0.01)
    assert world.links() == []


def test_hixl_unlink_from_a_peer_hung_for_good_never_returns(world: SimWorld) -> None:
    """A hang nothing ends: the real call never returns; the simulator raises ``BlocksForever`` rather
    than hang the test."""
    _, d = linked()
    world.faults.add(Fault.hang(0))
    with pytest.raises(BlocksForever):
        d.unlink_clusters([to_prompt()], CALL_TIMEOUT_MS)


def test_hixl_unlink_across_a_partition_succeeds_after_the_30s_disconnect_timeout(world: SimWorld) -> None:
    """The disconnect's connect is dropped until its 30 s send timeout; its failure is no error
    (``channel_msg_handler.cc:585-586``, ``msg_handler_plugin.cc:108-115``), so no request goes and no
    reply is awaited (``:608-611``): ``LLM_SUCCESS`` after 30 s, the link dropped."""
    _, d = linked()
    world.faults.add(Fault.partition(0, 1))
    start = world.now()
    assert d.unlink_clusters([to_prompt()], CALL_TIMEOUT_MS) == (S.LLM_SUCCESS, [S.LLM_SUCCESS])
    assert world.now() - start == pytest.approx(30.0, abs=0.01)
    assert world.links() == []


def test_hixl_unlink_from_a_killed_peer_succeeds_at_once(world: SimWorld) -> None:
    """A dead peer refuses the disconnect's connect, which is no error: ``LLM_SUCCESS`` without a wait."""
    _, d = linked()
    world.faults.add(Fault.kill(0))
    world.faults.tick()
    start = world.now()
    assert d.unlink_clusters([to_prompt()], CALL_TIMEOUT_MS) == (S.LLM_SUCCESS, [S.LLM_SUCCESS])
    assert world.now() - start < 1.0
    assert world.links() == []


def test_hixl_relink_after_unlinking_a_hung_peer_succeeds(world: SimWorld) -> None:
    """The unlink drops the entity, so once the peer answers again a link to it is made anew."""
    _, d = linked()
    world.faults.add(Fault.hang(0, heal_after_s=10.0))
    assert d.unlink_clusters([to_prompt()], CALL_TIMEOUT_MS)[0] is S.LLM_SUCCESS
    assert d.link_clusters([info(0, P_PORT, remote_ip=PROMPT_IP, local_ip=DECODE_IP)]) == (
        S.LLM_SUCCESS,
        [S.LLM_SUCCESS],
    )
    assert world.links() == [(1, 0)]


def test_hixl_unlink_of_a_hung_and_a_partitioned_peer_waits_for_the_longer_not_the_sum(
    world: SimWorld,
) -> None:
    """The engine unlinks the clusters of one call in parallel (``hixl_transfer_engine.cc:197-218``): a
    peer hung for 10 s and one cut off (30 s) end the call after 30 s, not 40."""
    _, d = linked()
    third_ip, third_port = "192.168.3.1", 26002
    hixl(LLMRole.PROMPT, 2, third_ip, third_port)
    to_third = info(2, third_port, remote_ip=third_ip, local_ip=DECODE_IP)
    assert d.link_clusters([to_third]) == (S.LLM_SUCCESS, [S.LLM_SUCCESS])
    world.faults.add(Fault.hang(0, heal_after_s=10.0))
    world.faults.add(Fault.partition(1, 2))
    start = world.now()
    assert d.unlink_clusters([to_prompt(), to_third], CALL_TIMEOUT_MS) == (
        S.LLM_SUCCESS,
        [S.LLM_SUCCESS, S.LLM_SUCCESS],
    )
    assert world.now() - start == pytest.approx(30.0, abs=0.01)
    assert world.links() == []
