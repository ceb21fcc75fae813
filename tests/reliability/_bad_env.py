"""A linked Prompt/Decoder pair, in either mode, with caches of every kind (one stale of each kind), for
the bad-input suites; ``Env.state()`` is everything a call could change, bytes included."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Dict, List, Tuple

import numpy as np
from tests.reliability._common import link_info, listen_on, snapshot

from datadist_sim._world.current import activate
from datadist_sim._world.world import SimConfig, SimWorld
from datadist_sim.llm_datadist.configs import LLMRole
from datadist_sim.llm_datadist.data_type import DataType
from datadist_sim.llm_datadist.status import LLMStatusCode
from datadist_sim.llm_datadist.v2.llm_datadist import LLMDataDist
from datadist_sim.llm_datadist.v2.llm_types import (
    BlocksCacheKey,
    Cache,
    CacheDesc,
    CacheKey,
    KvCache,
    Placement,
)

S = LLMStatusCode
P_ID, D_ID = 1, 2
PAD = 2**64 - 1


def cache_desc_of(
    batch: int, num_tensors: int = 2, placement: Placement = Placement.DEVICE, hidden: int = 64
) -> CacheDesc:
    return CacheDesc(num_tensors, [batch, 16, hidden], DataType.DT_FLOAT16, placement)


@dataclass
class Env:
    """A linked Prompt/Decoder pair with caches of every kind, one stale (deallocated) of each kind."""

    world: SimWorld
    p: LLMDataDist
    d: LLMDataDist
    caches: Dict[str, Any]
    buffers: List[np.ndarray]

    def bytes_(self) -> List[bytes]:
        from datadist_sim._world.address_space import tensor_views

        out = []
        for cache in self.caches.values():
            addrs = addrs_of(cache)
            if addrs and self.world.memory.allocation_containing(addrs[0]):
                shape = (cache.cache_desc.size,)
                out += [v.tobytes() for v in tensor_views(self.world.memory, addrs, shape, np.uint8)]
        return out

    def state(self) -> Tuple[Any, ...]:
        return snapshot(self.world), self.bytes_()


def addrs_of(cache: Any) -> List[int]:
    if isinstance(cache, Cache):
        return list(cache.tensor_addrs)
    return list(cache.per_device_tensor_addrs[0]) if cache.per_device_tensor_addrs else []


def fill_caches(world: SimWorld, caches: Dict[str, Any]) -> None:
    from datadist_sim._world.address_space import tensor_views

    rng = np.random.default_rng(0)
    for cache in caches.values():
        addrs = addrs_of(cache)
        if addrs and world.memory.allocation_containing(addrs[0]):
            for v in tensor_views(world.memory, addrs, (cache.cache_desc.size,), np.uint8):
                v[...] = rng.integers(0, 256, v.shape, dtype=np.uint8)


def make_env(v1: bool = False) -> Env:
    if v1:
        return make_env_v1()
    world = SimWorld(seed=2, config=SimConfig(v2_cluster_limit=True))
    pool = json.dumps({"memory_size": 1 << 20, "page_shift": 12})
    opts = {"ge.exec.deviceId": "0", "llm.EnableCacheManager": "1", "llm.MemPoolConfig": pool}
    with activate(world):
        p = LLMDataDist(LLMRole.PROMPT, P_ID)
        p.init({**opts, "llm.listenIpInfo": listen_on(P_ID)})
        d = LLMDataDist(LLMRole.DECODER, D_ID)
        d.init({**opts, "llm.HostMemPoolConfig": pool})
    assert d.link_clusters([link_info(P_ID)])[0] is S.LLM_SUCCESS
    pcm, dcm = p.cache_manager, d.cache_manager
    caches = {
        "src": pcm.allocate_cache(cache_desc_of(2), [CacheKey(P_ID, 1), CacheKey(P_ID, 2)]),
        "bsrc": pcm.allocate_blocks_cache(cache_desc_of(4), BlocksCacheKey(P_ID, 0)),
        "dst": dcm.allocate_cache(cache_desc_of(2)),
        "dst2": dcm.allocate_cache(cache_desc_of(2)),
        "wide": dcm.allocate_cache(cache_desc_of(2, num_tensors=4)),
        "bdst": dcm.allocate_blocks_cache(cache_desc_of(4)),
        "bwide": dcm.allocate_blocks_cache(cache_desc_of(4, hidden=32, placement=Placement.HOST)),
        "host": dcm.allocate_blocks_cache(cache_desc_of(4, placement=Placement.HOST)),
    }
    stale = dcm.allocate_cache(cache_desc_of(2))
    dcm.deallocate_cache(stale)
    stale_blocks = dcm.allocate_blocks_cache(cache_desc_of(4))
    dcm.deallocate_blocks_cache(stale_blocks)
    caches.update(stale=stale, stale_blocks=stale_blocks)
    fill_caches(world, caches)
    return Env(world, p, d, caches, [np.zeros(8192, np.uint8) for _ in range(2)])


def make_env_v1() -> Env:
    """The same in KvCacheManager mode: a Prompt (keys, blocks key) and a linked Decoder."""
    world = SimWorld(seed=2)
    opts = {"ge.exec.deviceId": "0", "ge.flowGraphMemMaxSize": str(1 << 20)}
    with activate(world):
        p = LLMDataDist(LLMRole.PROMPT, P_ID)
        p.init({**opts, "llm.listenIpInfo": listen_on(P_ID)})
        d = LLMDataDist(LLMRole.DECODER, D_ID)
        d.init(opts)
    assert d.link_clusters([link_info(P_ID)])[0] is S.LLM_SUCCESS
    pkm, dkm = p.kv_cache_manager, d.kv_cache_manager
    buffers = [np.zeros(8192, np.uint8) for _ in range(2)]
    caches = {
        "src": pkm.allocate_cache(cache_desc_of(2), [CacheKey(P_ID, 1), CacheKey(P_ID, 2)]),
        "bsrc": pkm.allocate_blocks_cache(cache_desc_of(4), BlocksCacheKey(P_ID, 0)),
        "dst": dkm.allocate_cache(cache_desc_of(2)),
        "dst2": dkm.allocate_cache(cache_desc_of(2)),
        "wide": dkm.allocate_cache(cache_desc_of(2, num_tensors=4)),
        "bdst": dkm.allocate_blocks_cache(cache_desc_of(4)),
        "host": KvCache.create_cpu_cache(
            cache_desc_of(4, placement=Placement.HOST), [int(b.ctypes.data) for b in buffers]
        ),
    }
    stale = dkm.allocate_cache(cache_desc_of(2))
    dkm.deallocate_cache(stale)
    caches["stale"] = stale
    fill_caches(world, caches)
    return Env(world, p, d, caches, buffers)


def names_arg(exc: BaseException, arg: str) -> bool:
    text = str(exc)
    return arg in text or arg.replace("_", " ") in text
