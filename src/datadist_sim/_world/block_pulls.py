"""The commonest ``pull_blocks`` in one pass: blocks of a blocks cache into blocks of a blocks cache, every
tensor, both pool-backed, over a ready link, nothing else running; and the per-cache arrays of blocks it
copies with (``tensor_views``, ``block_rows``), which the general path's block copy uses too.

A serving engine's pull moves a few dozen blocks of each of several tensors. numpy moves each tensor's
blocks in one fancy-index copy, a fixed cost per tensor; what the simulator adds around those copies is
a fixed cost per call, so the fewer Python steps the call takes, the closer a multi-tensor pull comes to
numpy copying the same blocks. The link's checks are the gate both one-pass pulls share
(``pull_gate.ready_link``); the checks below are ``plan_pull``'s, ``blocks_ranges``' and the
block copy's, each written as one comparison that only says "it passes"; when one does not, nothing has
changed and the planned path runs from the same state (and names the failure).
"""

from __future__ import annotations

from typing import Callable, Dict, Tuple

import numpy as np

from datadist_sim._world.caches import CacheEntry
from datadist_sim._world.cluster import ClusterNode
from datadist_sim._world.pull_gate import Ready
from datadist_sim._world.requests import PullRequest
from datadist_sim._world.world import SimWorld


def tensor_views(world: SimWorld, entry: CacheEntry) -> Tuple[memoryview, ...]:
    """Each tensor's bytes of a pool-backed cache, resolved once for the cache's life (``CacheEntry.views``,
    dropped when its memory is freed); empty when they cannot be: registered memory, metadata-only
    worlds, or a tensor that is not an allocation of its own."""
    views = entry.views
    if views is None:
        views = ()
        if entry.pool is not None:
            found = [world.memory.backing(a, entry.tensor_size) for a in entry.addrs]
            if all(b is not None for b in found):
                views = tuple(b.data[: entry.tensor_size] for b in found if b is not None)
        entry.views = views
    return views


def block_rows(world: SimWorld, entry: CacheEntry) -> Tuple[np.ndarray, ...]:
    """Each tensor's bytes as an array of blocks, one opaque element per block (one memcpy per block, not
    one per byte), made once from ``tensor_views`` and made again whenever those are."""
    views = tensor_views(world, entry)
    made = entry.rows
    if made is None or made[0] is not views:
        row = _row_type(entry.batch_bytes) if entry.batch_bytes else np.dtype(np.uint8)
        count = entry.batch_size if entry.batch_bytes else 0
        made = (views, tuple(np.frombuffer(v, dtype=row, count=count) for v in views))
        entry.rows = made
    return made[1]


_ROW_TYPES: Dict[int, np.dtype[np.void]] = {}


def _row_type(nbytes: int) -> np.dtype[np.void]:
    """A numpy type of ``nbytes`` opaque bytes, made once per size (making one costs as much as a
    small copy)."""
    row = _ROW_TYPES.get(nbytes)
    if row is None:
        row = _ROW_TYPES.setdefault(nbytes, np.dtype((np.void, nbytes)))
    return row


def blocks_at_once(
    world: SimWorld,
    node: ClusterNode,
    request: PullRequest,
    ready: Ready,
    pass_time: Callable[[float], None],
) -> bool:
    """The pull, whole, under the virtual clock, or False having changed nothing. As the contiguous pull
    of ``pull_shortcut``: the link passed ``ready_link``, no fault rule is loaded and nothing else can
    change the world meanwhile."""
    _, local, store, now = ready
    key, params = request.key, request.params
    remote_id = key.cluster_id
    if params.src_tensors or params.dst_tensors:
        return False
    dst = local.caches.get(request.dst_cache_id)
    if dst is None or dst.released or not dst.is_blocks:
        return False
    src, _, consume = store.lookup(key)  # what it raises, ``plan_pull`` raises here too
    src_blocks, dst_blocks = params.src_blocks, params.dst_blocks
    count, block = len(dst_blocks), dst.batch_bytes
    if (
        not src.is_blocks
        or src.num_tensors != dst.num_tensors
        or src.batch_bytes != block
        or block == 0
        or count == 0
        or len(src_blocks) != count
        or min(dst_blocks) < 0
        or max(dst_blocks) >= dst.batch_size
        or min(src_blocks) < 0
        or max(src_blocks) >= src.batch_size
        or len(set(dst_blocks)) != count  # a block named twice: the per-range order decides
    ):
        return False
    sources, targets = block_rows(world, src), block_rows(world, dst)
    seconds = count * block * src.num_tensors / world.bandwidth(node.cluster_id, remote_id)
    seconds += world.config.message_rtt_s
    if not (sources and targets) or seconds > node.settings.sync_kv_timeout_ms / 1000.0:
        return False
    s_rows = np.asarray(src_blocks, dtype=np.intp)
    d_rows = np.asarray(dst_blocks, dtype=np.intp)
    pass_time(now + seconds - now)  # as ``_pass_time`` with nothing due
    for s, d in zip(sources, targets):
        d[d_rows] = s[s_rows]
    if consume is not None:
        store.consume(src, consume)
    return True
