"""link_clusters / unlink_clusters in both engines, returning codes as the real engines do.

v1 (KvCacheManager, GE ``LinkManager``): only the Decoder links; one link operation at a time per
instance (``LLM_PROCESSING_LINK``); inputs checked, then at most 16 clusters per call; clusters that
failed are rolled back and the overall code becomes ``LLM_LINK_FAILED``.
v2 (CacheManager, hixl ``LLMLinkManager``): any role links, the caller is the client and whoever
listens is the server; clusters are linked in parallel; the overall code is the last failure.
v2 with ``llm.TransferBackend = "hixl"`` (``hixl_transfer_engine.cc``): the link table is one-sided. A
link is the caller's own entity for the peer (``LinkCluster``, lines 132-157), keyed on the hixl side by
the remote engine's client channel only (adxl ``channel_msg_handler.cc:492-495``,
``channel_manager.cc:442-462``: channels are keyed by (client|server, id)), so two instances may link to
each other and both succeed; linking the same peer twice is ``LLM_ALREADY_LINK`` (hixl
``ALREADY_CONNECTED``, ``common/llm_log.h:164-170``). Unlinking destroys the caller's entity by cluster id
alone (``UnlinkCluster``, lines 186-191; ``force`` is ignored, line 195), and an id with no entity is
still a success (``comm_entity_manager.cc:33-62``); destroying one disconnects from the peer
(``hixl_disconnect``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, List, Optional, Tuple, Union

from datadist_sim._status import LLMStatusCode
from datadist_sim._world import hixl_disconnect
from datadist_sim._world.cluster import ClusterNode, Endpoint, Mode, PeerLink, Role, reads_table
from datadist_sim._world.errors import SimError
from datadist_sim._world.fault_effects import link_outcome
from datadist_sim._world.requests import LinkRequest
from datadist_sim.faults.effects import NONE, Effect, link_effect
from datadist_sim.faults.plan import Call
from datadist_sim.faults.rules import current_op

if TYPE_CHECKING:
    from datadist_sim._world.world import SimWorld

S = LLMStatusCode
Outcome = Tuple[LLMStatusCode, float]
_ROLLED_BACK = (S.LLM_LINK_FAILED, S.LLM_WAIT_PROCESS_TIMEOUT, S.LLM_NOTIFY_PROMPT_UNLINK_FAILED)


def link_clusters(
    world: SimWorld, node: ClusterNode, requests: List[LinkRequest], timeout_ms: int
) -> Tuple[LLMStatusCode, List[LLMStatusCode]]:
    """Link ``node`` (the client) to each requested server. Never raises engine errors."""
    if node.mode is Mode.KV_CACHE_MANAGER:
        return _v1_link(world, node, requests, timeout_ms / 1000.0)
    return _v2_link(world, node, requests, timeout_ms / 1000.0)


def unlink_clusters(
    world: SimWorld, node: ClusterNode, requests: List[LinkRequest], timeout_ms: int, force: bool
) -> Tuple[LLMStatusCode, List[LLMStatusCode]]:
    """Tear links down: both ends normally, only this end with ``force``. Never raises engine errors."""
    if node.mode is Mode.KV_CACHE_MANAGER:
        return _v1_unlink(world, node, requests, timeout_ms / 1000.0, force)
    return _v2_unlink(world, node, requests, timeout_ms / 1000.0, force)


# -- v1 ----------------------------------------------------------------------------------------


def _v1_check(world: SimWorld, node: ClusterNode, requests: List[LinkRequest]) -> LLMStatusCode:
    """GE ``CheckClusterInfo`` then the per-call cluster limit, in that order."""
    if not requests:
        return S.LLM_PARAM_INVALID
    first_local = requests[0].local
    for req in requests:
        if not req.local or not req.remote or len(req.local) != len(req.remote):
            return S.LLM_PARAM_INVALID
        if len(req.local) != node.device_num or req.local != first_local:
            return S.LLM_PARAM_INVALID
    if len(requests) > world.config.max_clusters_per_call:
        return S.LLM_CLUSTER_NUM_EXCEED_LIMIT
    return S.LLM_SUCCESS


def _v1_link(
    world: SimWorld, node: ClusterNode, requests: List[LinkRequest], timeout_s: float
) -> Tuple[LLMStatusCode, List[LLMStatusCode]]:
    if node.role is not Role.DECODER:
        return _finish(world, S.LLM_PARAM_INVALID, [], 0.0)
    outcomes = _v1_locked(
        world, node, requests, lambda req: _connect(world, node, req, timeout_s, S.LLM_WAIT_PROCESS_TIMEOUT)
    )
    if isinstance(outcomes, LLMStatusCode):
        return _finish(world, outcomes, [], 0.0)
    rets = [code for code, _ in outcomes]
    overall = S.LLM_LINK_FAILED if any(code in _ROLLED_BACK for code in rets) else S.LLM_SUCCESS
    return _finish(world, overall, rets, max(t for _, t in outcomes))


def _v1_unlink(
    world: SimWorld, node: ClusterNode, requests: List[LinkRequest], timeout_s: float, force: bool
) -> Tuple[LLMStatusCode, List[LLMStatusCode]]:
    outcomes = _v1_locked(
        world, node, requests, lambda req: _v1_disconnect(world, node, req, timeout_s, force)
    )
    if isinstance(outcomes, LLMStatusCode):
        return _finish(world, outcomes, [], 0.0)
    rets = [code for code, _ in outcomes]
    tolerated = (S.LLM_SUCCESS, S.LLM_NOT_YET_LINK)
    overall = S.LLM_SUCCESS if all(code in tolerated for code in rets) else S.LLM_UNLINK_FAILED
    return _finish(world, overall, rets, max(t for _, t in outcomes))


def _v1_locked(
    world: SimWorld, node: ClusterNode, requests: List[LinkRequest], attempt: Callable[[LinkRequest], Outcome]
) -> Union[LLMStatusCode, List[Outcome]]:
    """One link operation at a time per instance (``LLM_PROCESSING_LINK``), inputs checked under the
    lock; returns the early code, or each cluster's outcome."""
    if not node.link_mutex.acquire(blocking=False):
        return S.LLM_PROCESSING_LINK
    try:
        check = _v1_check(world, node, requests)
        if check is not S.LLM_SUCCESS:
            return check
        return [attempt(req) for req in requests]
    finally:
        node.link_mutex.release()


def _v1_disconnect(
    world: SimWorld, node: ClusterNode, req: LinkRequest, timeout_s: float, force: bool
) -> Outcome:
    """Drop this end; without ``force`` also tell the peer, whose end stays if it cannot be told.

    The fault rules of the call act once the link is found, before either end goes: a ``fail`` is this
    cluster's code and a teardown a ``delay`` or ``timeout`` pushes past the timeout is
    ``LLM_WAIT_PROCESS_TIMEOUT`` (GE ``link_manager.cc:327``: the host's own wait for the flow, which a
    ``force`` unlink has too), both with the link left as it was; but a ``force`` unlink's
    ``LLM_UNLINK_FAILED`` is its connection failing to close after the entry is deleted (GE udf
    ``link_req_handler.cpp:511-512, 518-523``), so this end goes. The codes a ``force`` unlink cannot
    give (``LLM_NOTIFY_PROMPT_UNLINK_FAILED``: it tells nobody) are refused (``FORCE_SPECS``)."""
    rtt = world.config.message_rtt_s
    if req.remote_cluster_id not in node.peers:
        return S.LLM_NOT_YET_LINK, rtt
    failed, took = link_outcome(
        _faults(world, node, "unlink_clusters", req.remote_cluster_id, force=force), rtt
    )
    if failed is not None:
        if force and failed is S.LLM_UNLINK_FAILED:
            with world.lock:
                node.peers.pop(req.remote_cluster_id, None)
        return failed, rtt
    if took > timeout_s:
        return S.LLM_WAIT_PROCESS_TIMEOUT, timeout_s
    with world.lock:
        if node.peers.pop(req.remote_cluster_id, None) is None:
            return S.LLM_NOT_YET_LINK, rtt
        if force:
            return S.LLM_SUCCESS, took
        peer = world.node(req.remote_cluster_id)
    if (
        peer is None
        or not peer.alive
        or world.unreachable(node.cluster_id, peer.cluster_id)
        or not world.wait_if_paused(peer.cluster_id)
    ):
        return S.LLM_NOTIFY_PROMPT_UNLINK_FAILED, timeout_s
    with world.lock:
        peer.peers.pop(node.cluster_id, None)
    return S.LLM_SUCCESS, took


# -- v2 ----------------------------------------------------------------------------------------


def _v2_link(
    world: SimWorld, node: ClusterNode, requests: List[LinkRequest], timeout_s: float
) -> Tuple[LLMStatusCode, List[LLMStatusCode]]:
    if not requests:
        return _finish(world, S.LLM_PARAM_INVALID, [], 0.0)
    if world.config.v2_cluster_limit and len(requests) > world.config.max_clusters_per_call:
        return _finish(world, S.LLM_CLUSTER_NUM_EXCEED_LIMIT, [], 0.0)
    outcomes = [_v2_connect(world, node, req, timeout_s) for req in requests]
    return _finish_v2(world, outcomes)


def _v2_connect(world: SimWorld, node: ClusterNode, req: LinkRequest, timeout_s: float) -> Outcome:
    if len(req.remote) != 1:
        return S.LLM_PARAM_INVALID, 0.0
    if not node.settings.options.get("llm.LocalCommRes") and len(req.local) != 1:
        return S.LLM_PARAM_INVALID, 0.0
    return _connect(world, node, req, timeout_s, S.LLM_TIMEOUT)


def _v2_unlink(
    world: SimWorld, node: ClusterNode, requests: List[LinkRequest], timeout_s: float, force: bool
) -> Tuple[LLMStatusCode, List[LLMStatusCode]]:
    if not requests:
        return _finish(world, S.LLM_PARAM_INVALID, [], 0.0)
    if world.config.v2_cluster_limit and len(requests) > world.config.max_clusters_per_call:
        return _finish(world, S.LLM_CLUSTER_NUM_EXCEED_LIMIT, [], 0.0)
    # Both engines tear the clusters down in parallel, each from the call's start (llm_link_manager.cc:
    # 75-97, hixl_transfer_engine.cc:197-218), but a hixl disconnect that waits out a hung peer lets that
    # time pass here already: each outcome ends after its own wait plus its time, the call at the
    # latest, less what has passed.
    start = world.now()
    ends = []
    for req in requests:
        began = world.now()
        code, took = _v2_disconnect(world, node, req, timeout_s, force)
        ends.append((code, world.now() - began + took))
    spent = world.now() - start
    return _finish_v2(world, [(code, max(0.0, end - spent)) for code, end in ends])


def _v2_disconnect(
    world: SimWorld, node: ClusterNode, req: LinkRequest, timeout_s: float, force: bool
) -> Outcome:
    """Force destroys only the local entity (idempotent); otherwise the server must be reachable.

    A transfer still running on the link makes it ``LLM_LINK_BUSY`` when the world rejects conflicts.
    The fault rules of the call act before anything is torn down: a ``fail`` is this cluster's code; a
    ``delay`` lengthens the teardown, and one a ``delay`` or ``timeout`` pushes past the timeout is
    ``LLM_TIMEOUT``, both with the link left as it was, as when the connect to the peer fails or times
    out (``link_msg_handler.cc:426-431``: it comes before the entity is destroyed, :444;
    ``msg_handler_plugin.cc:71-72``). A ``force`` unlink contacts no peer (``link_msg_handler.cc:426``)
    and a hixl-backend one never times out (``hixl_disconnect``: it waits out a hung peer), so their
    ``timeout`` rules do not match, and a ``force`` unlink's codes are its own row's (``FORCE_SPECS``): its
    ``LLM_UNLINK_FAILED`` is the entity's teardown failing (``comm_entity.cc:282-303``), after which the
    entity is gone anyway (``comm_entity_manager.cc:48-56``), so this end goes.
    """
    rtt = world.config.message_rtt_s
    if req.remote_cluster_id in node.peers:
        try:
            _reject_if_busy(world, node, req.remote_cluster_id, "unlink")
        except SimError as exc:
            return exc.code, 0.0
    timed = not (force or node.hixl)
    if timed and len(req.remote) != 1:
        return S.LLM_PARAM_INVALID, 0.0
    failed, extra = link_outcome(
        _faults(world, node, "unlink_clusters", req.remote_cluster_id, timed, force), 0.0
    )
    if failed is not None:
        if (force and failed is S.LLM_UNLINK_FAILED and not node.hixl) or (
            node.hixl and failed is S.LLM_FAILED
        ):
            # hixl: LLM_FAILED is the entity's Finalize failing, after which the entity goes
            # (comm_entity_manager.cc:48-56); its LLM_PARAM_INVALID comes first (hixl_transfer_engine.cc:201).
            with world.lock:
                node.peers.pop(req.remote_cluster_id, None)
        return failed, rtt
    if node.hixl:
        if req.remote_cluster_id not in node.peers:
            return S.LLM_SUCCESS, extra
        code, waited = hixl_disconnect.disconnect(world, node, req.remote_cluster_id)
        return code, waited + extra
    if force:
        with world.lock:
            node.peers.pop(req.remote_cluster_id, None)
        return S.LLM_SUCCESS, extra
    if rtt + extra > timeout_s:
        return S.LLM_TIMEOUT, timeout_s
    server = world.listener_at(req.remote[0])
    if (
        server is None
        or world.unreachable(node.cluster_id, server.cluster_id)
        or not world.wait_if_paused(server.cluster_id)
    ):
        return S.LLM_UNLINK_FAILED, timeout_s
    with world.lock:
        server.peers.pop(node.cluster_id, None)
        node.peers.pop(req.remote_cluster_id, None)
    return S.LLM_SUCCESS, rtt + extra


def _finish_v2(world: SimWorld, outcomes: List[Outcome]) -> Tuple[LLMStatusCode, List[LLMStatusCode]]:
    """The overall code of a v2 call is its last failure (hixl), or success."""
    rets = [code for code, _ in outcomes]
    overall = S.LLM_SUCCESS
    for code in rets:
        overall = code if code is not S.LLM_SUCCESS else overall
    return _finish(world, overall, rets, max(t for _, t in outcomes))


# -- shared ------------------------------------------------------------------------------------


def _connect(
    world: SimWorld, node: ClusterNode, req: LinkRequest, timeout_s: float, timeout_code: LLMStatusCode
) -> Outcome:
    """Connect to the server at the remote endpoints and set the link up within ``timeout_s``.

    v1 looks the peer up in its own link table before it connects (GE ``link_req_handler.cpp:205-210``):
    an entry that is still there, even one a timed-out transfer broke or whose peer died, answers
    ``LLM_ALREADY_LINK`` at once. A timeout never removes the entry (GE ``cluster_manager.cpp:162-184``,
    ``llm_comm_entity.cpp:799-833``): only ``unlink_clusters`` does, so the client unlinks first.
    """
    cfg = world.config
    if node.mode is Mode.KV_CACHE_MANAGER and req.remote_cluster_id in node.peers:
        return S.LLM_ALREADY_LINK, cfg.message_rtt_s
    server = _server_for(world, req.remote)
    if server is None:
        return _unreachable(node, world, timeout_s, refused=True)
    if (
        server.cluster_id != req.remote_cluster_id
        or server.mode is not node.mode
        or server.hixl is not node.hixl
    ):
        return S.LLM_LINK_FAILED, cfg.message_rtt_s
    if node.mode is Mode.KV_CACHE_MANAGER and server.role is not Role.PROMPT:
        return S.LLM_LINK_FAILED, cfg.message_rtt_s
    failed, setup_s = link_outcome(_faults(world, node, "link_clusters", server.cluster_id), cfg.link_setup_s)
    if failed is not None:
        return failed, cfg.message_rtt_s
    hung = world.faults.hung(server.cluster_id)
    if not hung and world.unreachable(node.cluster_id, server.cluster_id):
        return _unreachable(node, world, timeout_s, refused=False)
    if hung or not world.wait_if_paused(server.cluster_id) or setup_s > timeout_s:
        return timeout_code, timeout_s
    with world.lock:
        if req.remote_cluster_id in node.peers:
            return S.LLM_ALREADY_LINK, cfg.message_rtt_s
        one_sided = node.hixl
        if len(node.peers) >= cfg.max_links or (not one_sided and len(server.peers) >= cfg.max_links):
            return S.LLM_PARAM_INVALID, cfg.message_rtt_s
        now = world.now()
        node.peers[server.cluster_id] = PeerLink(
            server.cluster_id,
            is_client=True,
            since=now,
            instance=server if one_sided else None,
            by_table=reads_table(node),
        )
        if not one_sided:
            server.peers[node.cluster_id] = PeerLink(
                node.cluster_id, is_client=False, since=now, by_table=reads_table(server)
            )
    return S.LLM_SUCCESS, setup_s


def _unreachable(node: ClusterNode, world: SimWorld, timeout_s: float, refused: bool) -> Outcome:
    """A link whose TCP connect reaches no listener.

    The default backends answer ``LLM_LINK_FAILED`` after the link timeout. The hixl backend's entity
    connects through the hixl engine (``link_mgr/hixl_entity.cc:27-29``), whose socket connect maps a
    refused connect to hixl ``FAILED`` at once and one still pending at the timeout to ``TIMEOUT``
    (``src/hixl/common/ctrl_msg_plugin.cc:71-85, 119-122``; the adxl engine alike,
    ``common/msg_handler_plugin.cc:64-77``); ``LLM_CHK_HIXL_RET`` turns them into ``LLM_FAILED`` and
    ``LLM_TIMEOUT`` (``common/llm_log.h:164-176, 200-209``). An address nobody serves refuses; a cut link
    drops the connect, so it waits out the timeout.
    """
    if not node.hixl:
        return S.LLM_LINK_FAILED, timeout_s
    if refused:
        return S.LLM_FAILED, world.config.message_rtt_s
    return S.LLM_TIMEOUT, timeout_s


_UNTIMED = ("fail", "delay")


def _faults(
    world: SimWorld, node: ClusterNode, op: str, remote_id: int, timed: bool = True, force: bool = False
) -> Effect:
    """What the fault rules that fire on one remote cluster's entry of a link call do to it
    (``faults.effects``); a teardown that contacts no peer has no wait to run out, so ``timed=False``
    matches no ``timeout`` rule; ``force``: the call is a ``force=True`` unlink, whose codes the plan
    checks rules against (``Call.force``)."""
    op = current_op(op)
    if world.faults.idle or not world.faults.watches(op):
        return NONE
    call = Call(op, node.cluster_id, remote_id, force=force)
    fired = world.faults.on_call(call) if timed else world.faults.on_call(call, _UNTIMED)
    return link_effect(fired)


def _server_for(world: SimWorld, endpoints: Tuple[Endpoint, ...]) -> Optional[ClusterNode]:
    """The one live instance listening on every endpoint (one per device), or None."""
    found = {world.listener_at(ep) for ep in endpoints}
    if len(found) != 1:
        return None
    server = found.pop()
    return server if server is not None and server.alive else None


def _finish(
    world: SimWorld, overall: LLMStatusCode, rets: List[LLMStatusCode], elapsed: float
) -> Tuple[LLMStatusCode, List[LLMStatusCode]]:
    """Let the call's time pass (the API face traces the call itself)."""
    world.elapse(elapsed)
    return overall, rets


def _reject_if_busy(world: SimWorld, node: ClusterNode, remote_id: int, op: str) -> None:
    """The documented conflicts with a running pull (``LLM_LINK_BUSY``) when the world rejects them."""
    from datadist_sim._world.transfer import transfers_running

    if world.config.link_busy == "reject" and transfers_running(world, node, remote_id):
        raise SimError(S.LLM_LINK_BUSY, f"{op} conflicts with a transfer running on the link to {remote_id}")


def check_link_status(world: SimWorld, node: ClusterNode, remote_cluster_id: int) -> None:
    """v1 heartbeat over the link: Decoder only; no link -> NOT_YET_LINK; a silent peer times out."""
    if node.role is not Role.DECODER:
        raise SimError(S.LLM_PARAM_INVALID, f"check_link_status is not supported by {node.role.value}")
    link = node.peers.get(remote_cluster_id)
    if link is None:
        raise SimError(S.LLM_NOT_YET_LINK, f"cluster {remote_cluster_id} is not linked")
    _reject_if_busy(world, node, remote_cluster_id, "check_link_status")
    peer = world.node(remote_cluster_id)
    answered = (
        not link.broken
        and not link.peer_lost
        and not world.unreachable(node.cluster_id, remote_cluster_id)
        and peer is not None
        and node.cluster_id in peer.peers
        and world.wait_if_paused(remote_cluster_id)
    )
    if not answered:
        world.elapse(node.settings.sync_kv_timeout_ms / 1000.0)
        raise SimError(S.LLM_WAIT_PROCESS_TIMEOUT, f"cluster {remote_cluster_id} did not answer")
    world.elapse(world.config.message_rtt_s)
