"""The transfer engine: how any transfer between two clusters runs in bytes and simulated time, for the
transfers built on it (``pulls``, ``pushes``). Its surface:

- ``linked_store``: the peer's cache store, once the link to it is checked usable;
- ``link_activity``: register a transfer on the link (its busy rules) and hand back the link's mutex;
- ``run_transfer``: one transfer, planned, met by the fault rules, timed out or committed, all or nothing;
- ``peer_gone``: whether the peer went away since a transfer began (for a caller's own fast path);
- ``req_id_of``: the request id a fault rule can match; ``TIMEOUT_CODES``: the codes of a timeout;
- ``transfers_running`` / ``link_in_use``: whether a transfer is registered on a link.

Which ranges a transfer moves is planned in ``ranges``. Time passes outside the world lock; what a
transfer relied on is checked again before a byte moves, so it never writes into a cache freed meanwhile.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Callable, Iterator, List, Optional

from datadist_sim._status import LLMStatusCode
from datadist_sim._world.caches import NodeCaches
from datadist_sim._world.clock import other_threads
from datadist_sim._world.cluster import ClusterNode, Mode
from datadist_sim._world.errors import SimError
from datadist_sim._world.fault_effects import meet_transfer_faults
from datadist_sim._world.fault_effects import time_out as _time_out
from datadist_sim._world.keys import INVALID_ID, PackedKey
from datadist_sim._world.ranges import Range
from datadist_sim._world.world import SimWorld, store_of
from datadist_sim.faults.effects import NONE, transfer_effect
from datadist_sim.faults.plan import Call
from datadist_sim.faults.rules import current_op

__all__ = [
    "TIMEOUT_CODES",
    "link_activity",
    "link_in_use",
    "linked_store",
    "peer_gone",
    "req_id_of",
    "run_transfer",
    "transfers_running",
]

_P = LLMStatusCode.LLM_PARAM_INVALID
TIMEOUT_CODES = (LLMStatusCode.LLM_TIMEOUT, LLMStatusCode.LLM_WAIT_PROCESS_TIMEOUT)
"""The codes of a transfer that never completed, in either mode (``fault_effects.timeout_code``)."""


def linked_store(world: SimWorld, node: ClusterNode, remote_id: int, verb: str) -> NodeCaches:
    """The store of a linked peer: own cluster is PARAM_INVALID, no (ready) link NOT_YET_LINK."""
    if remote_id == node.cluster_id:
        raise SimError(_P, f"data can not be {verb} own cluster")
    peer = node.peers.get(remote_id)
    remote = world.node(remote_id)
    if peer is None or peer.since > world.now() or remote is None or not remote.alive:
        raise SimError(LLMStatusCode.LLM_NOT_YET_LINK, f"cluster {remote_id} is not linked")
    if node.hixl:  # the link is the caller's entity alone (``_world/links.py``)
        if peer.instance is not None and peer.instance is not remote:
            raise SimError(
                LLMStatusCode.LLM_NOT_YET_LINK,
                f"cluster {remote_id} finalized and came back; unlink and link again",
            )
    elif node.cluster_id not in remote.peers:
        raise SimError(
            LLMStatusCode.LLM_NOT_YET_LINK,
            f"cluster {remote_id} holds no link back (it unlinked, or finalized and came back)",
        )
    if peer.broken:
        raise SimError(
            LLMStatusCode.LLM_NOT_YET_LINK,
            f"the link to cluster {remote_id} broke when a transfer timed out; unlink and link again",
        )
    return store_of(world, remote)


def _check_uce(world: SimWorld, ranges: List[Range], remote_is_src: bool) -> None:
    """A poisoned range fails the transfer: ``LLM_DEVICE_MEM_ERROR`` when it is the caller's memory,
    ``LLM_SUSPECT_REMOTE_ERROR`` when it is the peer's."""
    space = world.memory
    if not space.has_poison:
        return
    for dst, src, nbytes in ranges:
        for address, is_remote in ((src, remote_is_src), (dst, not remote_is_src)):
            if space.is_poisoned(address, nbytes):
                code = (
                    LLMStatusCode.LLM_SUSPECT_REMOTE_ERROR
                    if is_remote
                    else LLMStatusCode.LLM_DEVICE_MEM_ERROR
                )
                side = "remote" if is_remote else "local"
                raise SimError(code, f"uncorrectable memory error in {side} memory near {address:#x}")


def _silent(world: SimWorld, node: ClusterNode, remote_id: int) -> bool:
    """The peer of a link will not answer: its process died, or a fault holds. A broken v2 link is
    not silent but missing (``linked_store``: ``LLM_NOT_YET_LINK``, the status table's remedy).

    A broken v1 link stays silent: GE keeps the Decoder's entry after a timed-out pull and looks only
    for it (``dflow/udf/built_in/llm_common/cluster_manager.cpp:165-170``; not-linked is for a missing
    entry alone), so the next pull is sent to the Prompt, whose entity is in its error state and skipped
    by the Prompt's loop (``entity/llm_comm_entity_mgr.cpp:195-229``): nothing answers, and the pull
    ends when its wait does (``llm_common/llm_common.cpp:93-96``, ``kFsmTimeout``, which is
    ``LLM_WAIT_PROCESS_TIMEOUT``: ``fsm/state_define.h:27``, ``llm_error_codes_v1.h:20``)."""
    peer = node.peers.get(remote_id)
    if peer is None or (peer.broken and node.mode is not Mode.KV_CACHE_MANAGER):
        return False
    return peer.broken or peer.peer_lost or world.unreachable(node.cluster_id, remote_id)


def peer_gone(world: SimWorld, node: ClusterNode, remote_id: int, remote: Optional[ClusterNode]) -> bool:
    """Whether the peer's process died or finalized since the transfer began (``remote`` is the
    instance it started with), or the link was cut: a few lookups, cheap enough for every transfer."""
    peer = node.peers.get(remote_id)
    return (
        remote is None
        or not remote.alive
        or world.node(remote_id) is not remote
        or (peer is not None and (peer.broken or peer.peer_lost))
    )


def _peer_failed(world: SimWorld, node: ClusterNode, remote_id: int, remote: Optional[ClusterNode]) -> bool:
    """Whether the peer stopped answering since the transfer began: it is gone, or a partition or
    hang holds."""
    return peer_gone(world, node, remote_id, remote) or world.unreachable(node.cluster_id, remote_id)


def _pass_time(
    world: SimWorld,
    node: ClusterNode,
    remote_id: int,
    remote: Optional[ClusterNode],
    seconds: float,
    nbytes: int,
) -> None:
    """Let the transfer's ``seconds`` pass. A timed world fault due meanwhile (a kill, partition, hang
    or cut at its ``start_s``) takes effect at its own moment; if it silences the peer, the transfer
    never completes and times out ``sync_kv_timeout`` after it began."""
    start = world.now()
    end = start + seconds
    due = world.faults.next_due(start, end)
    while due is not None:
        world.clock.advance_to(due)
        world.faults.tick()
        if _peer_failed(world, node, remote_id, remote):
            _time_out(world, node, remote_id, nbytes, waited_s=world.now() - start)
        due = world.faults.next_due(due, end)
    world.elapse(end - world.now())


def run_transfer(
    world: SimWorld,
    node: ClusterNode,
    op: str,
    remote_id: int,
    req_id: Optional[int],
    plan: Callable[[], List[Range]],
    commit: Callable[[List[Range]], None],
    remote_is_src: bool,
) -> None:
    """One transfer: plan it (argument and state checks) under the world lock, meet the fault rules,
    let its time pass outside the lock, then plan again and commit under the lock, so whatever vanished
    meanwhile fails the call with nothing written. With one thread and no rule fired nothing can have
    changed, and the first plan stands (a third of a small pull's cost)."""
    if _silent(world, node, remote_id):
        _time_out(world, node, remote_id, 0)
    with world.lock:
        ranges = plan()
        remote = world.node(remote_id)
    nbytes = sum(r[2] for r in ranges)
    fired_before = world.faults.fired_total
    fired = world.faults.on_call(Call(current_op(op), node.cluster_id, remote_id, req_id))
    if _silent(world, node, remote_id):
        _time_out(world, node, remote_id, nbytes)
    effect = transfer_effect(fired, world.faults.coin)  # after the check: a silent peer flips no coin
    seconds = nbytes / world.bandwidth(node.cluster_id, remote_id) + world.config.message_rtt_s
    if effect is not NONE:  # what the rules that fired do: applied where every fault effect is

        def land() -> None:
            with world.lock:
                landed = plan()
                _check_uce(world, landed, remote_is_src)  # a poisoned source is the peer's memory
                commit(landed)

        seconds = meet_transfer_faults(world, node, remote_id, effect, seconds, ranges, remote_is_src, land)
    limit = node.settings.sync_kv_timeout_ms / 1000.0
    if seconds > limit:
        _pass_time(world, node, remote_id, remote, limit, nbytes)
        _time_out(world, node, remote_id, nbytes, waited_s=limit)
    _pass_time(world, node, remote_id, remote, seconds, nbytes)
    with world.lock:
        changed = other_threads() > 0 or world.faults.fired_total != fired_before
        lost = peer_gone(world, node, remote_id, remote) or (
            changed and world.unreachable(node.cluster_id, remote_id)
        )
        if not lost:  # else the peer died or finalized (another thread) while the bytes were in flight
            if changed:
                ranges = plan()  # another thread or a fault may have changed what the plan relied on
            _check_uce(world, ranges, remote_is_src)
            try:
                commit(ranges)
            except SimError as exc:  # the process serving raw memory died or stayed silent (fabric)
                if exc.code not in TIMEOUT_CODES:
                    raise
                lost = True
    if lost:
        _time_out(world, node, remote_id, nbytes, waited_s=seconds)


def req_id_of(key: PackedKey) -> Optional[int]:
    """The request id of ``key`` a fault rule can match (None: the key carries none)."""
    return key.req_id if 0 <= key.req_id < INVALID_ID else None


_CONFLICTS = {"pull": "transfer", "transfer": "pull"}


@contextlib.contextmanager
def link_activity(world: SimWorld, node: ClusterNode, remote_id: int, kind: str) -> Iterator[threading.Lock]:
    """Register a transfer of ``kind`` on the link; yield the link's mutex, shared by both ends.

    A documented conflicting transfer already running on the link (either end) gives ``LLM_LINK_BUSY``
    when ``config.link_busy == "reject"``; with ``"serialize"`` the shared mutex makes it wait.
    """
    local = store_of(world, node)
    with world.lock:
        remote = world.caches.get(remote_id)
        other = _CONFLICTS.get(kind)
        if other is not None and world.config.link_busy == "reject":
            mine = local.ops.get(remote_id, {}).get(other, 0)
            theirs = 0 if remote is None else remote.ops.get(node.cluster_id, {}).get(other, 0)
            if mine or theirs:
                raise SimError(
                    LLMStatusCode.LLM_LINK_BUSY,
                    f"a {other} is running on the link {node.cluster_id}<->{remote_id}",
                )
        counts = local.ops.setdefault(remote_id, {})
        counts[kind] = counts.get(kind, 0) + 1
        low, high = sorted((node.cluster_id, remote_id))
        owner = local if remote is None or node.cluster_id == low else remote
        lock = owner.link_lock(high if owner is local else low)
    try:
        yield lock
    finally:
        with world.lock:
            counts[kind] -= 1


def transfers_running(world: SimWorld, node: ClusterNode, remote_id: int) -> bool:
    """Whether a pull or transfer is in flight on the link between ``node`` and ``remote_id``."""
    with world.lock:
        local, remote = world.caches.get(node.cluster_id), world.caches.get(remote_id)
        return link_in_use(local, remote, node.cluster_id, remote_id)


def link_in_use(
    local: Optional[NodeCaches], remote: Optional[NodeCaches], local_id: int, remote_id: int
) -> bool:
    """Whether a transfer is registered on the link at either end (``link_activity``'s counts); under the
    world lock, which registering takes."""
    mine = None if local is None else local.ops.get(remote_id)
    theirs = None if remote is None else remote.ops.get(local_id)
    return bool((mine and any(mine.values())) or (theirs and any(theirs.values())))
