"""CacheManager mode under any sequence of calls and faults, against a small reference model.

Two Prompts and two Decoders (CacheManager mode, device and host pools of 16 pages; one of each remote
cache accessible) take random sequences of init/finalize, link/unlink (incl. force), switch_role,
allocate/register/deallocate/unregister, remove_cache_key, pull_cache/pull_blocks/push_cache,
copy_cache/copy_blocks/swap_blocks, fault-plan rules (an injected failure of any of those calls) and
faults of the world (a capped pool, a link too slow for ``sync_kv_timeout``, a hung Prompt). After every
step:

- each call's outcome is the one the model allows for that state (``OOM_MAYBE`` marks the one place the
  model cannot know: whether a fragmented pool has a block that fits);
- each pool's ``used`` is what the model's live caches reserve, and ``used + free == capacity``;
- every key in the engine's table is the model's and names a live cache batch;
- link ends on both sides are the model's (half-open only where force unlink or finalize left them);
- every live cache holds exactly the model's bytes: a failed transfer wrote nothing, a successful one
  wrote the source bytes, never a mix;
- the world backs exactly the bytes its live pools hold, so nothing leaks after finalize.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

import numpy as np
import numpy.typing as npt
from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, precondition, rule
from tests.reliability._common import STATS, link_info, listen_on, machine_settings
from tests.reliability._machine import (
    CLUSTERS,
    DECODERS,
    OOM_MAYBE,
    PROMPTS,
    EngineKey,
    FabricMachine,
    Outcome,
)

from datadist_sim._world.address_space import tensor_views
from datadist_sim.faults.engine_codes import EngineMode
from datadist_sim.llm_datadist.configs import LLMRole
from datadist_sim.llm_datadist.data_type import DataType
from datadist_sim.llm_datadist.status import LLMStatusCode
from datadist_sim.llm_datadist.v2.llm_datadist import LLMDataDist
from datadist_sim.llm_datadist.v2.llm_types import (
    BlocksCacheKey,
    Cache,
    CacheDesc,
    CacheKey,
    CacheKeyByIdAndIndex,
    Placement,
)

S = LLMStatusCode
REMOTE_ACCESSIBLE = (2, 12)
"""Instances with ``llm.EnableRemoteCacheAccessible``: they push; they pull by cache id only; their
transfers are one-sided: they find the peer's caches in the table their end of the link read at its
first lookup, and consume none of the peer's keys."""
PAGE = 4096
POOL_PAGES = 16
ROW = 2048
"""Bytes of one batch (or block) of one tensor: a [16, 64] float16 slice."""
NUM_TENSORS = 2
PAD = 2**64 - 1
UNKNOWN_BYTES = "success or LLM_PARAM_INVALID, bytes unknown to the model"
"""An allowed outcome: a one-sided transfer through pool memory freed after its table was read."""
STALE_END = frozenset({S.LLM_NOT_YET_LINK})
"""A transfer over an end whose peer finalized and came back: the peer holds no link back, so it is
``LLM_NOT_YET_LINK`` (test_findings.py has the regression test)."""
FAULT_OPS = (
    "allocate_cache",
    "allocate_blocks_cache",
    "register_cache",
    "unregister_cache",
    "deallocate_cache",
    "deallocate_blocks_cache",
    "remove_cache_key",
    "pull_cache",
    "pull_blocks",
    "push_cache",
    "copy_cache",
    "copy_blocks",
    "swap_blocks",
    "switch_role",
)
INJECTED = (S.LLM_LINK_BUSY, S.LLM_FAILED, S.LLM_DEVICE_MEM_ERROR, S.LLM_OUT_OF_MEMORY)
"""Codes a fail rule injects (none of STALE_END's, so the two stay apart)."""
PAIRS = st.one_of(
    st.sampled_from([(d, p) for d in DECODERS for p in PROMPTS]),
    st.tuples(st.sampled_from(CLUSTERS), st.sampled_from(CLUSTERS)),
)
"""(puller, source): mostly a Decoder and a Prompt, sometimes any two (own cluster, unlinked, reversed)."""
Array = npt.NDArray[np.uint8]


def _reserve(batch: int) -> int:
    """Pool bytes one cache reserves: whole pages per tensor, at least one."""
    return NUM_TENSORS * max(PAGE, -(-batch * ROW // PAGE) * PAGE)


def _options(cid: int) -> Dict[str, str]:
    pool = json.dumps({"memory_size": POOL_PAGES * PAGE, "page_shift": 12})
    opts = {
        "ge.exec.deviceId": "0",
        "llm.EnableCacheManager": "1",
        "llm.MemPoolConfig": pool,
        "llm.HostMemPoolConfig": pool,
    }
    if cid in PROMPTS:
        opts["llm.listenIpInfo"] = listen_on(cid)
    if cid in REMOTE_ACCESSIBLE:
        opts["llm.EnableRemoteCacheAccessible"] = "1"
    return opts


@dataclass(eq=False)
class MCache:
    """The model of one cache: its handle, shape, keys and the bytes it must hold."""

    handle: Cache
    addrs: List[int]
    batch: int
    blocks: bool
    host: bool
    data: List[Array]
    registered: Optional[List[Array]] = None
    """The caller-owned buffers of a registered cache (its bytes live there)."""
    keys: Set[EngineKey] = field(default_factory=set)
    released: bool = False

    @property
    def reserved(self) -> int:
        return 0 if self.registered is not None else _reserve(self.batch)

    @property
    def asked(self) -> int:
        """The bytes its tensors asked the pool for: what backs it (not the page-rounded reservation)."""
        return 0 if self.registered is not None else NUM_TENSORS * self.batch * ROW


@dataclass(eq=False)
class MNode:
    """The model of one initialised instance."""

    dd: LLMDataDist
    caches: Dict[int, MCache] = field(default_factory=dict)
    keys: Dict[EngineKey, Tuple[int, int]] = field(default_factory=dict)
    handles: List[Cache] = field(default_factory=list)
    limit: Optional[int] = None
    published: bool = False
    """Whether it has made a cache since ``init``, and so published a cache table a link can keep."""

    def used(self, host: bool) -> int:
        return sum(c.reserved for c in self.caches.values() if c.host == host)

    def live(self, handle: Cache) -> Optional[MCache]:
        """The model cache a handle names if the engine would accept it as a live local cache."""
        mc = self.caches.get(handle.cache_id)
        return None if mc is None or mc.released or mc.handle is not handle else mc


class CacheMachine(FabricMachine):
    PAGE = PAGE
    OOM = S.LLM_OUT_OF_MEMORY
    FAULT_OPS = FAULT_OPS
    INJECTED = INJECTED
    MODE = EngineMode.V2
    nodes: Dict[int, MNode]

    @initialize()
    def start(self) -> None:
        self.open_world(5)
        self.tables: Dict[Tuple[int, int], Tuple[Dict[int, MCache], Dict[EngineKey, Tuple[int, int]]]] = {}
        """The peer's caches and keys each end of a one-sided link read at its first lookup."""
        for cid in CLUSTERS:
            self._init(cid)
        for d in DECODERS:
            for p in PROMPTS:
                self.link(d, p)
        for cid in CLUSTERS:
            self.allocate_cache(cid, 2, [0, 1] if cid in PROMPTS else [], False)
            self.allocate_blocks_cache(cid, 4, 0 if cid in PROMPTS else None, False)
            self.allocate_blocks_cache(cid, 4, None, True)

    # -- helpers -----------------------------------------------------------------------------------

    def _init(self, cid: int) -> None:
        dd = LLMDataDist(LLMRole.PROMPT if cid in PROMPTS else LLMRole.DECODER, cid)
        dd.init(_options(cid))
        self.nodes[cid] = MNode(dd)

    def _views(self, mc: MCache) -> List[Array]:
        if mc.registered is not None:
            return mc.registered
        return tensor_views(self.world.memory, mc.addrs, (mc.batch, ROW), np.uint8)  # type: ignore[return-value]

    def _fill(self, mc: MCache) -> None:
        for view in self._views(mc):
            view[...] = self.rng.integers(0, 256, view.shape, dtype=np.uint8)
        mc.data = [v.copy() for v in self._views(mc)]

    def _pick(self, data: st.DataObject, handles: List[Cache], blocks: bool) -> Optional[Cache]:
        chosen = [h for h in handles if h.is_blocks_cache == blocks]
        return data.draw(st.sampled_from(chosen)) if chosen else None

    def _linked(self, d: int, p: int) -> None:
        super()._linked(d, p)
        self.tables.pop((d, p), None)  # a new link reads the peer's table afresh
        self.tables.pop((p, d), None)

    def _table(self, a: int, b: int) -> Tuple[Dict[int, MCache], Dict[EngineKey, Tuple[int, int]]]:
        """The caches and keys of ``b`` as end ``(a, b)`` finds them when ``a`` moves bytes one-sidedly:
        a copy made at its first lookup, kept once ``b`` has published a table."""
        held = self.tables.get((a, b))
        if held is None:
            node = self.nodes[b]
            held = (dict(node.caches), dict(node.keys))
            if node.published:
                self.tables[(a, b)] = held
        return held

    def _gone(self, remote: MNode, mc: MCache) -> Any:
        """What a one-sided transfer meets at a cache the peer freed after the table was read: its
        registered memory is out of the transport (``LLM_PARAM_INVALID``); pool memory holds what the
        pool gave it to since, or nothing the simulator can move (``LLM_PARAM_INVALID``)."""
        if remote.caches.get(mc.handle.cache_id) is mc:
            return None
        return S.LLM_PARAM_INVALID if mc.registered is not None else UNKNOWN_BYTES

    def _through_freed_pool(self, op: str, d: int, p: int, fn: Callable[[], Any]) -> Outcome:
        """A transfer through freed pool memory a table still names: it moves whatever is there now or is
        refused; past the plan come the injected failure and the slow link, as in ``_transfer``."""
        ok = {None, S.LLM_PARAM_INVALID}
        injected = self.pending.get((op, d))
        if injected is not None:
            ok.add(injected)
        if self._is_slow(d, p):
            ok.add(S.LLM_TIMEOUT)
        code, _ = self._call(op, frozenset(ok), fn)
        if code is not None and code is injected:
            self.pending.pop((op, d))
        if code is S.LLM_TIMEOUT:
            self.broken.add((d, p))
        return code

    def _reread(self, mc: MCache) -> None:
        mc.data = [v.copy() for v in self._views(mc)]

    def _link_ok(self, d: int, p: int) -> bool:
        """Both ends held (a peer that force-unlinked or came back holds none: ``LLM_NOT_YET_LINK``)."""
        return (d, p) in self.ends and (p, d) in self.ends and p in self.nodes and (d, p) not in self.broken

    # -- lifecycle ---------------------------------------------------------------------------------

    @rule(cid=st.sampled_from(CLUSTERS))
    def finalize(self, cid: int) -> None:
        node = self.nodes.pop(cid, None)
        if node is None:
            return
        node.dd.finalize()
        self._forget(cid)

    @precondition(lambda self: len(self.nodes) < len(CLUSTERS))
    @rule(cid=st.sampled_from(CLUSTERS))
    def reinit(self, cid: int) -> None:
        if cid not in self.nodes:
            self._init(cid)

    @rule(cid=st.sampled_from(CLUSTERS), role=st.sampled_from(list(LLMRole)))
    def switch_role(self, cid: int, role: LLMRole) -> None:
        node = self.nodes.get(cid)
        if node is None:
            return
        options = {"llm.listenIpInfo": listen_on(cid)} if cid in PROMPTS else None
        holds_link = any(a == cid for a, _ in self.ends)
        self._call(
            "switch_role",
            self._door("switch_role", cid, S.LLM_EXIST_LINK if holds_link else None),
            lambda: node.dd.switch_role(role, options),
        )

    # -- links -------------------------------------------------------------------------------------

    @rule(d=st.sampled_from(DECODERS), p=st.sampled_from(PROMPTS))
    def link(self, d: int, p: int) -> None:
        if d not in self.nodes:
            return
        ret, rets = self.nodes[d].dd.link_clusters([link_info(p)])
        if p not in self.nodes:
            expected = S.LLM_LINK_FAILED
        elif p in self.hung:
            expected = S.LLM_TIMEOUT
        elif (d, p) in self.ends:
            expected = S.LLM_ALREADY_LINK
        else:
            expected = S.LLM_SUCCESS
            self._linked(d, p)
        assert (ret, rets) == (expected, [expected])

    @rule(d=st.sampled_from(DECODERS), p=st.sampled_from(PROMPTS), force=st.booleans())
    def unlink(self, d: int, p: int, force: bool) -> None:
        if d not in self.nodes:
            return
        ret, rets = self.nodes[d].dd.unlink_clusters([link_info(p)], force=force)
        if force:
            expected = S.LLM_SUCCESS
            self.ends.discard((d, p))
            self.broken.discard((d, p))
            self.stale.discard((d, p))
        elif p not in self.nodes or p in self.hung:
            expected = S.LLM_UNLINK_FAILED
        else:
            expected = S.LLM_SUCCESS
            self.ends -= {(d, p), (p, d)}
            self.broken -= {(d, p), (p, d)}
            self.stale -= {(d, p), (p, d)}
        assert (ret, rets) == (expected, [expected])

    # -- faults ------------------------------------------------------------------------------------

    # -- allocation and registration ---------------------------------------------------------------

    def _add(
        self, node: MNode, handle: Cache, batch: int, host: bool, bound: List[Tuple[EngineKey, int]]
    ) -> None:
        mc = MCache(handle, list(handle.tensor_addrs), batch, handle.is_blocks_cache, host, [])
        for ek, index in bound:
            node.keys[ek] = (handle.cache_id, index)
            mc.keys.add(ek)
        node.caches[handle.cache_id] = mc
        node.published = True
        node.handles.append(handle)
        self._fill(mc)

    def _alloc_allowed(self, node: MNode, batch: int, host: bool) -> Any:
        need, used = _reserve(batch), node.used(host)
        limit = None if host else node.limit
        if used + need > POOL_PAGES * PAGE or (limit is not None and used + need > limit):
            return S.LLM_OUT_OF_MEMORY
        return OOM_MAYBE

    @rule(
        cid=st.sampled_from(CLUSTERS),
        batch=st.integers(1, 3),
        reqs=st.lists(st.one_of(st.none(), st.integers(0, 2)), max_size=4),
        host=st.booleans(),
    )
    def allocate_cache(self, cid: int, batch: int, reqs: List[Optional[int]], host: bool) -> None:
        node = self.nodes.get(cid)
        if node is None:
            return
        desc = CacheDesc(
            NUM_TENSORS, [batch, 16, 64], DataType.DT_FLOAT16, Placement.HOST if host else Placement.DEVICE
        )
        keys = [CacheKey(cid, PAD if r is None else r) for r in reqs]
        bound = [(("req", r, 0), i) for i, r in enumerate(reqs) if r is not None]
        # v2 allocates first, then checks the keys (a placeholder names the slot of a model-0 blocks key)
        bad_keys = (
            len(reqs) > batch
            or len(set(reqs)) != len(reqs)
            or any(ek in node.keys for ek, _ in bound)
            or (None in reqs and ("blocks", 0, 0) in node.keys)
        )
        allowed: Any = self._alloc_allowed(node, batch, host)
        if bad_keys and allowed == OOM_MAYBE:
            allowed = frozenset({S.LLM_PARAM_INVALID, S.LLM_OUT_OF_MEMORY})
        code, handle = self._call(
            "allocate_cache",
            self._door("allocate_cache", cid, allowed),
            lambda: node.dd.cache_manager.allocate_cache(desc, keys),
        )
        if code is None:
            self._add(node, handle, batch, host, bound)

    @rule(
        cid=st.sampled_from(CLUSTERS),
        blocks=st.integers(1, 4),
        model=st.one_of(st.none(), st.integers(0, 1)),
        host=st.booleans(),
    )
    def allocate_blocks_cache(self, cid: int, blocks: int, model: Optional[int], host: bool) -> None:
        node = self.nodes.get(cid)
        if node is None:
            return
        desc = CacheDesc(
            NUM_TENSORS, [blocks, 16, 64], DataType.DT_FLOAT16, Placement.HOST if host else Placement.DEVICE
        )
        key = None if model is None else BlocksCacheKey(cid, model)
        bound = [] if model is None else [(("blocks", 0, model), 0)]
        allowed: Any = self._alloc_allowed(node, blocks, host)  # v2 allocates, then checks the key
        if any(ek in node.keys for ek, _ in bound) and allowed == OOM_MAYBE:
            allowed = frozenset({S.LLM_PARAM_INVALID, S.LLM_OUT_OF_MEMORY})
        code, handle = self._call(
            "allocate_blocks_cache",
            self._door("allocate_blocks_cache", cid, allowed),
            lambda: node.dd.cache_manager.allocate_blocks_cache(desc, key),
        )
        if code is None:
            self._add(node, handle, blocks, host, bound)

    @rule(cid=st.sampled_from(CLUSTERS), batch=st.integers(1, 2), req=st.one_of(st.none(), st.integers(0, 2)))
    def register_cache(self, cid: int, batch: int, req: Optional[int]) -> None:
        """Register caller-owned numpy buffers, as real clients register their tensors' ``data_ptr()``."""
        node = self.nodes.get(cid)
        if node is None:
            return
        buffers = [np.zeros((batch, ROW), np.uint8) for _ in range(NUM_TENSORS)]
        desc = CacheDesc(NUM_TENSORS, [batch, 16, 64], DataType.DT_FLOAT16)
        keys = [] if req is None else [CacheKey(cid, req)]
        bound = [] if req is None else [(("req", req, 0), 0)]
        allowed = S.LLM_PARAM_INVALID if any(ek in node.keys for ek, _ in bound) else None
        addrs = [int(b.ctypes.data) for b in buffers]
        code, handle = self._call(
            "register_cache",
            self._door("register_cache", cid, allowed),
            lambda: node.dd.cache_manager.register_cache(desc, addrs, keys),
        )
        if code is None:
            mc = MCache(handle, addrs, batch, False, False, [], registered=buffers)
            for ek, index in bound:
                node.keys[ek] = (handle.cache_id, index)
                mc.keys.add(ek)
            node.caches[handle.cache_id] = mc
            node.published = True
            node.handles.append(handle)
            self._fill(mc)

    @rule(cid=st.sampled_from(CLUSTERS), data=st.data())
    def unregister_cache(self, cid: int, data: st.DataObject) -> None:
        node = self.nodes.get(cid)
        if node is None or not node.handles:
            return
        handle = data.draw(st.sampled_from(node.handles))
        mc = node.caches.get(handle.cache_id)
        code, _ = self._call(
            "unregister_cache",
            self._door("unregister_cache", cid, None),
            lambda: node.dd.cache_manager.unregister_cache(handle.cache_id),
        )
        if code is None and mc is not None and mc.registered is not None:
            self._free(node, mc)

    @rule(cid=st.sampled_from(CLUSTERS), data=st.data())
    def deallocate(self, cid: int, data: st.DataObject) -> None:
        node = self.nodes.get(cid)
        if node is None or not node.handles:
            return
        handle = data.draw(st.sampled_from(node.handles))
        cm = node.dd.cache_manager
        op = "deallocate_blocks_cache" if handle.is_blocks_cache else "deallocate_cache"
        mc = node.caches.get(handle.cache_id)
        code, _ = self._call(op, self._door(op, cid, None), lambda: getattr(cm, op)(handle))
        if code is not None or mc is None or mc.registered is not None or mc.released:
            return
        if mc.blocks or not mc.keys:
            self._free(node, mc)
        else:
            mc.released = True

    @rule(cid=st.sampled_from(CLUSTERS), req=st.integers(0, 2))
    def remove_cache_key(self, cid: int, req: int) -> None:
        node = self.nodes.get(cid)
        if node is None:
            return
        code, _ = self._call(
            "remove_cache_key",
            self._door("remove_cache_key", cid, None),
            lambda: node.dd.cache_manager.remove_cache_key(CacheKey(cid, req)),
        )
        ek = ("req", req, 0)
        if code is None and ek in node.keys and node.caches[node.keys[ek][0]].registered is None:
            self._drop_key(node, ek)

    # -- transfers ---------------------------------------------------------------------------------

    def _pull_gate(self, d: int, p: int, dst: Optional[MCache]) -> Optional[LLMStatusCode]:
        """Codes a pull gets before the source is looked up, in the engine's order."""
        if dst is None:
            return S.LLM_KV_CACHE_NOT_EXIST
        if d == p:
            return S.LLM_PARAM_INVALID
        if not self._link_ok(d, p) or (d, p) in self.stale:
            return S.LLM_NOT_YET_LINK
        return None

    def _transfer(self, op: str, d: int, p: int, allowed: Any, fn: Callable[[], Any]) -> Outcome:
        """Run a pull whose plan checks gave ``allowed``; past them come injected failures, a stale end
        (either outcome, the link flag read back) and the slow-link timeout, in the engine's order."""
        injected = self.pending.get((op, d))
        if allowed is None and (d, p) in self.stale:
            code, _ = self._call(op, STALE_END | {injected}, fn)
            if code is not None and code is injected:
                self.pending.pop((op, d))
            if self.world.node(d).peers[p].broken:  # type: ignore[union-attr]
                self.broken.add((d, p))
            return code
        if allowed is None:
            allowed = self._door(op, d, None)
        if allowed is None:
            allowed = self._after_transfer(d, p)
        code, _ = self._call(op, allowed, fn)
        return code

    def _after_transfer(self, d: int, p: int) -> Optional[LLMStatusCode]:
        if self._is_slow(d, p):
            self.broken.add((d, p))
            return S.LLM_TIMEOUT
        return None

    @rule(
        pair=PAIRS, req=st.integers(0, 2), by_id=st.booleans(), batch_index=st.integers(0, 2), data=st.data()
    )
    def pull_cache(
        self, pair: Tuple[int, int], req: int, by_id: bool, batch_index: int, data: st.DataObject
    ) -> None:
        d, p = pair
        node = self.nodes.get(d)
        if node is None:
            return
        handle = self._pick(data, node.handles, blocks=False)
        if handle is None:
            return
        by_id = by_id or d in REMOTE_ACCESSIBLE
        src_node = self.nodes.get(p)
        dst = node.live(handle)
        allowed = self._pull_gate(d, p, dst)
        one_sided = allowed is None and d in REMOTE_ACCESSIBLE
        caches, keys = ({}, {}) if src_node is None else (src_node.caches, src_node.keys)
        if one_sided:
            caches, keys = self._table(d, p)
        key: Any = CacheKey(p, req)
        src: Optional[MCache] = None
        src_batch = 0
        consume: Optional[EngineKey] = None
        if by_id:
            ids = sorted({h.cache_id for h in src_node.handles}) if src_node is not None else []
            cache_id = data.draw(st.sampled_from(ids or [1]))
            src_batch = data.draw(st.integers(0, 2))
            key = CacheKeyByIdAndIndex(p, cache_id, src_batch)
            if cache_id in caches:
                src = caches[cache_id]
                found = [ek for ek in src.keys if ek[0] == "req" and keys.get(ek) == (cache_id, src_batch)]
                consume = found[0] if found and not one_sided else None
                if src_batch >= src.batch and not src.blocks:
                    src = None
        elif ("req", req, 0) in keys:
            consume = ("req", req, 0)
            cache_id, src_batch = keys[consume]
            src = caches[cache_id]
        if allowed is None and src is None:
            allowed = S.LLM_KV_CACHE_NOT_EXIST
        elif allowed is None and ((src is not None and src.blocks) or batch_index >= dst.batch):  # type: ignore[union-attr]
            allowed = S.LLM_PARAM_INVALID
        elif one_sided and src is not None and src_node is not None:
            allowed = self._gone(src_node, src)

        def call() -> Any:
            return node.dd.cache_manager.pull_cache(key, handle, batch_index)

        if allowed == UNKNOWN_BYTES:
            assert dst is not None
            if self._through_freed_pool("pull_cache", d, p, call) is None:
                self._reread(dst)
            STATS["transfers tried"] += 1
            return
        code = self._transfer("pull_cache", d, p, allowed, call)
        if code is None:
            assert dst is not None
            assert src is not None
            assert src_node is not None
            for t in range(NUM_TENSORS):
                dst.data[t][batch_index] = src.data[t][src_batch]
            if consume is not None and src.registered is None:
                self._drop_key(src_node, consume)
        STATS["transfers tried"] += 1

    @rule(
        pair=PAIRS,
        model=st.integers(0, 1),
        pairs=st.lists(
            st.tuples(st.integers(0, 3), st.integers(0, 3)), min_size=1, max_size=3, unique_by=lambda t: t[1]
        ),
        data=st.data(),
    )
    def pull_blocks(
        self, pair: Tuple[int, int], model: int, pairs: List[Tuple[int, int]], data: st.DataObject
    ) -> None:
        d, p = pair
        node = self.nodes.get(d)
        if node is None:
            return
        handle = self._pick(data, node.handles, blocks=True)
        if handle is None:
            return
        src_node = self.nodes.get(p)
        ek = ("blocks", 0, model)
        dst = node.live(handle)
        allowed = self._pull_gate(d, p, dst)
        one_sided = allowed is None and d in REMOTE_ACCESSIBLE
        caches, keys = ({}, {}) if src_node is None else (src_node.caches, src_node.keys)
        if one_sided:
            caches, keys = self._table(d, p)
        src = caches[keys[ek][0]] if ek in keys else None
        if allowed is None and src is None:
            allowed = S.LLM_KV_CACHE_NOT_EXIST
        elif allowed is None and not all(s < src.batch and t < dst.batch for s, t in pairs):  # type: ignore[union-attr]
            allowed = S.LLM_PARAM_INVALID
        elif one_sided and src is not None and src_node is not None:
            allowed = self._gone(src_node, src)
        src_blocks, dst_blocks = [s for s, _ in pairs], [t for _, t in pairs]

        def call() -> Any:
            return node.dd.cache_manager.pull_blocks(BlocksCacheKey(p, model), handle, src_blocks, dst_blocks)

        if allowed == UNKNOWN_BYTES:
            assert dst is not None
            if self._through_freed_pool("pull_blocks", d, p, call) is None:
                self._reread(dst)
            STATS["transfers tried"] += 1
            return
        code = self._transfer("pull_blocks", d, p, allowed, call)
        if code is None:
            assert dst is not None
            assert src is not None
            for t in range(NUM_TENSORS):
                for s, b in pairs:
                    dst.data[t][b] = src.data[t][s]
        STATS["transfers tried"] += 1

    @rule(pair=PAIRS, src_batch=st.integers(0, 2), dst_batch=st.integers(0, 2), data=st.data())
    def push_cache(self, pair: Tuple[int, int], src_batch: int, dst_batch: int, data: st.DataObject) -> None:
        """Write a local batch into a remote cache named by id; keys are never consumed by a push."""
        s, p = pair
        node = self.nodes.get(s)
        if node is None:
            return
        live = [mc for mc in node.caches.values() if not mc.blocks and not mc.released]
        if not live:
            return
        src = data.draw(st.sampled_from(live))
        src_batch = min(src_batch, src.batch - 1)  # past the source: test_findings.py
        remote = self.nodes.get(p)
        ids = sorted({h.cache_id for h in remote.handles}) if remote is not None else []
        cache_id = data.draw(st.sampled_from(ids or [1]))
        key = CacheKeyByIdAndIndex(p, cache_id, dst_batch)
        dst = None
        if s not in REMOTE_ACCESSIBLE:
            allowed: Any = S.LLM_PARAM_INVALID
        else:
            allowed = self._pull_gate(s, p, src)
            if allowed is None:
                dst = self._table(s, p)[0].get(cache_id)
            if allowed is None and dst is None:
                allowed = S.LLM_KV_CACHE_NOT_EXIST
            elif allowed is None and dst is not None and dst_batch >= (1 if dst.blocks else dst.batch):
                allowed = S.LLM_PARAM_INVALID  # a blocks cache is one batch of one block
            elif allowed is None and dst is not None and remote is not None:
                allowed = self._gone(remote, dst)
        cm = node.dd.cache_manager

        def call() -> Any:
            return cm.push_cache(key, src.handle, src_batch)

        if allowed == UNKNOWN_BYTES:
            assert remote is not None
            if self._through_freed_pool("push_cache", s, p, call) is None:
                for mc in remote.caches.values():  # the bytes went wherever that memory is now
                    self._reread(mc)
            STATS["transfers tried"] += 1
            return
        code = self._transfer("push_cache", s, p, allowed, call)
        if code is None:
            assert dst is not None
            for t in range(NUM_TENSORS):
                dst.data[t][dst_batch] = src.data[t][src_batch]
        STATS["transfers tried"] += 1

    @rule(
        cid=st.sampled_from(CLUSTERS),
        dst_batch=st.integers(0, 3),
        src_batch=st.integers(0, 3),
        data=st.data(),
    )
    def copy_cache(self, cid: int, dst_batch: int, src_batch: int, data: st.DataObject) -> None:
        node = self.nodes.get(cid)
        if node is None:
            return
        dst_h, src_h = self._pick(data, node.handles, False), self._pick(data, node.handles, False)
        if dst_h is None or src_h is None:
            return
        dst, src = node.live(dst_h), node.live(src_h)
        if dst is None or src is None:
            allowed = S.LLM_KV_CACHE_NOT_EXIST
        elif dst_batch >= dst.batch or src_batch >= src.batch:
            allowed = S.LLM_PARAM_INVALID
        else:
            allowed = None
        cm = node.dd.cache_manager
        code, _ = self._call(
            "copy_cache",
            self._door("copy_cache", cid, allowed),
            lambda: cm.copy_cache(dst_h, src_h, dst_batch, src_batch),
        )
        if code is None:
            assert dst is not None
            assert src is not None
            for t in range(NUM_TENSORS):
                dst.data[t][dst_batch] = src.data[t][src_batch].copy()

    @rule(
        cid=st.sampled_from(CLUSTERS),
        pairs=st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4)), max_size=3),
        data=st.data(),
    )
    def copy_blocks(self, cid: int, pairs: List[Tuple[int, int]], data: st.DataObject) -> None:
        node = self.nodes.get(cid)
        if node is None:
            return
        handle = self._pick(data, node.handles, True)
        if handle is None:
            return
        info: Dict[int, List[int]] = {}
        for s, t in pairs:
            info.setdefault(s, []).append(t)
        ordered = [(s, t) for s, ts in info.items() for t in ts]
        mc = node.live(handle)
        if mc is None:
            allowed = S.LLM_KV_CACHE_NOT_EXIST
        elif not all(s < mc.batch and t < mc.batch for s, t in ordered):
            allowed = S.LLM_PARAM_INVALID
        else:
            allowed = None
        code, _ = self._call(
            "copy_blocks",
            self._door("copy_blocks", cid, allowed),
            lambda: node.dd.cache_manager.copy_blocks(handle, info),
        )
        if code is None:
            assert mc is not None
            for t in range(NUM_TENSORS):
                for s, b in ordered:
                    mc.data[t][b] = mc.data[t][s].copy()

    @rule(
        cid=st.sampled_from(CLUSTERS),
        mapping=st.dictionaries(st.integers(0, 4), st.integers(0, 4), max_size=3),
        data=st.data(),
    )
    def swap_blocks(self, cid: int, mapping: Dict[int, int], data: st.DataObject) -> None:
        """Host <-> device blocks of one instance (only live caches: a stale handle has no addresses)."""
        node = self.nodes.get(cid)
        if node is None:
            return
        live = [mc for mc in node.caches.values() if mc.blocks and not mc.released]
        if not live:
            return
        src, dst = data.draw(st.sampled_from(live)), data.draw(st.sampled_from(live))
        if src.host == dst.host or not all(s < src.batch and t < dst.batch for s, t in mapping.items()):
            with_code = S.LLM_PARAM_INVALID
        else:
            with_code = self._door("swap_blocks", cid, None)
        code, _ = self._call(
            "swap_blocks",
            with_code,
            lambda: node.dd.cache_manager.swap_blocks(src.handle, dst.handle, mapping),
        )
        if code is None:
            for t in range(NUM_TENSORS):
                for s, b in mapping.items():
                    dst.data[t][b] = src.data[t][s]

    # -- invariants --------------------------------------------------------------------------------

    @invariant()
    def books_balance(self) -> None:
        STATS["stateful steps"] += 1
        backed = 0
        for cid, node in self.nodes.items():
            store = self.world.caches[cid]
            for pool, host in ((store.device_pool, False), (store.host_pool, True)):
                assert pool is not None
                assert pool.used == node.used(host), (cid, host)
                assert pool.used + pool.free_bytes == pool.capacity
            backed += sum(c.asked for c in node.caches.values())
            assert store.key_table == node.keys
            for cache_id, batch in store.key_table.values():
                assert batch < store.caches[cache_id].batch_size
            assert set(store.caches) == set(node.caches)
        assert self.world.memory.backed_bytes == backed
        assert not (set(self.world.caches) - set(self.nodes))

    @invariant()
    def bytes_match(self) -> None:
        for node in self.nodes.values():
            for mc in node.caches.values():
                for view, want in zip(self._views(mc), mc.data):
                    assert np.array_equal(view, want), mc.handle


TestCacheMachine = CacheMachine.TestCase
TestCacheMachine.settings = machine_settings(ci_examples=150, ci_steps=40)
