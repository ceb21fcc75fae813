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

from typing import Dict, List, Sequence, Tuple

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
from datadist_sim._world.hixl_pool import ConnectState
from datadist_sim._world.hixl_state import Desc, OpState
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


def hixl_open(world: SimWorld, name: str, settings: EngineSettings) -> HixlEngine:
    """``initialize``: an engine named ``name``, listening when its port is above 0."""
    return hixl_engines.open_engine(world, name, settings)


def hixl_close(world: SimWorld, engine: HixlEngine) -> None:
    """``finalize``: the engine's listener, connections, memory, requests and notifies go."""
    hixl_engines.close_engine(world, engine)


def hixl_register(world: SimWorld, engine: HixlEngine, addr: int, nbytes: int, device: bool) -> int:
    """``register_mem``: a handle for ``[addr, addr + nbytes)``."""
    return hixl_engines.register(world, engine, addr, nbytes, device)


def hixl_deregister(world: SimWorld, engine: HixlEngine, handle: int) -> None:
    """``deregister_mem``."""
    hixl_engines.deregister(world, engine, handle)


def hixl_connect(world: SimWorld, engine: HixlEngine, remote: str, timeout_s: float) -> None:
    """``connect`` to the engine serving ``remote`` (``"ip:port"``)."""
    hixl_engines.connect(world, engine, remote, timeout_s)


def hixl_disconnect(world: SimWorld, engine: HixlEngine, remote: str, timeout_s: float) -> None:
    """``disconnect`` this engine's client connection to ``remote``."""
    hixl_engines.disconnect(world, engine, remote, timeout_s)


def hixl_connect_async(
    world: SimWorld, engine: HixlEngine, remote: str, timeout_s: float, connect: bool
) -> None:
    """``connect_async`` (``connect``) or ``disconnect_async``: queued in the engine's connect pool."""
    hixl_engines.connect_async(world, engine, remote, timeout_s, connect)


def hixl_connect_status(world: SimWorld, engine: HixlEngine, remote: str) -> ConnectState:
    """``get_async_connect_status`` of ``remote``."""
    return hixl_engines.connect_status(world, engine, remote)


def hixl_connect_statuses(world: SimWorld, engine: HixlEngine) -> Dict[str, ConnectState]:
    """``get_all_async_connect_status``."""
    return hixl_engines.connect_statuses(world, engine)


def hixl_notify(
    world: SimWorld, engine: HixlEngine, remote: str, name: bytes, msg: bytes, timeout_s: float
) -> None:
    """``send_notify`` to the peer's server side."""
    hixl_engines.notify(world, engine, remote, name, msg, timeout_s)


def hixl_drain_notifies(world: SimWorld, engine: HixlEngine) -> List[Tuple[bytes, bytes]]:
    """``get_notifies``: every notify received; the queue empties."""
    return hixl_engines.drain_notifies(world, engine)


def hixl_transfer(
    world: SimWorld, engine: HixlEngine, remote: str, write: bool, descs: Sequence[Desc], timeout_s: float
) -> None:
    """``transfer_sync``: all the described ranges move, or none."""
    hixl_transfers.transfer(world, engine, remote, write, descs, timeout_s)


def hixl_transfer_start(
    world: SimWorld, engine: HixlEngine, remote: str, write: bool, descs: Sequence[Desc], user_data: int
) -> int:
    """``transfer_async``: the request's number."""
    return hixl_transfers.transfer_start(world, engine, remote, write, descs, user_data)


def hixl_transfer_poll(world: SimWorld, engine: HixlEngine, req: int) -> OpState:
    """``get_transfer_status`` of request ``req``."""
    return hixl_transfers.transfer_poll(world, engine, req)


def hixl_transfer_poll_all(
    world: SimWorld, engine: HixlEngine, max_count: int, skip_waiting: bool
) -> List[Tuple[int, int, OpState]]:
    """``get_all_transfer_status`` (``hixl_cs``)."""
    return hixl_transfers.transfer_poll_all(world, engine, max_count, skip_waiting)
