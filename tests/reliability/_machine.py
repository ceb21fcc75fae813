"""What the two cache state machines share: the fabric (two Prompts, two Decoders), the model's link and
fault bookkeeping, the world faults and injected failures, the outcome check and the teardown check."""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Set, Tuple

import numpy as np
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from tests.reliability._common import STATS

from datadist_sim._status_v1 import LLM_ERRORS, as_code
from datadist_sim._world.current import activate
from datadist_sim._world.world import ROCE_BYTES_PER_S, SimConfig, SimWorld
from datadist_sim.faults.engine_codes import EngineMode, codes_for
from datadist_sim.faults.rules import Fault
from datadist_sim.llm_datadist.status import LLMStatusCode
from datadist_sim.llm_datadist.v2.llm_datadist import finalize_all

PROMPTS = (1, 2)
DECODERS = (11, 12)
CLUSTERS = PROMPTS + DECODERS
OOM_MAYBE = "success or out of memory"
"""An allowed outcome: the one place a model cannot know, whether a fragmented pool has a block that fits."""
Outcome = Optional[LLMStatusCode]
EngineKey = Tuple[str, int, int]


class FabricMachine(RuleBasedStateMachine):
    """Subclasses set the class attributes, call ``open_world`` first thing and keep ``nodes`` (cluster id
    -> a model node with ``caches``, ``keys`` and ``limit``) and ``ends``/``broken``/``stale`` current."""

    PAGE: int
    OOM: LLMStatusCode
    FAULT_OPS: Tuple[str, ...]
    INJECTED: Tuple[LLMStatusCode, ...]
    """Codes a fail rule injects: none a stale link end can give, so the two stay apart. Of these, a
    rule on an operation injects only those the engine gives it in ``MODE`` (``faults.engine_codes``)."""
    MODE: EngineMode

    def open_world(self, seed: int) -> None:
        self.world = SimWorld(seed=seed, config=SimConfig(pause_wall_limit_s=0.001))
        self.ctx = activate(self.world)
        self.ctx.__enter__()
        self.rng = np.random.default_rng(seed)
        self.nodes: Dict[int, Any] = {}
        self.ends: Set[Tuple[int, int]] = set()
        self.broken: Set[Tuple[int, int]] = set()
        self.slow: Set[Tuple[int, int]] = set()
        self.hung: Dict[int, Any] = {}
        self.stale: Set[Tuple[int, int]] = set()
        """Ends whose peer finalized and may have come back (see STALE_END in test_cache_machine)."""
        self.pending: Dict[Tuple[str, int], LLMStatusCode] = {}
        STATS["stateful sequences"] += 1

    def teardown(self) -> None:
        for gate in self.hung.values():
            gate.__exit__(None, None, None)
        finalize_all(self.world)
        self.ctx.__exit__(None, None, None)
        assert not self.world.nodes
        assert not self.world.listeners
        assert self.world.memory.backed_bytes == 0

    # -- helpers -----------------------------------------------------------------------------------

    def _call(self, op: str, allowed: Any, fn: Callable[[], Any]) -> Tuple[Outcome, Any]:
        """Run ``fn``; its code (None for success) must be ``allowed``: a code, None, OOM_MAYBE, or a
        frozenset of those."""
        try:
            result, code = fn(), None
        except LLM_ERRORS as exc:  # a KvCacheManager raises the v1 package's class
            result, code = None, as_code(exc.status_code)
        if isinstance(allowed, frozenset):
            ok: Any = allowed
        else:
            ok = {None, self.OOM} if allowed == OOM_MAYBE else {allowed}
        assert code in ok, f"{op}: got {code}, model allows {allowed}"
        STATS[f"{type(self).__name__} {op} -> {code.name if code is not None else 'LLM_SUCCESS'}"] += 1
        return code, result

    def _door(self, op: str, cid: int, allowed: Any) -> Any:
        """A pending injected failure of ``op`` on ``cid`` fires here (after the face's checks), once."""
        code = self.pending.pop((op, cid), None)
        return allowed if code is None else code

    @staticmethod
    def _free(node: Any, mc: Any) -> None:
        for ek in mc.keys:
            node.keys.pop(ek, None)
        mc.keys.clear()
        node.caches.pop(mc.handle.cache_id, None)

    def _drop_key(self, node: Any, ek: EngineKey) -> None:
        cache_id, _ = node.keys.pop(ek)
        mc = node.caches[cache_id]
        mc.keys.discard(ek)
        if mc.released and not mc.keys:
            self._free(node, mc)

    def _forget(self, cid: int) -> None:
        """``cid`` finalized: its ends go; ends others hold towards it go stale."""
        self.stale |= {(a, b) for a, b in self.ends if b == cid}
        self.ends = {(a, b) for a, b in self.ends if a != cid}
        self.broken = {(a, b) for a, b in self.broken if a != cid}
        self.stale = {(a, b) for a, b in self.stale if a != cid}

    def _linked(self, d: int, p: int) -> None:
        self.ends |= {(d, p), (p, d)}
        self.broken -= {(d, p), (p, d)}
        self.stale -= {(d, p), (p, d)}

    # -- faults of the world, and injected failures ----------------------------------------------

    @rule(cid=st.sampled_from(CLUSTERS), pages=st.one_of(st.none(), st.integers(0, 16)))
    def cap_pool(self, cid: int, pages: Optional[int]) -> None:
        node = self.nodes.get(cid)
        if node is None:
            return
        node.limit = None if pages is None else pages * self.PAGE
        pool = self.world.caches[cid].device_pool
        assert pool is not None
        pool.set_limit(node.limit)
        STATS["faults injected"] += pages is not None

    @rule(d=st.sampled_from(DECODERS), p=st.sampled_from(PROMPTS), slow=st.booleans())
    def slow_link(self, d: int, p: int, slow: bool) -> None:
        """A slow link makes every transfer outlast ``sync_kv_timeout`` (1 s): a timeout, link broken."""
        self.world.set_link_bandwidth(d, p, 100.0 if slow else ROCE_BYTES_PER_S)
        (self.slow.add if slow else self.slow.discard)((min(d, p), max(d, p)))
        STATS["faults injected"] += slow

    def _is_slow(self, d: int, p: int) -> bool:
        return (min(d, p), max(d, p)) in self.slow

    @rule(p=st.sampled_from(PROMPTS))
    def hang_or_heal(self, p: int) -> None:
        """A hung Prompt answers no handshake: link times out, a non-force unlink fails."""
        gate = self.hung.pop(p, None)
        if gate is not None:
            gate.__exit__(None, None, None)
            return
        gate = self.world.pause(p)
        gate.__enter__()
        self.hung[p] = gate
        STATS["faults injected"] += 1

    @rule(cid=st.sampled_from(CLUSTERS), data=st.data())
    def inject_failure(self, cid: int, data: st.DataObject) -> None:
        """A fault-plan rule: the next ``op`` by ``cid`` to get past its argument checks fails with
        ``code`` and changes nothing."""
        op = data.draw(st.sampled_from(self.FAULT_OPS))
        codes = [code for code in self.INJECTED if code in codes_for(op, self.MODE)]
        if not codes or (op, cid) in self.pending:
            return
        code = data.draw(st.sampled_from(codes))
        self.world.faults.add(Fault.fail(code, op=op, cluster=cid, first=1))
        self.pending[(op, cid)] = code
        STATS["faults injected"] += 1

    @invariant()
    def links_match(self) -> None:
        assert set(self.world.links()) == self.ends
        for d, p in self.ends:
            assert self.world.node(d).peers[p].broken == ((d, p) in self.broken)  # type: ignore[union-attr]
