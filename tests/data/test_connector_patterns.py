"""What serving-engine connectors do that the rest of the suite does not drive: a Prompt that registers
a second blocks cache under its ``BlocksCacheKey``, links recycled after minutes idle, and a pool of
pulling threads beside another that links and unlinks other Prompts. Vendor facts:
docs/vendor_facts.md, "Connectors and defects"."""

from __future__ import annotations

import threading
from typing import Callable, List

import numpy as np
import pytest

import datadist_sim
from datadist_sim._status_v1 import LLM_ERRORS, as_code
from datadist_sim._world.world import SimWorld
from datadist_sim.llm_datadist.data_type import DataType
from datadist_sim.llm_datadist.status import LLMStatusCode
from datadist_sim.llm_datadist.v2.llm_types import BlocksCacheKey, CacheDesc

from ._books import books, contents, fill
from .conftest import D_ID, P_ID, pair

S = LLMStatusCode
BLOCKS, BLOCK_ELEMS = 8, 16


def code_of(call: Callable[[], object]) -> LLMStatusCode:
    with pytest.raises(LLM_ERRORS) as info:
        call()
    return as_code(info.value.status_code)


def _kv(value: float) -> List[np.ndarray]:
    """One layer's K and V as a serving engine allocates them: [blocks, block elements] each."""
    return [np.full((BLOCKS, BLOCK_ELEMS), value + i, dtype=np.float16) for i in range(2)]


def _blocks_desc() -> CacheDesc:
    return CacheDesc(2, [BLOCKS, BLOCK_ELEMS], DataType.DT_FLOAT16)


# -- a second blocks cache under one BlocksCacheKey ------------------------------------------------


def test_registering_a_second_blocks_cache_under_one_key_takes_the_key_over(world: SimWorld) -> None:
    """hixl binds a registered blocks cache's key by assignment (``cache_manager.cc:138-149, 264-265``),
    so the last registration wins and a pull by the key reads it (``send_state.cc:173-178``); each
    unregister drops the key only where it still names that cache (``cache_manager.cc:284-291``)."""
    p, d = pair(v2=True)
    key = BlocksCacheKey(P_ID, 0)
    old_kv, new_kv = _kv(1.0), _kv(10.0)
    old = p.cache_manager.register_blocks_cache(_blocks_desc(), [a.ctypes.data for a in old_kv], key)
    new = p.cache_manager.register_blocks_cache(_blocks_desc(), [a.ctypes.data for a in new_kv], key)
    assert new.cache_id != old.cache_id
    dst_kv = _kv(0.0)
    dst = d.cache_manager.register_blocks_cache(_blocks_desc(), [a.ctypes.data for a in dst_kv])
    d.cache_manager.pull_blocks(key, dst, [3, 5], [0, 1])
    for src, got in zip(new_kv, dst_kv):
        assert np.array_equal(got[[0, 1]], src[[3, 5]])
    # the first cache, keyless now, goes without taking the key with it
    p.cache_manager.unregister_cache(old.cache_id)
    d.cache_manager.pull_blocks(key, dst, [6], [2])
    for src, got in zip(new_kv, dst_kv):
        assert np.array_equal(got[2], src[6])
    p.cache_manager.unregister_cache(new.cache_id)
    before = [a.copy() for a in dst_kv]
    assert code_of(lambda: d.cache_manager.pull_blocks(key, dst, [0], [3])) is S.LLM_KV_CACHE_NOT_EXIST
    assert all(np.array_equal(a, b) for a, b in zip(dst_kv, before))
    d.cache_manager.unregister_cache(dst.cache_id)


def test_a_blocks_key_taken_over_from_an_allocated_cache_is_released_by_the_new_owner(
    world: SimWorld,
) -> None:
    """The takeover holds whichever cache had the key: an allocated one keeps its memory and blocks but no
    longer answers the key; a new ``allocate_blocks_cache`` under the key is still refused while the
    registered cache holds it (``CheckCacheKeys``, ``cache_manager.cc:248-251``)."""
    p, d = pair(v2=True)
    key = BlocksCacheKey(P_ID, 0)
    allocated = p.cache_manager.allocate_blocks_cache(_blocks_desc(), key)
    kv = _kv(5.0)
    registered = p.cache_manager.register_blocks_cache(_blocks_desc(), [a.ctypes.data for a in kv], key)
    assert code_of(lambda: p.cache_manager.allocate_blocks_cache(_blocks_desc(), key)) is S.LLM_PARAM_INVALID
    dst = d.cache_manager.allocate_blocks_cache(_blocks_desc())
    d.cache_manager.pull_blocks(key, dst, [7], [0])
    p.cache_manager.deallocate_blocks_cache(
        allocated
    )  # no key of its own any more: nothing else goes with it
    d.cache_manager.pull_blocks(key, dst, [7], [1])
    p.cache_manager.unregister_cache(registered.cache_id)
    again = p.cache_manager.allocate_blocks_cache(_blocks_desc(), key)  # the key is free again
    p.cache_manager.deallocate_blocks_cache(again)
    d.cache_manager.deallocate_blocks_cache(dst)


# -- links recycled after minutes idle -------------------------------------------------------------

IDLE_S = 180.0
"""A connector's idle limit: past it, the link is torn down (``force=True``) and made on the next request."""


class _RecyclingConnector:
    """The Decode side of a connector that recycles idle links, as serving engines do to free HCCL
    resources: before each request, a link idle for longer than ``IDLE_S`` is unlinked with
    ``force=True``; a request with no link links first."""

    def __init__(self, world: SimWorld, decode: object, cluster: object) -> None:
        self.world, self.decode, self.cluster = world, decode, cluster
        self.last_used = world.now()
        self.linked = True
        self.relinks = 0

    def request(self, pull: Callable[[], None]) -> None:
        dd = self.decode
        if self.linked and self.world.now() - self.last_used > IDLE_S:
            assert dd.unlink_clusters([self.cluster], 5000, force=True) == (S.LLM_SUCCESS, [S.LLM_SUCCESS])  # type: ignore[attr-defined]
            self.linked = False
        if not self.linked:
            assert dd.link_clusters([self.cluster], 5000) == (S.LLM_SUCCESS, [S.LLM_SUCCESS])  # type: ignore[attr-defined]
            self.linked = True
            self.relinks += 1
        pull()
        self.last_used = self.world.now()


@pytest.mark.parametrize("v2", [True, False], ids=["CacheManager", "KvCacheManager"])
def test_links_recycled_after_minutes_idle_move_the_right_bytes_every_time(world: SimWorld, v2: bool) -> None:
    from tests.fabric.conftest import DECODE_IP, PROMPT_IP, info

    p, d = pair(v2=v2)
    pm = p.cache_manager if v2 else p.kv_cache_manager
    dm = d.cache_manager if v2 else d.kv_cache_manager
    key = BlocksCacheKey(P_ID, 0)
    src = pm.allocate_blocks_cache(_blocks_desc(), key)
    dst = dm.allocate_blocks_cache(_blocks_desc())
    src_views, dst_views = datadist_sim.tensor_views(src), datadist_sim.tensor_views(dst)
    connector = _RecyclingConnector(world, d, info(P_ID, 26000, remote_ip=PROMPT_IP, local_ip=DECODE_IP))
    rng = np.random.default_rng(0)
    for request in range(40):
        for view in src_views:  # the Prompt's next request: new KV in its blocks
            view[...] = rng.integers(0, 1000, view.shape).astype(view.dtype)
        src_blocks = [int(b) for b in rng.permutation(BLOCKS)[:3]]
        dst_blocks = [int(b) for b in rng.permutation(BLOCKS)[:3]]
        world.elapse(IDLE_S + 60.0 if request % 2 == 0 else 1.0)  # minutes idle, or a busy moment
        connector.request(lambda s=src_blocks, t=dst_blocks: dm.pull_blocks(key, dst, s, t))
        for s, t in zip(src_views, dst_views):
            assert np.array_equal(t[dst_blocks], s[src_blocks]), f"request {request}"
        assert world.is_linked(D_ID, P_ID)
    assert connector.relinks == 20
    assert len(world.node(P_ID).peers) == 1  # the Prompt holds one link, not one per recycle
    pm.deallocate_blocks_cache(src) if v2 else pm.deallocate_cache(src)
    dm.deallocate_blocks_cache(dst) if v2 else dm.deallocate_cache(dst)


# -- a pull pool beside a thread that links and unlinks other Prompts -------------------------------

PULLERS, PER_PULLER, OTHERS = 4, 12, 3


def test_a_pull_pool_over_one_link_beside_links_and_unlinks_of_other_prompts(world: SimWorld) -> None:
    """A serving engine's KV pool: several threads pull for different requests over one link while its
    link manager links and unlinks other Prompts. Each request arrives once with its own bytes, every
    key is consumed, no call fails, and the books balance when all is done."""
    from tests.fabric.conftest import DECODE_IP, PROMPT_IP, info

    from datadist_sim.llm_datadist.configs import LLMRole
    from datadist_sim.llm_datadist.v2.llm_types import CacheKey

    from .conftest import make, v2_options

    p, d = pair(v2=True)
    desc = CacheDesc(2, [1, 64], DataType.DT_FLOAT16)
    requests = PULLERS * PER_PULLER
    sources = {}
    for req in range(requests):
        sources[req] = p.cache_manager.allocate_cache(desc, [CacheKey(P_ID, req)])
        fill(sources[req], req)
    expected = {req: contents(cache) for req, cache in sources.items()}
    for cache in sources.values():
        p.cache_manager.deallocate_cache(cache)  # held by its key until the pull consumes it
    others = [make(LLMRole.PROMPT, 10 + i, v2_options(f"{PROMPT_IP}:{26100 + i}")) for i in range(OTHERS)]
    other_info = [info(10 + i, 26100 + i, remote_ip=PROMPT_IP, local_ip=DECODE_IP) for i in range(OTHERS)]
    before = books(world)
    errors: List[BaseException] = []
    got: dict = {}
    stop = threading.Event()

    def puller(index: int) -> None:
        try:
            dst = d.cache_manager.allocate_cache(desc)
            for req in range(index, requests, PULLERS):
                d.cache_manager.pull_cache(CacheKey(P_ID, req), dst)
                got[req] = contents(dst)
            d.cache_manager.deallocate_cache(dst)
        except BaseException as exc:
            errors.append(exc)

    def link_manager() -> None:
        try:
            rounds = 0
            while not stop.is_set() or rounds < 3:
                for cluster in other_info:
                    assert d.link_clusters([cluster], 5000) == (S.LLM_SUCCESS, [S.LLM_SUCCESS])
                for cluster in other_info:
                    assert d.unlink_clusters([cluster], 5000) == (S.LLM_SUCCESS, [S.LLM_SUCCESS])
                rounds += 1
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=puller, args=(i,)) for i in range(PULLERS)]
    manager = threading.Thread(target=link_manager)
    manager.start()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    stop.set()
    manager.join(60)
    assert not any(t.is_alive() for t in [*threads, manager])
    assert errors == []
    assert got == expected
    store = world.caches[P_ID]
    assert not any(ek[0] == "req" for ek in store.key_table)  # every key consumed once
    assert not store.caches  # and with it each source cache
    assert set(world.node(D_ID).peers) == {P_ID}
    # the Prompt's pool is back where the deallocated sources left it; the Decode's and the others' too
    after = books(world)
    assert [entry for entry in after if entry[0] != P_ID] == [entry for entry in before if entry[0] != P_ID]
    assert world.caches[P_ID].device_pool.used == 0
    for other in others:
        other.finalize()
