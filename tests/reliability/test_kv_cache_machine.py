"""KvCacheManager mode (v1) under any sequence of calls and faults, against a small reference model.

Two Prompts and two Decoders with ``enable_switch_role``: init/finalize, link/unlink (incl. force),
check_link_status, switch_role between Prompt and Decoder, allocate_cache (keys on a Prompt only),
deallocate_cache (an unknown or already released cache is ``LLM_KV_CACHE_NOT_EXIST`` in v1),
remove_cache_key (Prompt only), pull_cache (Decoder only), copy_cache, injected failures and faults of
the world (a capped pool, a slow link, a hung Prompt). The v1 rules differ from v2 in exactly the places
the model encodes: who may link and pull, what a timeout is called, what an unlink leaves when the peer
cannot be told, and what a second deallocate does. Invariants as in ``test_cache_machine``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Set, Tuple

import numpy as np
import numpy.typing as npt
from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, rule
from tests.reliability._common import STATS, link_info, listen_on, machine_settings
from tests.reliability._machine import CLUSTERS, DECODERS, OOM_MAYBE, PROMPTS, EngineKey, FabricMachine

from datadist_sim._world.address_space import tensor_views
from datadist_sim.faults.engine_codes import EngineMode
from datadist_sim.llm_datadist.configs import LLMRole
from datadist_sim.llm_datadist.data_type import DataType
from datadist_sim.llm_datadist.status import LLMStatusCode
from datadist_sim.llm_datadist.v2.llm_datadist import LLMDataDist
from datadist_sim.llm_datadist.v2.llm_types import CacheDesc, CacheKey, KvCache

S = LLMStatusCode
PAGE = 1 << 16
POOL_PAGES = 12
ROW = 2048
NUM_TENSORS = 2
OOM = S.LLM_DEVICE_OUT_OF_MEMORY
INJECTED = (S.LLM_LINK_BUSY, S.LLM_FAILED, S.LLM_DEVICE_MEM_ERROR)
FAULT_OPS = ("allocate_cache", "deallocate_cache", "remove_cache_key", "copy_cache", "pull_cache")
Array = npt.NDArray[np.uint8]


def _reserve(batch: int) -> int:
    return NUM_TENSORS * max(PAGE, -(-batch * ROW // PAGE) * PAGE)


def _options(cid: int) -> Dict[str, str]:
    opts = {
        "ge.exec.deviceId": "0",
        "ge.flowGraphMemMaxSize": str(POOL_PAGES * PAGE),
        "llm.MemUtilization": "1.0",
        "llm.EnableSwitchRole": "1",
    }
    if cid in PROMPTS:
        opts["llm.listenIpInfo"] = listen_on(cid)
    return opts


@dataclass(eq=False)
class MCache:
    handle: KvCache
    addrs: List[int]
    batch: int
    data: List[Array]
    keys: Set[EngineKey] = field(default_factory=set)
    released: bool = False


@dataclass(eq=False)
class MNode:
    dd: LLMDataDist
    role: LLMRole
    caches: Dict[int, MCache] = field(default_factory=dict)
    keys: Dict[EngineKey, Tuple[int, int]] = field(default_factory=dict)
    handles: List[KvCache] = field(default_factory=list)
    limit: Optional[int] = None

    def used(self) -> int:
        return sum(_reserve(c.batch) for c in self.caches.values())

    def live(self, handle: KvCache) -> Optional[MCache]:
        mc = self.caches.get(handle.cache_id)
        return None if mc is None or mc.released or mc.handle is not handle else mc


class KvCacheMachine(FabricMachine):
    PAGE = PAGE
    OOM = OOM
    FAULT_OPS = FAULT_OPS
    INJECTED = INJECTED
    MODE = EngineMode.V2_KV
    nodes: Dict[int, MNode]

    @initialize()
    def start(self) -> None:
        self.open_world(6)
        for cid in CLUSTERS:
            self._init(cid)
        for d in DECODERS:
            for p in PROMPTS:
                self.link(d, p)
        for p in PROMPTS:
            self.allocate_cache(p, 2, [0, 1])
        for d in DECODERS:
            self.allocate_cache(d, 2, [])

    # -- helpers -------------------------------------------------------------------------------------

    def _init(self, cid: int) -> None:
        role = LLMRole.PROMPT if cid in PROMPTS else LLMRole.DECODER
        dd = LLMDataDist(role, cid)
        dd.init(_options(cid))
        self.nodes[cid] = MNode(dd, role)

    def _views(self, mc: MCache) -> List[Array]:
        return tensor_views(self.world.memory, mc.addrs, (mc.batch, ROW), np.uint8)  # type: ignore[return-value]

    # -- lifecycle and links -------------------------------------------------------------------------

    @rule(cid=st.sampled_from(CLUSTERS))
    def finalize(self, cid: int) -> None:
        node = self.nodes.pop(cid, None)
        if node is not None:
            node.dd.finalize()
            self._forget(cid)

    @rule(cid=st.sampled_from(CLUSTERS))
    def reinit(self, cid: int) -> None:
        if cid not in self.nodes:
            self._init(cid)

    @rule(cid=st.sampled_from(CLUSTERS))
    def switch_role(self, cid: int) -> None:
        """Prompt <-> Decoder; to Prompt it listens on its own endpoint again."""
        node = self.nodes.get(cid)
        if node is None:
            return
        role = LLMRole.DECODER if node.role is LLMRole.PROMPT else LLMRole.PROMPT
        options = {"llm.listenIpInfo": listen_on(cid)} if role is LLMRole.PROMPT else {}
        holds = any(a == cid for a, _ in self.ends)
        code, _ = self._call(
            "switch_role", S.LLM_EXIST_LINK if holds else None, lambda: node.dd.switch_role(role, options)
        )
        if code is None:
            node.role = role

    @rule(d=st.sampled_from(CLUSTERS), p=st.sampled_from(CLUSTERS))
    def link(self, d: int, p: int) -> None:
        node = self.nodes.get(d)
        if node is None:
            return
        ret, rets = node.dd.link_clusters([link_info(p)])
        server = self.nodes.get(p)
        if node.role is not LLMRole.DECODER:
            want: Tuple[Any, Any] = (S.LLM_PARAM_INVALID, [])
        elif (d, p) in self.ends:  # v1 reads its own link table before it connects, broken or not
            want = (S.LLM_SUCCESS, [S.LLM_ALREADY_LINK])
        elif server is None or server.role is not LLMRole.PROMPT:
            want = (S.LLM_LINK_FAILED, [S.LLM_LINK_FAILED])  # nobody (or no Prompt) listens there
        elif p in self.hung:
            want = (S.LLM_LINK_FAILED, [S.LLM_WAIT_PROCESS_TIMEOUT])
        else:
            want = (S.LLM_SUCCESS, [S.LLM_SUCCESS])
            self._linked(d, p)
        assert (ret, rets) == want
        STATS[f"KvCacheMachine link_clusters -> {ret.name}"] += 1

    @rule(d=st.sampled_from(CLUSTERS), p=st.sampled_from(PROMPTS), force=st.booleans())
    def unlink(self, d: int, p: int, force: bool) -> None:
        """v1 drops this end first; without ``force`` it then tells the peer, whose end stays if it
        cannot be told (``LLM_NOTIFY_PROMPT_UNLINK_FAILED``)."""
        node = self.nodes.get(d)
        if node is None:
            return
        ret, rets = node.dd.unlink_clusters([link_info(p)], force=force)
        if (d, p) not in self.ends:
            want = (S.LLM_SUCCESS, [S.LLM_NOT_YET_LINK])
        elif force:
            want = (S.LLM_SUCCESS, [S.LLM_SUCCESS])
        elif p not in self.nodes or p in self.hung:
            want = (S.LLM_UNLINK_FAILED, [S.LLM_NOTIFY_PROMPT_UNLINK_FAILED])
        else:
            want = (S.LLM_SUCCESS, [S.LLM_SUCCESS])
            self.ends.discard((p, d))
            self.broken.discard((p, d))
        self.ends.discard((d, p))
        self.broken.discard((d, p))
        self.stale.discard((d, p))
        assert (ret, rets) == want

    @rule(d=st.sampled_from(CLUSTERS), p=st.sampled_from(CLUSTERS))
    def check_link_status(self, d: int, p: int) -> None:
        node = self.nodes.get(d)
        if node is None:
            return
        if node.role is not LLMRole.DECODER:
            allowed: Any = S.LLM_PARAM_INVALID
        elif (d, p) not in self.ends:
            allowed = S.LLM_NOT_YET_LINK
        elif (d, p) in self.broken or p not in self.nodes or (p, d) not in self.ends or p in self.hung:
            allowed = S.LLM_WAIT_PROCESS_TIMEOUT
        else:
            allowed = None
        self._call("check_link_status", allowed, lambda: node.dd.check_link_status(p))

    # -- faults --------------------------------------------------------------------------------------

    # -- caches --------------------------------------------------------------------------------------

    @rule(
        cid=st.sampled_from(CLUSTERS),
        batch=st.integers(1, 3),
        reqs=st.lists(st.one_of(st.none(), st.integers(0, 2)), max_size=3),
    )
    def allocate_cache(self, cid: int, batch: int, reqs: List[Optional[int]]) -> None:
        node = self.nodes.get(cid)
        if node is None:
            return
        keys = [CacheKey(cid, 2**64 - 1 if r is None else r) for r in reqs]
        # v1 (GE flow function): repeats are not refused, a repeated id is bound at its last index
        bound = list({("req", r, 0): i for i, r in enumerate(reqs) if r is not None}.items())
        if node.role is not LLMRole.PROMPT and reqs:
            allowed: Any = S.LLM_PARAM_INVALID  # the face: keys only on a Prompt
        else:
            allowed = self._door("allocate_cache", cid, None)
        if allowed is None and len(reqs) > batch:
            allowed = S.LLM_PARAM_INVALID
        elif allowed is None and any(ek in node.keys for ek, _ in bound):
            allowed = S.LLM_FAILED  # LLM_CACHE_KEY_ALREADY_EXIST leaves the v1 engine as LLM_FAILED
        elif allowed is None:
            used, need = node.used(), _reserve(batch)
            full = used + need > POOL_PAGES * PAGE or (node.limit is not None and used + need > node.limit)
            allowed = OOM if full else OOM_MAYBE
        desc = CacheDesc(NUM_TENSORS, [batch, 16, 64], DataType.DT_FLOAT16)
        code, handle = self._call(
            "allocate_cache", allowed, lambda: node.dd.kv_cache_manager.allocate_cache(desc, keys)
        )
        if code is not None:
            return
        mc = MCache(handle, list(handle.per_device_tensor_addrs[0]), batch, [])
        for ek, index in bound:
            node.keys[ek] = (handle.cache_id, index)
            mc.keys.add(ek)
        node.caches[handle.cache_id] = mc
        node.handles.append(handle)
        for view in self._views(mc):
            view[...] = self.rng.integers(0, 256, view.shape, dtype=np.uint8)
        mc.data = [v.copy() for v in self._views(mc)]

    @rule(cid=st.sampled_from(CLUSTERS), data=st.data())
    def deallocate_cache(self, cid: int, data: st.DataObject) -> None:
        """v1: the engine does not know an id twice: a released or freed cache is KV_CACHE_NOT_EXIST."""
        node = self.nodes.get(cid)
        if node is None or not node.handles:
            return
        handle = data.draw(st.sampled_from(node.handles))
        mc = node.caches.get(handle.cache_id)
        allowed = self._door("deallocate_cache", cid, None)
        if allowed is None and (mc is None or mc.released):
            allowed = S.LLM_KV_CACHE_NOT_EXIST
        code, _ = self._call(
            "deallocate_cache", allowed, lambda: node.dd.kv_cache_manager.deallocate_cache(handle)
        )
        if code is None and mc is not None:
            if mc.keys:
                mc.released = True
            else:
                self._free(node, mc)

    @rule(cid=st.sampled_from(CLUSTERS), req=st.integers(0, 2))
    def remove_cache_key(self, cid: int, req: int) -> None:
        node = self.nodes.get(cid)
        if node is None:
            return
        allowed = (
            S.LLM_PARAM_INVALID
            if node.role is not LLMRole.PROMPT
            else self._door("remove_cache_key", cid, None)
        )
        code, _ = self._call(
            "remove_cache_key", allowed, lambda: node.dd.kv_cache_manager.remove_cache_key(CacheKey(cid, req))
        )
        if code is None and ("req", req, 0) in node.keys:
            self._drop_key(node, ("req", req, 0))

    @rule(
        d=st.sampled_from(CLUSTERS),
        p=st.sampled_from(CLUSTERS),
        req=st.integers(0, 2),
        index=st.integers(0, 2),
        data=st.data(),
    )
    def pull_cache(self, d: int, p: int, req: int, index: int, data: st.DataObject) -> None:
        node = self.nodes.get(d)
        if node is None or not node.handles:
            return
        handle = data.draw(st.sampled_from(node.handles))
        dst = node.live(handle)
        src_node = self.nodes.get(p)
        ek = ("req", req, 0)
        src = src_node.caches[src_node.keys[ek][0]] if src_node is not None and ek in src_node.keys else None
        if node.role is not LLMRole.DECODER:
            allowed: Any = S.LLM_PARAM_INVALID
        elif dst is None:
            allowed = S.LLM_KV_CACHE_NOT_EXIST
        elif d == p:
            allowed = S.LLM_PARAM_INVALID
        elif (d, p) in self.ends and (d, p) in self.broken:
            # GE keeps a broken link's entry: the pull is sent and never answered (vendor_facts.md)
            allowed = S.LLM_WAIT_PROCESS_TIMEOUT
        elif (d, p) not in self.ends or (p, d) not in self.ends or p not in self.nodes:
            allowed = S.LLM_NOT_YET_LINK
        elif src is None:
            allowed = S.LLM_KV_CACHE_NOT_EXIST
        elif index >= dst.batch:
            allowed = S.LLM_PARAM_INVALID
        else:
            allowed = self._door("pull_cache", d, None)
            if allowed is None and self._is_slow(d, p):
                allowed = S.LLM_WAIT_PROCESS_TIMEOUT
                self.broken.add((d, p))
        code, _ = self._call(
            "pull_cache",
            allowed,
            lambda: node.dd.kv_cache_manager.pull_cache(CacheKey(p, req), handle, index),
        )
        if isinstance(allowed, frozenset):
            if code is not None and code is self.pending.get(("pull_cache", d)):
                self.pending.pop(("pull_cache", d))
            if self.world.node(d).peers[p].broken:  # type: ignore[union-attr]
                self.broken.add((d, p))
        if code is None:
            assert dst is not None
            assert src is not None
            assert src_node is not None
            _, src_batch = src_node.keys[ek]
            for t in range(NUM_TENSORS):
                dst.data[t][index] = src.data[t][src_batch]
            self._drop_key(src_node, ek)
        STATS["transfers tried"] += 1

    @rule(
        cid=st.sampled_from(CLUSTERS),
        dst_batch=st.integers(0, 2),
        src_batch=st.integers(0, 2),
        data=st.data(),
    )
    def copy_cache(self, cid: int, dst_batch: int, src_batch: int, data: st.DataObject) -> None:
        node = self.nodes.get(cid)
        if node is None or not node.handles:
            return
        dst_h, src_h = data.draw(st.sampled_from(node.handles)), data.draw(st.sampled_from(node.handles))
        dst, src = node.live(dst_h), node.live(src_h)
        allowed = self._door("copy_cache", cid, None)
        if allowed is None and (dst is None or src is None):
            allowed = S.LLM_KV_CACHE_NOT_EXIST
        elif allowed is None and (dst_batch >= dst.batch or src_batch >= src.batch):  # type: ignore[union-attr]
            allowed = S.LLM_PARAM_INVALID
        km = node.dd.kv_cache_manager
        code, _ = self._call("copy_cache", allowed, lambda: km.copy_cache(dst_h, src_h, dst_batch, src_batch))
        if code is None:
            assert dst is not None
            assert src is not None
            for t in range(NUM_TENSORS):
                dst.data[t][dst_batch] = src.data[t][src_batch].copy()

    # -- invariants ----------------------------------------------------------------------------------

    @invariant()
    def books_balance(self) -> None:
        STATS["stateful steps"] += 1
        backed = 0
        for cid, node in self.nodes.items():
            store = self.world.caches[cid]
            pool = store.device_pool
            assert pool is not None
            assert pool.used == node.used()
            assert pool.used + pool.free_bytes == pool.capacity
            backed += sum(NUM_TENSORS * c.batch * ROW for c in node.caches.values())  # asked, not reserved
            assert store.key_table == node.keys
            assert set(store.caches) == set(node.caches)
            for mc in node.caches.values():
                for view, want in zip(self._views(mc), mc.data):
                    assert np.array_equal(view, want)
        assert self.world.memory.backed_bytes == backed


TestKvCacheMachine = KvCacheMachine.TestCase
TestKvCacheMachine.settings = machine_settings(ci_examples=100, ci_steps=40)
