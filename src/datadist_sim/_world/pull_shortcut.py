"""The pull shortcut: when nothing can interfere, a pull does the general path's checks (``pull_plan``),
lets the same time pass and commits the same bytes with a few lookups, because a pull is the hot call
of every connector and the general path (``pulls``, through the transfer engine) costs several times
more. It declines, having changed nothing, whenever the general path must run.
"""

from __future__ import annotations

from typing import Callable, Optional, Tuple

import numpy as np

from datadist_sim._world.block_pulls import block_rows, blocks_at_once, tensor_views
from datadist_sim._world.caches import CacheEntry, NodeCaches
from datadist_sim._world.clock import VirtualClock, other_threads
from datadist_sim._world.cluster import ClusterNode
from datadist_sim._world.errors import SimError
from datadist_sim._world.fault_effects import time_out as _time_out
from datadist_sim._world.keys import EngineKey
from datadist_sim._world.ownership import enter_copy, leave_copy
from datadist_sim._world.pull_gate import Ready, ready_link, unsafe
from datadist_sim._world.pull_plan import Plan, plan_pull
from datadist_sim._world.ranges import BlockRanges, Contiguous
from datadist_sim._world.requests import PullRequest
from datadist_sim._world.transfer import TIMEOUT_CODES, link_in_use, peer_gone
from datadist_sim._world.world import SimWorld

OnePass = Callable[[SimWorld, ClusterNode, PullRequest, Ready, Callable[[float], None]], bool]
"""A one-pass pull (``_pull_at_once``, ``blocks_at_once``): True when it ran whole, False having
changed nothing."""


def fast_pull(world: SimWorld, node: ClusterNode, request: PullRequest) -> bool:
    """The common pull in a few lookups: no fault rule loaded, no poisoned memory, a healthy link, no
    other transfer on it, and a transfer shorter than the timeout. Then no rule can fire between planning
    and committing, and under the virtual clock the transfer's time passes as a counter moves, so
    ``pull``'s slow path would plan, register the transfer on the link, let the time pass, plan again and
    commit the same ranges; this does the same in one step that no other thread can enter, minus the
    bookkeeping no one can observe: the schedule of the slow path in which nothing else runs meanwhile.
    Returns False, having changed nothing, when the slow path must run (which then meets the same state
    from the start).

    Alone (no other thread) it needs no lock at all; beside other threads (a fabric's, an asyncio
    executor's) it holds the world's lock and both stores' locks, which every change of what it reads
    takes, and takes only the commonest pull (``_beside_others``). Under a real clock the time passes in
    wall time, outside the lock, so only a caller that is alone takes a fast path there.

    The one-pass pulls move bytes between pool memory this process holds (``tensor_views``), never
    through the address space, so they run before the copy's parties are named (``ownership``); the
    planned ones name them around their commit."""
    remote_id = request.key.cluster_id
    clock = world.clock
    alone = not other_threads()
    if type(clock) is VirtualClock:
        ready = ready_link(world, node, remote_id)
        if ready is not None:
            at_once = blocks_at_once if request.blocks else _pull_at_once
            if not alone:
                return _beside_others(world, node, request, ready, at_once, clock)
            # no other thread: nothing can contend for the locks, so the one-pass pull goes without
            # them (a lock is 4 % of a small pull; a finalizer run in this thread would pass the
            # reentrant lock too)
            if at_once(world, node, request, ready, clock.pass_alone):
                return True
    if not alone:
        return False
    peer = node.peers.get(remote_id)
    if peer is None or unsafe(world, peer, remote_id):
        return False
    if type(clock) is not VirtualClock:
        return _in_real_time(world, node, request)
    return _planned(world, node, request, clock)


def _beside_others(
    world: SimWorld,
    node: ClusterNode,
    request: PullRequest,
    ready: Ready,
    at_once: OnePass,
    clock: VirtualClock,
) -> bool:
    """The fast pull while other threads run, under the virtual clock: the world's lock, then both
    stores' locks, held from the checks to the commit. Every change of what the pull reads takes one of
    them: a link, a kill or a fault's effect the world lock; a cache or key allocated, freed or consumed
    its store's lock; a transfer on the link registers under the world lock (``link_activity``), and a pull
    in flight under its store's. So the pull runs whole between two changes, as the slow path runs when
    no other thread acts during it; the time passes by the clock's own lock, so threads waiting on the
    clock see it move as they would.

    What could make it wait goes the slow path instead, which waits one lock at a time as it always
    has: a store's lock held elsewhere (taken without waiting here, so this is never a second order of
    store locks), a transfer already on the link (the slow path waits for the link, or is
    ``LLM_LINK_BUSY``), the same pull in flight (``LLM_REPEAT_REQUEST``), and any pull but the commonest
    (``_pull_at_once``: registered memory may be another process's, whose bytes a fabric asks for)."""
    remote_id = request.key.cluster_id
    _, local, store, _ = ready
    with world.lock:
        if not local.lock.acquire(blocking=False):
            return False
        try:
            if not store.lock.acquire(blocking=False):
                return False
            try:
                again = ready_link(world, node, remote_id)  # again, now that nothing can change it
                if (
                    again is None
                    or again[1] is not local  # finalized and back meanwhile
                    or again[2] is not store
                    or (request.key, request.dst_cache_id) in local.inflight
                    or link_in_use(local, store, node.cluster_id, remote_id)
                ):
                    return False
                return at_once(world, node, request, again, clock.sleep)
            finally:
                store.lock.release()
        finally:
            local.lock.release()


def _planned(world: SimWorld, node: ClusterNode, request: PullRequest, clock: VirtualClock) -> bool:
    """Any other pull ``plan_pull`` plans, for a caller alone under the virtual clock: plan, let the
    time pass, commit, all under the world lock (a finalizer run in this thread meets it there)."""
    with world.lock:
        planned = _plan_in_time(world, node, request)
        if planned is None:
            return False
        store, src, consume, plan, seconds = planned
        start = world.now()
        clock.sleep(start + seconds - start)  # as ``_pass_time`` with nothing due
        lost = _commit(world, node, request.key.cluster_id, plan, store, src, consume)
    if lost:
        _time_out(world, node, request.key.cluster_id, plan.nbytes, waited_s=seconds)
    return True


def _in_real_time(world: SimWorld, node: ClusterNode, request: PullRequest) -> bool:
    """A fast pull of a caller that is alone under a real clock: the time passes in wall time outside
    the world lock, and whatever ran meanwhile (a finalizer, a signal handler) is seen before the commit."""
    remote_id = request.key.cluster_id
    with world.lock:
        planned = _plan_in_time(world, node, request)
        if planned is None:
            return False
        store, src, consume, plan, seconds = planned
        remote = world.node(remote_id)
    start = world.now()
    world.elapse(start + seconds - world.now())
    with world.lock:
        lost = peer_gone(world, node, remote_id, remote) or _commit(
            world, node, remote_id, plan, store, src, consume
        )
    if lost:
        _time_out(world, node, remote_id, plan.nbytes, waited_s=seconds)
    return True


def _plan_in_time(
    world: SimWorld, node: ClusterNode, request: PullRequest
) -> Optional[Tuple[NodeCaches, CacheEntry, Optional[EngineKey], Plan, float]]:
    """``plan_pull``'s plan and the seconds the transfer takes; None when it would outlast the
    timeout (the general path times it out). Under the world lock."""
    store, src, consume, plan = plan_pull(world, node, request)
    seconds = (
        plan.nbytes / world.bandwidth(node.cluster_id, request.key.cluster_id) + world.config.message_rtt_s
    )
    if seconds > node.settings.sync_kv_timeout_ms / 1000.0:
        return None
    return store, src, consume, plan, seconds


def _pull_at_once(
    world: SimWorld,
    node: ClusterNode,
    request: PullRequest,
    ready: Ready,
    pass_time: Callable[[float], None],
) -> bool:
    """The commonest pull, whole, under the virtual clock: a whole batch of every tensor between two
    pool-backed contiguous caches over a ready link (``ready_link``). Each test below is one of
    ``plan_pull``'s checks (``live``, ``contiguous_plan``) or of the fast path's (the timeout, resolved
    bytes) written as a plain comparison that only says "it passes"; then the same time passes and the
    same bytes move as ``_commit`` would move them (none in a metadata-only world). When a test does not
    pass, or the pull is anything else, this returns False having changed nothing, and ``plan_pull`` plans
    the pull (and names what fails) from the same state. No fault rule is loaded, and nothing else can change
    the world meanwhile: the caller is the only thread, or holds the world's and both stores' locks
    (``_beside_others``). ``pass_time`` lets the seconds pass on the virtual clock."""
    _, local, store, now = ready
    key, params = request.key, request.params
    remote_id = key.cluster_id
    if (
        params.src_tensors
        or params.dst_tensors
        or params.src_offset > 0
        or params.dst_offset > 0
        or store.legacy_codes
    ):
        return False
    dst = local.caches.get(request.dst_cache_id)
    if dst is None or dst.released or dst.is_blocks:
        return False
    src, src_batch, consume = store.lookup(key)  # what it raises, ``plan_pull`` raises here too
    size, batch_index, batch_bytes = params.size, params.batch_index, src.batch_bytes
    chunk = batch_bytes if size == -1 else size
    if (
        src.is_blocks
        or src.num_tensors != dst.num_tensors
        or batch_index >= dst.batch_size
        or not 0 <= src_batch < src.batch_size
        or not 0 <= chunk <= batch_bytes
        or chunk > dst.batch_bytes
    ):
        return False
    source = src.views if src.views is not None else tensor_views(world, src)
    target = dst.views if dst.views is not None else tensor_views(world, dst)
    seconds = (
        chunk * src.num_tensors / world.bandwidth(node.cluster_id, remote_id) + world.config.message_rtt_s
    )
    moves = bool(source and target)
    if (
        not moves and not _nothing_behind(world, src, dst)
    ) or seconds > node.settings.sync_kv_timeout_ms / 1000.0:
        return False
    pass_time(now + seconds - now)  # as ``_pass_time`` with nothing due
    if moves:
        s0, d0 = src_batch * batch_bytes, batch_index * dst.batch_bytes
        for s, d in zip(source, target):
            d[d0 : d0 + chunk] = s[s0 : s0 + chunk]
    if consume is not None:
        store.consume(src, consume)
    return True


def _nothing_behind(world: SimWorld, src: CacheEntry, dst: CacheEntry) -> bool:
    """Both caches are pool memory of a metadata-only world, with bytes in each batch: their ranges lie
    inside live allocations with no bytes behind them, so ``space_copy`` would check them and move
    nothing."""
    return (
        not world.memory.backed
        and src.pool is not None
        and dst.pool is not None
        and src.batch_bytes > 0
        and dst.batch_bytes > 0
    )


def _commit(
    world: SimWorld,
    node: ClusterNode,
    remote_id: int,
    plan: Plan,
    store: NodeCaches,
    src: CacheEntry,
    consume: Optional[EngineKey],
) -> bool:
    """Move the bytes and consume the key; True (nothing moved) when the memory's serving process went
    silent, as in ``run_transfer``. The bytes go by each tensor's resolved bytes where the layout allows, else
    range by range through the address space, with the copy's parties named (the pull writes the caller's
    memory from the peer's, ``ownership``); the same bytes either way."""
    before = enter_copy(node.cluster_id, remote_id)
    try:
        if isinstance(plan, Contiguous):
            source, target = tensor_views(world, plan.src), tensor_views(world, plan.dst)
            if source and target:
                s0, d0, n = plan.src_start, plan.dst_start, plan.chunk
                for s, d in plan.pairs:
                    target[d][d0 : d0 + n] = source[s][s0 : s0 + n]
            else:
                world.space_copy(plan.build())
        elif not _copy_blocks_at_once(world, plan):
            world.space_copy(plan.build())
    except SimError as exc:
        if exc.code not in TIMEOUT_CODES:
            raise
        return True
    finally:
        leave_copy(before)
    if consume is not None:
        store.consume(src, consume)
    return False


def _copy_blocks_at_once(world: SimWorld, plan: BlockRanges) -> bool:
    """Blocks to blocks between pool-backed caches: resolve each tensor once and move all its blocks with
    one numpy fancy-index copy, the same bytes ``space_copy`` would move range by range (the ranges are
    then never built). False (nothing copied) when the layout does not allow it: a contiguous source,
    registered memory, metadata-only, or a destination block named twice (the per-range order decides
    then)."""
    src, dst, dst_blocks = plan.src, plan.dst, plan.dst_blocks
    if not src.is_blocks or len(set(dst_blocks)) != len(dst_blocks):
        return False
    sources, targets = block_rows(world, src), block_rows(world, dst)
    if not (sources and targets):
        return False
    if dst.batch_bytes == 0:
        return True  # zero-byte blocks: nothing moves
    s_rows = np.asarray(plan.src_blocks, dtype=np.intp)
    d_rows = np.asarray(dst_blocks, dtype=np.intp)
    for s, d in plan.pairs:
        targets[d][d_rows] = sources[s][s_rows]
    return True
