"""Shared pieces of the reliability suites: run profiles, a snapshot of a world's books, and counters.

``DATADIST_SIM_RELIABILITY=nightly`` selects the long profile; the default ``ci`` profile keeps the
whole reliability suite within a couple of minutes.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any, Dict, Optional, Tuple

from hypothesis import HealthCheck, settings

from datadist_sim._world.world import SimWorld
from datadist_sim.llm_datadist.configs import LLMClusterInfo

PROFILE = os.environ.get("DATADIST_SIM_RELIABILITY", "ci")
NIGHTLY = PROFILE == "nightly"

PROMPT_IP, DECODE_IP = "192.168.1.1", "192.168.2.1"

STATS: Counter[str] = Counter()
"""What the suites explored, printed at the end of the run (``pytest_terminal_summary`` in conftest)."""


def machine_settings(ci_examples: int, ci_steps: int) -> settings:
    """Settings of a state machine: ``ci_examples`` sequences of ``ci_steps`` steps, x10/x2 nightly."""
    return settings(
        max_examples=ci_examples * 10 if NIGHTLY else ci_examples,
        stateful_step_count=ci_steps * 2 if NIGHTLY else ci_steps,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


def snapshot(world: SimWorld) -> Tuple[Any, ...]:
    """Everything a call could change in ``world``'s books (not the bytes: callers compare those)."""
    stores: Dict[int, Any] = {}
    for cid, store in sorted(world.caches.items()):
        pools = tuple(
            None if p is None else (p.used, tuple(sorted(p.allocations().items())), p.limit)
            for p in (store.device_pool, store.host_pool)
        )
        caches = tuple(
            (e.cache_id, tuple(e.addrs), tuple(sorted(e.keys)), e.released, e.registered)
            for e in sorted(store.caches.values(), key=lambda e: e.cache_id)
        )
        stores[cid] = (pools, caches, tuple(sorted(store.key_table.items())), tuple(sorted(store.inflight)))
    nodes = tuple(
        (n.cluster_id, n.role, tuple(n.listeners), tuple(sorted((r, p.broken) for r, p in n.peers.items())))
        for n in sorted(world.nodes, key=lambda n: n.cluster_id)
    )
    return nodes, tuple(sorted(world.listeners.items())), stores, world.memory.backed_bytes, world.now()


def check_books(world: SimWorld) -> None:
    """The world's books balance: every pool's ``used`` is what its live caches reserve and
    ``used + free == capacity``; every key names a live cache batch; every backed byte belongs to a live
    allocation of a live instance (as many as its caches asked for: backing is not rounded to pages);
    every link end is held by a live instance."""
    backed = 0
    for cid, store in world.caches.items():
        assert world.node(cid) is not None, f"store of finalized cluster {cid} remains"
        owned: Dict[int, Dict[int, int]] = {}
        for entry in store.caches.values():
            if entry.pool is not None:
                for addr in entry.addrs:
                    owned.setdefault(id(entry.pool), {})[addr] = entry.pool.round_size(entry.tensor_size)
                backed += entry.tensor_size * len(entry.addrs)
        for pool in (store.device_pool, store.host_pool):
            if pool is None:
                continue
            stats = pool.stats()
            assert stats.used + stats.free_bytes == stats.capacity
            assert pool.allocations() == owned.get(id(pool), {}), f"cluster {cid}: {pool.name} pool leaks"
            assert stats.used == sum(owned.get(id(pool), {}).values())
        for ek, (cache_id, batch) in store.key_table.items():
            entry = store.caches.get(cache_id)
            assert entry is not None, f"cluster {cid}: key {ek} names freed cache {cache_id}"
            assert ek in entry.keys
            assert entry.is_blocks or batch < entry.batch_size
        for entry in store.caches.values():
            assert not (entry.released and not entry.keys), f"released cache {entry.cache_id} kept"
    assert world.memory.backed_bytes == (backed if world.memory.backed else 0)
    for node in world.nodes:
        for remote in node.peers:
            assert remote != node.cluster_id


def link_info(
    remote: int, *, port: Optional[int] = None, remote_ip: str = PROMPT_IP, local_ip: str = DECODE_IP
) -> LLMClusterInfo:
    """The cluster info a client links with: the remote listens on ``remote_ip:port``
    (``26000 + remote`` by default, as :func:`listen_on` opens it)."""
    c = LLMClusterInfo()
    c.remote_cluster_id = remote
    c.append_local_ip_info(local_ip, 0)
    c.append_remote_ip_info(remote_ip, 26000 + remote if port is None else port)
    return c


def listen_on(cid: int) -> str:
    """The ``llm.listenIpInfo`` of cluster ``cid`` that :func:`link_info` points at."""
    return f"{PROMPT_IP}:{26000 + cid}"
