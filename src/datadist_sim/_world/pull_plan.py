"""A pull's plan: the checks a pull makes, in the engine's order, and what it moves. Both ways a pull
runs plan it here: the general path (``pulls``) and the shortcut (``pull_shortcut``), so they check the
same things in the same order and move the same bytes.
"""

from __future__ import annotations

from typing import Optional, Tuple, Union

from datadist_sim._world.cache_table import check_accessible, check_reachable, table_of
from datadist_sim._world.caches import CacheEntry, NodeCaches, legacy_seq_len_check
from datadist_sim._world.cluster import ClusterNode, Mode
from datadist_sim._world.keys import EngineKey
from datadist_sim._world.ranges import (
    BlockRanges,
    Contiguous,
    blocks_ranges,
    check_layer_split,
    contiguous_plan,
)
from datadist_sim._world.requests import PullRequest
from datadist_sim._world.transfer import linked_store
from datadist_sim._world.world import SimWorld, store_of

Plan = Union[BlockRanges, Contiguous]
"""What a pull moves (``nbytes`` in all), made into a list of ranges (``build``) only where a copy goes
range by range."""


def plan_pull(
    world: SimWorld, node: ClusterNode, request: PullRequest
) -> Tuple[NodeCaches, CacheEntry, Optional[EngineKey], Plan]:
    """A pull's checks, in the engine's order, and what it moves: the peer's store, the source cache,
    the key it consumes (None: it consumes none) and the plan. Raises what the first failing check
    gives; changes nothing."""
    key, params, blocks = request.key, request.params, request.blocks
    dst = store_of(world, node).live(request.dst_cache_id)
    if (params.src_tensors or params.dst_tensors) and node.mode is Mode.CACHE_MANAGER:
        # a layer range: the local cache must divide into layers (hixl only; GE v1 checks no such thing,
        # ``dflow/llm_datadist/v1/common/cache_engine.cc:70-95``)
        check_layer_split(dst.num_tensors, params.tensor_num_per_layer, "local")
    store = linked_store(world, node, key.cluster_id, "pulled from")
    with store.lock:
        peer = node.peers[key.cluster_id]  # ``linked_store`` found it
        if peer.by_table:
            # a one-sided read (``PullCacheByGet``): the cache as this link's copy of the table has it,
            # then both ends registered with the transport (``data_transfer_client.cc:231-235``)
            src, src_batch = table_of(peer, store).lookup(key)
            check_accessible(dst, "local")
            check_accessible(src, "remote")
            consume: Optional[EngineKey] = None
        else:
            src, src_batch, consume = store.lookup(key)
        if blocks:
            moves: Plan = blocks_ranges(src, src_batch, dst, params)
        else:
            if store.legacy_codes:
                legacy_seq_len_check(src, dst, params.size, params.src_offset, params.dst_offset)
            moves = contiguous_plan(src, src_batch, dst, params)
        if peer.by_table:
            check_reachable(store, src)
        return store, src, consume, moves
