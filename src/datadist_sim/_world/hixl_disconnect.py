"""The teardown a hixl-backend ``unlink_clusters`` does for one linked peer: the engine's ``Disconnect``.

The chain (hixl, Aug 2026 snapshot 9ed283b; the read loop is the same at 2c8c56a): ``UnlinkCluster``
destroys the entity (``hixl_transfer_engine.cc:186-191``), whose ``Finalize`` disconnects with a fixed
30 s, whatever the call's ``timeout`` (``link_mgr/hixl_entity.cc:19, 76-82``); on the default engine
(``CommEngine``, ``engine_factory.cc:63-76``) that is adxl ``ChannelMsgHandler::Disconnect``
(``adxl/channel_msg_handler.cc:638-683``):

- it opens a fresh control connection whose failure is no error (the connect's ``default_err`` is
  ``SUCCESS``, ``:585-586``; ``common/msg_handler_plugin.cc:112-115``): a peer that is gone refuses it at
  once, a partition drops it until the socket's 30 s send timeout (``:108-111``, which ``connect``
  honours); then no request is sent, the client channel is destroyed (``:666-673``) and the missing
  reply is not awaited (``:608-611``): ``SUCCESS``;
- a peer that is alive but hung lets the kernel accept the connection and buffer the request, so the
  channel is destroyed and the reply awaited (``:674``, ``:614``); each ``read`` gives up after the 30 s
  receive timeout with ``EAGAIN``, which ``MsgHandlerPlugin::Read`` retries (``msg_handler_plugin.cc:
  155-161``): the call waits as long as the hang lasts, then the peer answers ``SUCCESS`` (its
  ``DestroyChannel`` of a channel it no longer has is a success, ``channel_manager.cc:505-520``); if the
  peer dies meanwhile the read sees the socket close (``:165-167``) and ``RecvMsg`` fails
  (``:333-334``): ``FAILED``, i.e. ``LLM_FAILED`` (``adxl_utils.cc:50-63``, ``common/llm_log.h:164-176``).

No path gives hixl ``TIMEOUT``: the only one in the connect (``msg_handler_plugin.cc:71-72``) follows a
failed ``DoConnect``, which a ``SUCCESS`` ``default_err`` never is. Whatever the entity's ``Finalize``
returns, the entity goes (``comm_entity_manager.cc:48-56``), so a relink works afterwards.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Tuple

from datadist_sim._status import LLMStatusCode
from datadist_sim._world.errors import BlocksForever

if TYPE_CHECKING:
    from datadist_sim._world.cluster import ClusterNode
    from datadist_sim._world.world import SimWorld

S = LLMStatusCode
DISCONNECT_TIMEOUT_S = 30.0
"""``kDisconnectTimeoutMs`` (``hixl_entity.cc:19``): the socket timeouts of the disconnect's connection."""


def disconnect(world: SimWorld, node: ClusterNode, remote_id: int) -> Tuple[LLMStatusCode, float]:
    """Disconnect ``node``'s entity for ``remote_id`` and drop it; the code, and the simulated time still
    to pass (a hang's wait has already passed on the clock, so fault rules fire and heal during it)."""
    try:
        return _await_peer(world, node.cluster_id, remote_id)
    finally:
        with world.lock:
            node.peers.pop(remote_id, None)


def _await_peer(world: SimWorld, local_id: int, remote_id: int) -> Tuple[LLMStatusCode, float]:
    rtt = world.config.message_rtt_s
    faults = world.faults
    while remote_id not in world.killed and faults.hung(remote_id):
        now = world.now()
        ends = faults.hang_ends(remote_id)
        due = faults.next_due(now, float("inf") if ends is None else ends)
        if due is None and ends is None:
            raise BlocksForever(
                f"unlink_clusters would wait forever: cluster {remote_id} is hung for good and the engine "
                "retries its reply's read without end (hixl msg_handler_plugin.cc:155-161)"
            )
        world.elapse(min(t for t in (ends, due) if t is not None) - now)
        faults.tick()  # what falls due in the wait (a kill, the hang healing) happens before we look
        if remote_id in world.killed:
            return S.LLM_FAILED, 0.0
    if remote_id in world.killed:
        return S.LLM_SUCCESS, rtt
    if faults.partitioned(local_id, remote_id):
        return S.LLM_SUCCESS, DISCONNECT_TIMEOUT_S
    return S.LLM_SUCCESS, rtt
