"""Builders for Prompt/Decode instances in a fresh world per test."""

from __future__ import annotations

from typing import Dict, Iterator, Optional

import pytest

from datadist_sim._world.current import activate
from datadist_sim._world.world import SimConfig, SimWorld
from datadist_sim.llm_datadist.configs import LLMClusterInfo, LLMRole
from datadist_sim.llm_datadist.v2.llm_datadist import LLMDataDist, finalize_all

PROMPT_IP = "192.168.1.1"
DECODE_IP = "192.168.2.1"


@pytest.fixture
def world() -> Iterator[SimWorld]:
    w = SimWorld(seed=7, config=SimConfig(pause_wall_limit_s=0.05))
    with activate(w):
        yield w
    finalize_all(w)
    assert not w.nodes


def options(*, v2: bool, listen: Optional[str] = None, **extra: str) -> Dict[str, str]:
    opts = {"ge.exec.deviceId": "0"}
    if v2:
        opts["llm.EnableCacheManager"] = "1"
    if listen is not None:
        opts["llm.listenIpInfo"] = listen
    opts.update(extra)
    return opts


def prompt(
    cluster_id: int, port: int = 26000, *, v2: bool = False, ip: str = PROMPT_IP, **extra: str
) -> LLMDataDist:
    dd = LLMDataDist(LLMRole.PROMPT, cluster_id)
    dd.init(options(v2=v2, listen=f"{ip}:{port}", **extra))
    return dd


def decoder(cluster_id: int, *, v2: bool = False, listen: Optional[str] = None, **extra: str) -> LLMDataDist:
    dd = LLMDataDist(LLMRole.DECODER, cluster_id)
    dd.init(options(v2=v2, listen=listen, **extra))
    return dd


def info(
    remote_id: int, port: int = 26000, *, remote_ip: str = PROMPT_IP, local_ip: str = DECODE_IP
) -> LLMClusterInfo:
    c = LLMClusterInfo()
    c.remote_cluster_id = remote_id
    c.append_local_ip_info(local_ip, 0)
    c.append_remote_ip_info(remote_ip, port)
    return c
