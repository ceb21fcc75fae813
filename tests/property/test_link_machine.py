"""Links under any sequence of link / unlink / force-unlink / finalize / re-init, against a reference model.

Invariants after every step: each call's codes are the ones the model predicts, and the world's link
ends are exactly the model's (healthy links on both ends, half-open ends only where a force unlink or a
finalize left them).
"""

from __future__ import annotations

from typing import Dict, Set, Tuple

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from datadist_sim._world.current import activate
from datadist_sim._world.world import SimWorld
from datadist_sim.llm_datadist.configs import LLMClusterInfo, LLMRole
from datadist_sim.llm_datadist.status import LLMStatusCode
from datadist_sim.llm_datadist.v2.llm_datadist import LLMDataDist, finalize_all

S = LLMStatusCode
PROMPTS = (0, 1, 2)
DECODERS = (10, 11)


def _port(cluster_id: int) -> int:
    return 26000 + cluster_id


def _info(remote: int) -> LLMClusterInfo:
    c = LLMClusterInfo()
    c.remote_cluster_id = remote
    c.append_local_ip_info("192.168.2.1", 0)
    c.append_remote_ip_info("192.168.1.1", _port(remote))
    return c


class LinkMachine(RuleBasedStateMachine):
    """v2 (CacheManager mode) links; Prompts listen, Decoders are clients."""

    @initialize()
    def start(self) -> None:
        self.world = SimWorld(seed=1)
        self.ctx = activate(self.world)
        self.ctx.__enter__()
        self.dds: Dict[int, LLMDataDist] = {}
        self.ends: Set[Tuple[int, int]] = set()
        for cid in PROMPTS + DECODERS:
            self._init(cid)

    def _init(self, cid: int) -> None:
        opts = {"ge.exec.deviceId": "0", "llm.EnableCacheManager": "1"}
        if cid in PROMPTS:
            opts["llm.listenIpInfo"] = f"192.168.1.1:{_port(cid)}"
        dd = LLMDataDist(LLMRole.PROMPT if cid in PROMPTS else LLMRole.DECODER, cid)
        dd.init(opts)
        self.dds[cid] = dd

    def teardown(self) -> None:
        finalize_all(self.world)
        self.ctx.__exit__(None, None, None)

    @rule(d=st.sampled_from(DECODERS), p=st.sampled_from(PROMPTS))
    def link(self, d: int, p: int) -> None:
        if d not in self.dds:
            return
        ret, rets = self.dds[d].link_clusters([_info(p)])
        if p not in self.dds:
            expected = S.LLM_LINK_FAILED
        elif (d, p) in self.ends:
            expected = S.LLM_ALREADY_LINK
        else:
            expected = S.LLM_SUCCESS
            self.ends |= {(d, p), (p, d)}
        assert (ret, rets) == (expected, [expected])

    @rule(d=st.sampled_from(DECODERS), p=st.sampled_from(PROMPTS), force=st.booleans())
    def unlink(self, d: int, p: int, force: bool) -> None:
        if d not in self.dds:
            return
        ret, rets = self.dds[d].unlink_clusters([_info(p)], force=force)
        if force:
            expected = S.LLM_SUCCESS
            self.ends.discard((d, p))
        elif p not in self.dds:
            expected = S.LLM_UNLINK_FAILED
        else:
            expected = S.LLM_SUCCESS
            self.ends -= {(d, p), (p, d)}
        assert (ret, rets) == (expected, [expected])

    @rule(cid=st.sampled_from(PROMPTS + DECODERS))
    def finalize(self, cid: int) -> None:
        dd = self.dds.pop(cid, None)
        if dd is not None:
            dd.finalize()
            self.ends = {(a, b) for a, b in self.ends if a != cid}

    @precondition(lambda self: len(self.dds) < len(PROMPTS + DECODERS))
    @rule(cid=st.sampled_from(PROMPTS + DECODERS))
    def reinit(self, cid: int) -> None:
        if cid not in self.dds:
            self._init(cid)

    @invariant()
    def ends_match_the_model(self) -> None:
        assert set(self.world.links()) == self.ends


TestLinkMachine = LinkMachine.TestCase
TestLinkMachine.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
