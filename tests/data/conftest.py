"""Builders for linked Prompt/Decode pairs with memory pools, in a fresh world per test."""

from __future__ import annotations

import json
from typing import Dict, Iterator, Tuple

import pytest
from tests.fabric.conftest import DECODE_IP, PROMPT_IP, info

from datadist_sim._world.current import activate
from datadist_sim._world.world import SimConfig, SimWorld
from datadist_sim.llm_datadist.configs import LLMRole
from datadist_sim.llm_datadist.status import LLMStatusCode
from datadist_sim.llm_datadist.v2.llm_datadist import LLMDataDist, finalize_all

MIB = 1 << 20
P_ID, D_ID = 1, 2


@pytest.fixture
def world() -> Iterator[SimWorld]:
    w = SimWorld(seed=3, config=SimConfig(pause_wall_limit_s=0.05))
    with activate(w):
        yield w
    finalize_all(w)
    assert not w.nodes
    assert w.memory.backed_bytes == 0


def pool(size: int = 64 * MIB, page_shift: int = 16) -> str:
    return json.dumps({"memory_size": size, "page_shift": page_shift})


def v2_options(listen: str = "", **extra: str) -> Dict[str, str]:
    opts = {"ge.exec.deviceId": "0", "llm.EnableCacheManager": "1", "llm.MemPoolConfig": pool()}
    if listen:
        opts["llm.listenIpInfo"] = listen
    opts.update(extra)
    return opts


def v1_options(listen: str = "", **extra: str) -> Dict[str, str]:
    opts = {"ge.exec.deviceId": "0", "ge.flowGraphMemMaxSize": str(64 * MIB)}
    if listen:
        opts["llm.listenIpInfo"] = listen
    opts.update(extra)
    return opts


def make(role: LLMRole, cluster_id: int, options: Dict[str, str]) -> LLMDataDist:
    dd = LLMDataDist(role, cluster_id)
    dd.init(options)
    return dd


def pair(*, v2: bool, link: bool = True, port: int = 26000, **extra: str) -> Tuple[LLMDataDist, LLMDataDist]:
    build = v2_options if v2 else v1_options
    p = make(LLMRole.PROMPT, P_ID, build(f"{PROMPT_IP}:{port}", **extra))
    d = make(LLMRole.DECODER, D_ID, build("", **extra))
    if link:
        ret, rets = d.link_clusters([info(P_ID, port, remote_ip=PROMPT_IP, local_ip=DECODE_IP)], 5000)
        assert ret == LLMStatusCode.LLM_SUCCESS, (ret, rets)
    return p, d
