"""Pulls: a Decode-side pull of a Prompt cache (reference §7), by the general path of ``transfer._run``
(faults, timeouts, threads) or, when nothing can interfere, by a fast path that does the same checks, lets
the same time pass and commits the same bytes with a few lookups (issue 15).
"""

from __future__ import annotations

import threading
from typing import List, Optional, Tuple

import numpy as np

from datadist_sim._status import LLMStatusCode
from datadist_sim._world.caches import CacheEntry, NodeCaches, legacy_seq_len_check
from datadist_sim._world.cluster import ClusterNode, Mode
from datadist_sim._world.errors import SimError
from datadist_sim._world.keys import EngineKey, PackedKey
from datadist_sim._world.ranges import (
    Range,
    blocks_ranges,
    check_layer_split,
    contiguous_ranges,
    tensor_pairs,
)
from datadist_sim._world.transfer import (
    _TIMEOUTS,
    PullParams,
    _activity,
    _peer_gone,
    _remote,
    _req_id,
    _run,
    _time_out,
)
from datadist_sim._world.world import SimWorld, store_of


def _plan_pull(
    world: SimWorld, node: ClusterNode, dst_cache_id: int, key: PackedKey, params: PullParams, blocks: bool
) -> Tuple[NodeCaches, CacheEntry, Optional[EngineKey], List[Range]]:
    dst = store_of(world, node).live(dst_cache_id)
    if (params.src_tensors or params.dst_tensors) and node.mode is Mode.CACHE_MANAGER:
        # a layer range: the local cache must divide into layers (hixl only; GE v1 checks no such thing,
        # ``dflow/llm_datadist/v1/common/cache_engine.cc:70-95``)
        check_layer_split(dst.num_tensors, params.tensor_num_per_layer, "local")
    store = _remote(world, node, key.cluster_id, "pulled from")
    with store.lock:
        src, src_batch, consume = store.lookup(key)
        if blocks:
            ranges = blocks_ranges(src, src_batch, dst, params)
        else:
            if store.legacy_codes:
                legacy_seq_len_check(src, dst, params.size, params.src_offset, params.dst_offset)
            ranges = contiguous_ranges(src, src_batch, dst, params)
    return store, src, consume, ranges


def pull(
    world: SimWorld, node: ClusterNode, dst_cache_id: int, key: PackedKey, params: PullParams, *, blocks: bool
) -> None:
    """Pull what ``key`` names on its cluster into the local cache ``dst_cache_id``; all or nothing.

    Pulls on one link are serialised (the engine's per-entity mutex); the transfer time passes outside
    the world lock, and the source and destination are looked up again before the bytes move, so a key
    removed meanwhile gives ``LLM_KV_CACHE_NOT_EXIST`` and nothing is written. The same pull (same key,
    same destination) while one is in flight gives ``LLM_REPEAT_REQUEST``.
    """
    local = store_of(world, node)
    if _fast_pull(world, node, dst_cache_id, key, params, blocks):
        return
    request = (key, dst_cache_id)
    with local.lock:
        if request in local.inflight:
            raise SimError(
                LLMStatusCode.LLM_REPEAT_REQUEST, f"pull of {key} into {dst_cache_id} is in flight"
            )
        local.inflight.add(request)
    planned: List[Tuple[NodeCaches, CacheEntry, Optional[EngineKey]]] = []

    def plan() -> List[Range]:
        store, src, consume, ranges = _plan_pull(world, node, dst_cache_id, key, params, blocks)
        planned[:] = [(store, src, consume)]
        return ranges

    def commit(ranges: List[Range]) -> None:
        world.space_copy(ranges)
        store, src, consume = planned[0]
        if consume is not None and not src.registered:
            with store.lock:
                store._drop_key(src, consume)
                if store.legacy_codes:
                    store.note_completed(consume)

    try:
        with _activity(world, node, key.cluster_id, "pull") as link_lock, link_lock:
            _run(world, node, "pull_cache", key.cluster_id, _req_id(key), plan, commit, remote_is_src=True)
    finally:
        with local.lock:
            local.inflight.discard(request)


def _fast_pull(
    world: SimWorld, node: ClusterNode, dst_cache_id: int, key: PackedKey, params: PullParams, blocks: bool
) -> bool:
    """The common pull in a few lookups: one thread, no fault rule loaded, no poisoned memory, a healthy
    link and a transfer shorter than the timeout. Then nothing can happen between planning and
    committing (nothing else runs, and no rule can fire), so ``pull``'s slow path would plan once,
    register and release the transfer on the link with no one to see it, let the same time pass and
    commit the same ranges; this does exactly that, minus what no one can observe. Returns False, having
    changed nothing, when the slow path must run (which then meets the same state from the start)."""
    remote_id = key.cluster_id
    peer = node.peers.get(remote_id)
    if (
        peer is None
        or peer.broken
        or peer.peer_lost
        or remote_id in world.killed
        or not world.faults.idle
        or world.memory.has_poison
        or threading.active_count() != 1
    ):
        return False
    with world.lock:
        store, src, consume, ranges = _plan_pull(world, node, dst_cache_id, key, params, blocks)
        remote = world.node(remote_id)
    nbytes = 0
    for r in ranges:
        nbytes += r[2]
    seconds = nbytes / world.bandwidth(node.cluster_id, remote_id) + world.config.message_rtt_s
    if seconds > node.settings.sync_kv_timeout_ms / 1000.0:
        return False
    start = world.now()
    world.elapse(start + seconds - world.now())  # as ``_pass_time`` with nothing due
    with world.lock:
        lost = _peer_gone(world, node, remote_id, remote)
        if not lost:
            try:
                if not (blocks and _copy_blocks_at_once(world, src, store, dst_cache_id, node, params)):
                    world.space_copy(ranges)
            except SimError as exc:  # as in ``_run``: raw memory whose serving process went silent
                if exc.code not in _TIMEOUTS:
                    raise
                lost = True
            else:
                if consume is not None and not src.registered:
                    with store.lock:
                        store._drop_key(src, consume)
                        if store.legacy_codes:
                            store.note_completed(consume)
    if lost:
        _time_out(world, node, remote_id, nbytes, waited_s=seconds)
    return True


def _copy_blocks_at_once(
    world: SimWorld,
    src: CacheEntry,
    store: NodeCaches,
    dst_cache_id: int,
    node: ClusterNode,
    params: PullParams,
) -> bool:
    """Blocks to blocks between pool-backed caches: resolve each tensor once and move all its blocks with
    one numpy fancy-index copy, the same bytes ``space_copy`` would move range by range. False (nothing
    copied) when the layout does not allow it: a contiguous source, registered memory, metadata-only,
    or a destination block named twice (the per-range order decides then)."""
    _, _, src_blocks, dst_blocks, src_idx, dst_idx, _, _, _ = params
    dst = store_of(world, node).caches.get(dst_cache_id)
    if dst is None or not src.is_blocks or len(set(dst_blocks)) != len(dst_blocks):
        return False
    space = world.memory
    pairs = []
    for s, d in tensor_pairs(src, dst, src_idx, dst_idx):
        source = space.backing(src.addrs[s], src.tensor_size)
        target = space.backing(dst.addrs[d], dst.tensor_size)
        if source is None or target is None:
            return False
        pairs.append((source, target))
    block = dst.batch_bytes
    s_rows, d_rows = np.asarray(src_blocks, dtype=np.intp), np.asarray(dst_blocks, dtype=np.intp)
    for source, target in pairs:
        rows_in = source[: src.batch_size * block].reshape(src.batch_size, block)
        rows_out = target[: dst.batch_size * block].reshape(dst.batch_size, block)
        rows_out[d_rows] = rows_in[s_rows]
    return True
