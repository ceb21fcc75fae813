"""The gate both one-pass pulls open first (the contiguous one of ``pull_shortcut``, ``blocks_at_once``
of ``block_pulls``): what the link and its two ends must be for a pull to go whole in one step.

Each test is one of ``plan_pull``'s (``store_of``, ``linked_store``: both instances live, the link
held at both ends and ready) or what sends any fast pull to the general path (``unsafe``), written as a
plain comparison that only says "it passes". When one does not pass, the gate says so and nothing has
changed; the planned path then names what fails, from the same state.
"""

from __future__ import annotations

from typing import Optional, Tuple

from datadist_sim._world.caches import NodeCaches
from datadist_sim._world.cluster import ClusterNode, PeerLink
from datadist_sim._world.world import SimWorld

Ready = Tuple[PeerLink, NodeCaches, NodeCaches, float]
"""A link open for a one-pass pull: this end's record of it, the caller's store, the peer's store, and
the simulated time the gate read (the pull's time passes from there)."""


def unsafe(world: SimWorld, peer: PeerLink, remote_id: int) -> bool:
    """What sends a pull down the general path whatever it is: a broken or lost link, a killed peer, a
    fault rule loaded (it may fire on the transfer) or poisoned memory (a range may meet it)."""
    return (
        peer.broken
        or peer.peer_lost
        or remote_id in world.killed
        or not world.faults.idle
        or world.memory.has_poison
    )


def ready_link(world: SimWorld, node: ClusterNode, remote_id: int) -> Optional[Ready]:
    """The link from ``node`` to ``remote_id`` if a pull on it may go in one pass, else None. Beyond
    ``unsafe``: both instances live with their stores, not a link to itself, not a one-sided link (which
    finds a cache in its copy of the peer's table, ``plan_pull``; ``PullBlocks`` is ``PullCache``,
    ``llm_datadist_v2.cc:247``, read by ``PullCacheByGet``, ``data_transfer_client.cc:231``), ready by
    now, and held by the peer too (on the hixl backend, one-sided: made to the live instance)."""
    peer = node.peers.get(remote_id)
    if peer is None or unsafe(world, peer, remote_id):
        return None
    local = world.caches.get(node.cluster_id)
    store = world.caches.get(remote_id)
    remote = world.node(remote_id)
    now = world.now()
    if (
        local is None
        or store is None
        or remote is None
        or not node.alive
        or not remote.alive
        or remote_id == node.cluster_id
        or peer.by_table
        or peer.since > now
        or (
            (peer.instance is not None and peer.instance is not remote)
            if node.hixl
            else node.cluster_id not in remote.peers
        )
    ):
        return None
    return peer, local, store, now
