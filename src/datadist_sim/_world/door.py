"""The door: the one interface through which the faces (``llm_datadist``, ``llm_datadist_v1``, ``hixl``)
reach the world.

A face validates a public call in the real library's order and with its messages, then translates it into
one typed request of ``requests`` (``CacheSpec``, ``PullRequest``, ``PushRequest`` ...). From the
door on, the world decides and acts: the same request from either face takes the same path, so v1 and v2
share everything after their own checks. The names a face needs to hold world objects (``SimWorld``,
``ClusterNode``, ``SimError`` ...) are re-exported here, so a face imports this module and no other of
the world.

The tools and the fabric, which build, run and serve worlds rather than make face calls, reach the world
through ``surface`` instead; this module holds only what a face needs.
"""

from __future__ import annotations

from typing import List, Sequence, Tuple

import numpy as np

from datadist_sim._status import LLMStatusCode
from datadist_sim._world import hixl_engines, hixl_transfers, links, pulls, pushes
from datadist_sim._world.cluster import ClusterNode as ClusterNode
from datadist_sim._world.cluster import Endpoint as Endpoint
from datadist_sim._world.cluster import Mode as Mode
from datadist_sim._world.cluster import NodeSettings as NodeSettings
from datadist_sim._world.cluster import Role as Role
from datadist_sim._world.current import current_world as current_world
from datadist_sim._world.errors import SimError as SimError
from datadist_sim._world.fault_effects import meet_door_faults as meet_door_faults
from datadist_sim._world.hixl_state import EngineKind as EngineKind
from datadist_sim._world.hixl_state import EngineSettings as EngineSettings
from datadist_sim._world.hixl_state import HixlEngine as HixlEngine
from datadist_sim._world.keys import Key as Key
from datadist_sim._world.ownership import check_register
from datadist_sim._world.requests import AddrPushRequest as AddrPushRequest
from datadist_sim._world.requests import Allocated as Allocated
from datadist_sim._world.requests import CacheSpec as CacheSpec
from datadist_sim._world.requests import CopyRequest as CopyRequest
from datadist_sim._world.requests import LinkRequest as LinkRequest
from datadist_sim._world.requests import PullParams as PullParams
from datadist_sim._world.requests import PullRequest as PullRequest
from datadist_sim._world.requests import PushRequest as PushRequest
from datadist_sim._world.requests import SwapRequest as SwapRequest
from datadist_sim._world.requests import whole_batch as whole_batch
from datadist_sim._world.world import SimWorld as SimWorld
from datadist_sim._world.world import store_of
from datadist_sim.faults.effects import at_door as at_door
from datadist_sim.faults.rules import SERVING as SERVING

# -- caches -------------------------------------------------------------------------------------------


def allocate(world: SimWorld, node: ClusterNode, spec: CacheSpec) -> Allocated:
    """A cache from the node's memory pool, bound to ``spec.keys``."""
    entry = store_of(world, node).allocate(
        spec.num_tensors,
        spec.tensor_size,
        spec.batch_size,
        device=spec.device,
        is_blocks=spec.is_blocks,
        keys=spec.keys,
    )
    return Allocated(entry.cache_id, list(entry.addrs))


def register(world: SimWorld, node: ClusterNode, spec: CacheSpec, addrs: List[int]) -> Allocated:
    """A cache over memory the caller owns (``addrs``, one per tensor), bound to ``spec.keys``."""
    with world.lock:
        check_register(world, node.cluster_id, addrs, spec.tensor_size)
        entry = store_of(world, node).register(
            addrs,
            spec.tensor_size,
            spec.batch_size,
            device=spec.device,
            is_blocks=spec.is_blocks,
            keys=spec.keys,
            remote_accessible=spec.remote_accessible,
        )
    return Allocated(entry.cache_id, list(entry.addrs))


def free(world: SimWorld, node: ClusterNode, cache_id: int, *, missing_ok: bool, needs_pool: bool) -> None:
    """Drop a cache's id (the memory goes once no key holds it); ``needs_pool``: no pool configured is
    ``LLM_FEATURE_NOT_ENABLED`` (the v2 engine's check)."""
    store = store_of(world, node)
    if needs_pool and store.device_pool is None and store.host_pool is None:
        raise SimError(LLMStatusCode.LLM_FEATURE_NOT_ENABLED, "no memory pool is configured")
    store.deallocate(cache_id, missing_ok=missing_ok)


def unregister(world: SimWorld, node: ClusterNode, cache_id: int) -> None:
    store_of(world, node).unregister(cache_id)


def remove_key(world: SimWorld, node: ClusterNode, key: Key) -> None:
    store_of(world, node).remove_key(key)


def tensor_view(world: SimWorld, node: ClusterNode, cache_id: int, tensor_index: int) -> np.ndarray:
    """The bytes of one tensor of a live cache, as a writable view of its simulated memory."""
    entry = store_of(world, node).live(cache_id)
    return world.memory.view(entry.addrs[tensor_index], entry.tensor_size)


# -- data ---------------------------------------------------------------------------------------------


def pull(world: SimWorld, node: ClusterNode, request: PullRequest) -> None:
    """Pull what ``request.key`` names on its cluster into a local cache; all or nothing (``pulls.pull``)."""
    pulls.pull(world, node, request)


def push(world: SimWorld, node: ClusterNode, request: PushRequest) -> None:
    pushes.push(
        world, node, request.src_cache_id, request.src_batch, request.key, request.params, kind=request.kind
    )


def push_to_addrs(world: SimWorld, node: ClusterNode, request: AddrPushRequest) -> None:
    pushes.push_to_addrs(world, node, *request)


def copy_cache(world: SimWorld, node: ClusterNode, request: CopyRequest) -> None:
    pushes.copy_cache(world, node, *request)


def copy_blocks(world: SimWorld, node: ClusterNode, cache_id: int, pairs: Sequence[Tuple[int, int]]) -> None:
    pushes.copy_blocks(world, node, cache_id, pairs)


def swap_blocks(world: SimWorld, request: SwapRequest) -> None:
    """Host <-> device block moves; every range is checked before a byte moves (``space_copy``)."""
    size = request.block_size
    world.space_copy(
        [
            (dst + d * size, src + s * size, size)
            for src, dst in zip(request.src_addrs, request.dst_addrs)
            for s, d in request.pairs
        ]
    )


# -- links --------------------------------------------------------------------------------------------


def link_clusters(
    world: SimWorld, node: ClusterNode, requests: List[LinkRequest], timeout_ms: int
) -> Tuple[LLMStatusCode, List[LLMStatusCode]]:
    """Link ``node`` (the client) to each requested server: the overall code and one per request; engine
    failures come back as codes, never raised."""
    return links.link_clusters(world, node, requests, timeout_ms)


def unlink_clusters(
    world: SimWorld, node: ClusterNode, requests: List[LinkRequest], timeout_ms: int, force: bool
) -> Tuple[LLMStatusCode, List[LLMStatusCode]]:
    """Tear links down, both ends (only this end with ``force``): codes as ``link_clusters``."""
    return links.unlink_clusters(world, node, requests, timeout_ms, force)


def check_link_status(world: SimWorld, node: ClusterNode, remote_cluster_id: int) -> None:
    """The heartbeat over the link to ``remote_cluster_id``; raises ``SimError`` when it is not linked or
    does not answer."""
    links.check_link_status(world, node, remote_cluster_id)


# -- hixl engines (the ``hixl`` face) ------------------------------------------------------------------

hixl_close = hixl_engines.close_engine
hixl_connect = hixl_engines.connect
hixl_connect_async = hixl_engines.connect_async
hixl_connect_status = hixl_engines.connect_status
hixl_connect_statuses = hixl_engines.connect_statuses
hixl_deregister = hixl_engines.deregister
hixl_disconnect = hixl_engines.disconnect
hixl_drain_notifies = hixl_engines.drain_notifies
hixl_notify = hixl_engines.notify
hixl_open = hixl_engines.open_engine
hixl_register = hixl_engines.register
hixl_transfer = hixl_transfers.transfer
hixl_transfer_poll = hixl_transfers.transfer_poll
hixl_transfer_poll_all = hixl_transfers.transfer_poll_all
hixl_transfer_start = hixl_transfers.transfer_start
