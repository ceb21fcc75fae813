"""``LLMDataDist(role, cluster_id).init(options)`` with one thing wrong: the documented error, nothing left
behind in the world, and the same object inits cleanly afterwards."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Optional, Type

import pytest
from tests.reliability._bad_env import P_ID, Env, names_arg
from tests.reliability._common import STATS, listen_on

from datadist_sim.llm_datadist.configs import LLMRole
from datadist_sim.llm_datadist.status import LLMException, LLMStatusCode
from datadist_sim.llm_datadist.v2.llm_datadist import LLMDataDist

S = LLMStatusCode
_PI = S.LLM_PARAM_INVALID
_V2 = {"ge.exec.deviceId": "0", "llm.EnableCacheManager": "1"}


@dataclass
class InitCase:
    """``LLMDataDist(role, cluster_id).init(options)`` with one thing wrong."""

    label: str
    cluster_id: Any
    options: Any
    want: Type[BaseException]
    code: Optional[LLMStatusCode] = None
    names: str = ""
    role: Any = LLMRole.DECODER


INIT_CASES = [
    InitCase("cluster_id a str", "3", dict(_V2), TypeError, names="cluster_id"),
    InitCase("cluster_id negative", -1, dict(_V2), ValueError, names="cluster_id"),
    InitCase("cluster_id past uint64", 2**64, dict(_V2), ValueError, names="cluster_id"),
    InitCase("role an int", 3, dict(_V2), TypeError, names="role", role=2),
    InitCase("options a list", 3, [], TypeError, names="options"),
    InitCase(
        "flowGraphMemMaxSize not digits",
        3,
        {"ge.flowGraphMemMaxSize": "1G"},
        LLMException,
        _PI,
        "flowGraphMemMaxSize",
    ),
    InitCase(
        "flowGraphMemMaxSize two pools",
        3,
        {"ge.flowGraphMemMaxSize": "1,2"},
        LLMException,
        _PI,
        "flowGraphMemMaxSize",
    ),
    InitCase(
        "listenIpInfo without a port",
        3,
        {**_V2, "llm.listenIpInfo": "192.168.9.9"},
        LLMException,
        _PI,
        "listenIpInfo",
    ),
    InitCase(
        "MemPoolConfig not JSON",
        3,
        {**_V2, "llm.MemPoolConfig": "{"},
        LLMException,
        _PI,
        "memory pool config",
    ),
    InitCase(
        "MemPoolConfig page_shift 40",
        3,
        {**_V2, "llm.MemPoolConfig": '{"memory_size": 1048576, "page_shift": 40}'},
        LLMException,
        _PI,
        "page_shift",
    ),
    InitCase(
        "MemPoolConfig memory_size 0",
        3,
        {**_V2, "llm.MemPoolConfig": '{"memory_size": 0}'},
        LLMException,
        _PI,
        "memory_size",
    ),
    InitCase("cluster id already in the world", P_ID, dict(_V2), LLMException, _PI, "cluster_id"),
    InitCase(
        "listen endpoint in use",
        3,
        {**_V2, "llm.listenIpInfo": listen_on(P_ID)},
        LLMException,
        S.LLM_FAILED,
        "in use",
    ),
    InitCase(
        "TransferBackend without the cache manager",
        3,
        {"ge.exec.deviceId": "0", "llm.TransferBackend": "x"},
        LLMException,
        _PI,
        "TransferBackend",
    ),
]


@pytest.mark.parametrize("case", INIT_CASES, ids=lambda c: c.label)
def test_bad_init(env: Env, case: InitCase) -> None:
    """A failed ``init`` leaves no instance, no listener and no pool behind; the same object can then
    ``init`` properly (where its constructor arguments were good)."""
    before = env.state()
    STATS["bad inputs tried"] += 1
    made: List[LLMDataDist] = []

    def attempt() -> None:
        made.append(LLMDataDist(case.role, case.cluster_id))
        made[0].init(case.options)

    with pytest.raises(case.want) as info:
        attempt()
    if case.code is not None:
        assert info.value.status_code is case.code  # type: ignore[attr-defined]
    assert names_arg(info.value, case.names), str(info.value)
    assert env.state() == before, "the world changed"
    if made and case.cluster_id == 3:
        made[0].init(dict(_V2))
        assert env.world.node(3) is not None
        made[0].finalize()
        assert env.state() == before
