"""Pushes and local copies: the push-direction transfers (``push``, ``push_to_addrs``; the caller's memory
is the source, the peer's is written), run by the transfer engine (``transfer``) and serialised per
link, and the copies inside one cluster's own memory (``copy_cache``, ``copy_blocks``), which need no
link and meet no transfer fault.
"""

from __future__ import annotations

from typing import Callable, List, Optional, Sequence, Tuple

from datadist_sim._status import LLMStatusCode
from datadist_sim._world.cache_table import check_accessible, check_reachable, table_of
from datadist_sim._world.cluster import ClusterNode
from datadist_sim._world.errors import SimError
from datadist_sim._world.keys import PackedKey
from datadist_sim._world.ownership import check_destinations, enter_copy, leave_copy
from datadist_sim._world.ranges import Range, addr_ranges, push_ranges
from datadist_sim._world.requests import PullParams
from datadist_sim._world.transfer import link_activity, linked_store, req_id_of, run_transfer
from datadist_sim._world.world import SimWorld, store_of

__all__ = ["copy_blocks", "copy_cache", "push", "push_to_addrs"]
_P = LLMStatusCode.LLM_PARAM_INVALID


def _serialised(
    world: SimWorld,
    node: ClusterNode,
    remote_id: int,
    op: str,
    plan: Callable[[], List[Range]],
    kind: str = "push",
    req_id: Optional[int] = None,
) -> None:
    """A push-direction transfer (the caller's memory is the source), serialised per link."""
    before = enter_copy(remote_id, node.cluster_id)  # the remote's memory is written
    try:
        with link_activity(world, node, remote_id, kind) as link_lock, link_lock:
            run_transfer(world, node, op, remote_id, req_id, plan, world.space_copy, remote_is_src=False)
    finally:
        leave_copy(before)


def push(
    world: SimWorld,
    node: ClusterNode,
    src_cache_id: int,
    src_batch: int,
    key: PackedKey,
    params: PullParams,
    *,
    kind: str = "push",
) -> None:
    """Write the local cache ``src_cache_id`` into what ``key`` names on its cluster; never consumes keys.

    ``key`` is found as the engine's ``FindCacheEntry`` finds it (``NodeCaches.find_entry``); with no
    destination blocks in ``params`` the push is cache-to-cache, whichever kind each cache is
    (``ranges.push_ranges``).
    """

    def plan() -> List[Range]:
        src = store_of(world, node).live(src_cache_id)
        store = linked_store(world, node, key.cluster_id, "pushed to")
        with store.lock:
            peer = node.peers[key.cluster_id]  # ``linked_store`` found it
            if not peer.by_table:
                dst, dst_batch = store.find_entry(key)
                return push_ranges(src, src_batch, dst, dst_batch, params)
            # a one-sided write: the local cache first, then the remote one as this link's copy of the
            # table has it (``layer_wise_transfer_job.cc:248-251``, then ``:198`` and ``:217``)
            check_accessible(src, "local")
            dst, dst_batch = table_of(peer, store).find_entry(key)
            check_accessible(dst, "remote")
            ranges = push_ranges(src, src_batch, dst, dst_batch, params)
            check_reachable(store, dst)
            return ranges

    _serialised(world, node, key.cluster_id, "push_cache", plan, kind, req_id_of(key))


def copy_cache(
    world: SimWorld,
    node: ClusterNode,
    dst_id: int,
    src_id: int,
    dst_batch: int,
    src_batch: int,
    offset: int,
    size: int,
) -> None:
    """Local copy of one batch of each tensor (``offset``/``size`` in bytes within the batch)."""
    with world.lock:
        store = store_of(world, node)
        dst = store.live(dst_id)
        src = store.live(src_id)
        if src.num_tensors != dst.num_tensors:
            raise SimError(_P, f"num_tensors mismatch: src {src.num_tensors}, dst {dst.num_tensors}")
        if dst_batch >= dst.batch_size or src_batch >= src.batch_size:
            raise SimError(_P, f"batch index out of range: dst {dst_batch}, src {src_batch}")
        nbytes = src.batch_bytes - offset if size == -1 else size
        if nbytes < 0 or offset + nbytes > src.batch_bytes or offset + nbytes > dst.batch_bytes:
            raise SimError(_P, f"offset {offset} + size {nbytes} exceeds the batch")
        _local_copy(
            world,
            node,
            [
                (d + dst_batch * dst.batch_bytes + offset, s + src_batch * src.batch_bytes + offset, nbytes)
                for s, d in zip(src.addrs, dst.addrs)
            ],
        )


def copy_blocks(world: SimWorld, node: ClusterNode, cache_id: int, pairs: Sequence[Tuple[int, int]]) -> None:
    """Local copy of blocks ``src -> dst`` inside one blocks cache."""
    with world.lock:
        entry = store_of(world, node).live(cache_id)
        block = entry.batch_bytes
        for s, d in pairs:
            if not (0 <= s < entry.batch_size and 0 <= d < entry.batch_size):
                raise SimError(_P, f"block pair {s}->{d} out of range [0, {entry.batch_size})")
        _local_copy(
            world, node, [(a + d * block, a + s * block, block) for a in entry.addrs for s, d in pairs]
        )


def _local_copy(world: SimWorld, node: ClusterNode, ranges: List[Range]) -> None:
    """Copies inside one cluster's own memory: it is both parties."""
    before = enter_copy(node.cluster_id, node.cluster_id)
    try:
        world.space_copy(ranges)
    finally:
        leave_copy(before)


def push_to_addrs(
    world: SimWorld,
    node: ClusterNode,
    remote_id: int,
    src_cache_id: int,
    src_batch: int,
    tensor_indices: Sequence[int],
    dst_addrs: Sequence[int],
    src_blocks: Sequence[int],
    dst_blocks: Sequence[int],
    dst_block_size: int,
) -> None:
    """``transfer_cache_async`` with a ``TransferConfig``: write local tensors to remote raw addresses
    (planned by ``ranges.addr_ranges``), each of which must be memory of ``remote_id``
    (``ownership.check_destinations``)."""

    def plan() -> List[Range]:
        src = store_of(world, node).live(src_cache_id)
        linked_store(world, node, remote_id, "pushed to")
        ranges = addr_ranges(
            src, src_batch, tensor_indices, dst_addrs, src_blocks, dst_blocks, dst_block_size
        )
        check_destinations(world, remote_id, ranges)
        return ranges

    _serialised(world, node, remote_id, "transfer_cache_async", plan, "transfer")
