"""Pulls: a Decode-side pull of a Prompt cache. The shortcut (``pull_shortcut``) takes it when nothing
can interfere; else the general path here runs it through the transfer engine (``transfer.run_transfer``:
faults, timeouts, threads), planned as the shortcut plans it (``pull_plan``).
"""

from __future__ import annotations

from typing import List, Optional, Tuple

from datadist_sim._status import LLMStatusCode
from datadist_sim._world.caches import CacheEntry, NodeCaches
from datadist_sim._world.cluster import ClusterNode
from datadist_sim._world.errors import SimError
from datadist_sim._world.keys import EngineKey
from datadist_sim._world.ownership import enter_copy, leave_copy
from datadist_sim._world.pull_plan import plan_pull
from datadist_sim._world.pull_shortcut import fast_pull
from datadist_sim._world.ranges import Range
from datadist_sim._world.requests import PullRequest
from datadist_sim._world.transfer import link_activity, req_id_of, run_transfer
from datadist_sim._world.world import SimWorld, store_of


def pull(world: SimWorld, node: ClusterNode, request: PullRequest) -> None:
    """Pull what ``key`` names on its cluster into the local cache ``dst_cache_id``; all or nothing.

    Pulls on one link are serialised (the engine's per-entity mutex); the transfer time passes outside
    the world lock, and the source and destination are looked up again before the bytes move, so a key
    removed meanwhile gives ``LLM_KV_CACHE_NOT_EXIST`` and nothing is written. The same pull (same key,
    same destination) while one is in flight gives ``LLM_REPEAT_REQUEST``.
    """
    if fast_pull(world, node, request):  # it names the copy's parties itself where it needs them
        return
    before = enter_copy(node.cluster_id, request.key.cluster_id)  # the caller's memory is written
    try:
        _pull(world, node, request)
    finally:
        leave_copy(before)


def _pull(world: SimWorld, node: ClusterNode, request: PullRequest) -> None:
    local = store_of(world, node)
    dst_cache_id, key = request.dst_cache_id, request.key
    inflight = (key, dst_cache_id)
    with local.lock:
        if inflight in local.inflight:
            raise SimError(
                LLMStatusCode.LLM_REPEAT_REQUEST, f"pull of {key} into {dst_cache_id} is in flight"
            )
        local.inflight.add(inflight)
    planned: List[Tuple[NodeCaches, CacheEntry, Optional[EngineKey]]] = []

    def plan() -> List[Range]:
        store, src, consume, moves = plan_pull(world, node, request)
        planned[:] = [(store, src, consume)]
        return moves.build()

    def commit(ranges: List[Range]) -> None:
        world.space_copy(ranges)
        store, src, consume = planned[0]
        if consume is not None:
            store.consume(src, consume)

    try:
        with link_activity(world, node, key.cluster_id, "pull") as link_lock, link_lock:
            run_transfer(
                world, node, "pull_cache", key.cluster_id, req_id_of(key), plan, commit, remote_is_src=True
            )
    finally:
        with local.lock:
            local.inflight.discard(inflight)
