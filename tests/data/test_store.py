"""The world's cache store (``_world.caches``): ids, key bookkeeping (§7.1), deferred frees, no leaks."""

from __future__ import annotations

from typing import Dict, List, Set, Tuple

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import datadist_sim
from datadist_sim._status import LLMStatusCode
from datadist_sim._world.address_space import AddressSpace
from datadist_sim._world.caches import INVALID_ID, NodeCaches, PackedKey
from datadist_sim._world.cluster import Mode, NodeSettings
from datadist_sim._world.errors import SimError
from datadist_sim._world.world import SimWorld
from datadist_sim.llm_datadist.v2.llm_types import CacheKey

from .conftest import P_ID, pair, pool

S = LLMStatusCode


def store(space: AddressSpace) -> NodeCaches:
    settings = NodeSettings(options={"llm.MemPoolConfig": pool()})
    return NodeCaches(space, Mode.CACHE_MANAGER, settings)


def key(req: int) -> PackedKey:
    return (P_ID, -1, 0, req, INVALID_ID, 0, False)


def test_cache_ids_start_at_1_per_store() -> None:
    space = AddressSpace()
    a, b = store(space), store(space)
    assert [a.allocate(1, 64, 1, device=True, is_blocks=False).cache_id for _ in range(2)] == [1, 2]
    assert b.allocate(1, 64, 1, device=True, is_blocks=False).cache_id == 1


def test_failed_allocation_binds_no_key_and_leaks_nothing() -> None:
    space = AddressSpace()
    s = store(space)
    with pytest.raises(SimError) as info:
        s.allocate(4, 32 << 20, 1, device=True, is_blocks=False, keys=[key(1)])
    assert info.value.code is S.LLM_OUT_OF_MEMORY
    assert s.key_table == {}
    assert s.device_pool is not None
    assert s.device_pool.used == 0
    assert space.backed_bytes == 0


def test_bad_pool_config_is_param_invalid() -> None:
    settings = NodeSettings(options={"llm.MemPoolConfig": "{not json"})
    with pytest.raises(SimError) as info:
        NodeCaches(AddressSpace(), Mode.CACHE_MANAGER, settings)
    assert info.value.code is S.LLM_PARAM_INVALID


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["alloc", "dealloc", "remove", "consume"]), st.integers(0, 5)),
        max_size=30,
    )
)
def test_key_bookkeeping_model(ops: List[Tuple[str, int]]) -> None:
    """Against a model: memory stays while the id or any key holds the cache, keys are unique."""
    space = AddressSpace()
    s = store(space)
    ids: Dict[int, Set[int]] = {}  # cache id -> live keys (model)
    released: Set[int] = set()
    next_req = 0
    for op, n in ops:
        if op == "alloc":
            reqs = [next_req + i for i in range(n % 3)]
            next_req += len(reqs)
            entry = s.allocate(1, 4096, 2, device=True, is_blocks=False, keys=[key(r) for r in reqs])
            ids[entry.cache_id] = set(reqs)
        elif op == "dealloc" and ids:
            cid = sorted(ids)[n % len(ids)]
            s.deallocate(cid, missing_ok=True)
            released.add(cid)
        elif op in ("remove", "consume") and next_req:
            req = n % next_req
            if op == "remove":
                s.remove_key(key(req))
            else:
                if any(req in held for held in ids.values()):
                    entry, _, consume = s.lookup(key(req))
                    assert consume is not None
                    s._drop_key(entry, consume)
                else:
                    with pytest.raises(SimError) as info:
                        s.lookup(key(req))
                    assert info.value.code is S.LLM_KV_CACHE_NOT_EXIST
            for held in ids.values():
                held.discard(req)
        for cid in list(ids):
            if cid in released and not ids[cid]:
                del ids[cid]
        assert set(s.caches) == set(ids)
        assert s.device_pool is not None
        assert s.device_pool.used == len(ids) * 64 * 1024
    s.free_all()
    assert space.backed_bytes == 0


def test_public_tensor_views(world: SimWorld) -> None:
    p, d = pair(v2=True)
    src = p.cache_manager.allocate_cache(datadist_sim_desc(), [CacheKey(P_ID, 1)])
    dst = d.cache_manager.allocate_cache(datadist_sim_desc())
    for i, v in enumerate(datadist_sim.tensor_views(src)):
        v[...] = i + 1
    d.cache_manager.pull_cache(CacheKey(P_ID, 1), dst)
    got = datadist_sim.tensor_views(dst)
    assert [float(v.mean()) for v in got] == [1.0, 2.0]
    assert got[0].shape == (1, 4, 8)
    assert got[0].dtype == np.float16
    raw = datadist_sim.tensor_views(dst.tensor_addrs, [32], np.uint16, world=world)
    assert raw[0].shape == (32,)


def datadist_sim_desc():  # type: ignore[no-untyped-def]
    from datadist_sim.llm_datadist.data_type import DataType
    from datadist_sim.llm_datadist.v2.llm_types import CacheDesc

    return CacheDesc(2, [1, 4, 8], DataType.DT_FLOAT16)


def test_metadata_only_world_transfers_without_bytes() -> None:
    from datadist_sim._world.current import activate
    from datadist_sim._world.world import SimConfig
    from datadist_sim.llm_datadist.status import LLMStatusCode as Code
    from datadist_sim.llm_datadist.v2.llm_datadist import finalize_all

    w = SimWorld(config=SimConfig(metadata_only=True))
    with activate(w):
        try:
            p, d = pair(v2=True)
            huge = datadist_sim_desc()
            p.cache_manager.allocate_cache(huge, [CacheKey(P_ID, 1)])
            dst = d.cache_manager.allocate_cache(datadist_sim_desc())
            d.cache_manager.pull_cache(CacheKey(P_ID, 1), dst)
            assert w.memory.backed_bytes == 0
            with pytest.raises(SimError) as info:
                datadist_sim.tensor_views(dst)
            assert info.value.code is Code.LLM_FEATURE_NOT_ENABLED
        finally:
            finalize_all(w)
