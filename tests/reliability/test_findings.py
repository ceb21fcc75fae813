"""What the reliability suites found, one regression test each.

Fixed here: ``switch_role`` argument handling as the real package orders it (found by the bad-input
suite). Fixed in the transfer engine: a pull over a link end whose peer finalized and came back is
``LLM_NOT_YET_LINK`` (the peer holds no link back); ``push_cache`` with a source batch past the source
cache is ``LLM_PARAM_INVALID``.
"""

from __future__ import annotations

import json
from typing import Iterator

import numpy as np
import pytest
from tests.reliability._common import link_info, listen_on

from datadist_sim._world.address_space import tensor_views
from datadist_sim._world.current import activate
from datadist_sim._world.world import SimWorld
from datadist_sim.llm_datadist.configs import LLMRole
from datadist_sim.llm_datadist.data_type import DataType
from datadist_sim.llm_datadist.status import LLMException, LLMStatusCode
from datadist_sim.llm_datadist.v2.llm_datadist import LLMDataDist, finalize_all
from datadist_sim.llm_datadist.v2.llm_types import CacheDesc, CacheKey, CacheKeyByIdAndIndex

S = LLMStatusCode
P_ID, D_ID = 1, 2


@pytest.fixture
def world() -> Iterator[SimWorld]:
    w = SimWorld(seed=4)
    with activate(w):
        yield w
    finalize_all(w)


def _prompt(v2: bool = True) -> LLMDataDist:
    dd = LLMDataDist(LLMRole.PROMPT, P_ID)
    opts = {"ge.exec.deviceId": "0", "llm.listenIpInfo": listen_on(P_ID)}
    if v2:
        opts.update(
            {"llm.EnableCacheManager": "1", "llm.MemPoolConfig": json.dumps({"memory_size": 1 << 22})}
        )
    dd.init(opts)
    return dd


def _decoder(v2: bool = True, **extra: str) -> LLMDataDist:
    dd = LLMDataDist(LLMRole.DECODER, D_ID)
    opts = {"ge.exec.deviceId": "0", **extra}
    if v2:
        opts.update(
            {"llm.EnableCacheManager": "1", "llm.MemPoolConfig": json.dumps({"memory_size": 1 << 22})}
        )
    dd.init(opts)
    return dd


def test_v1_switch_to_prompt_without_options_is_the_real_type_error(world: SimWorld) -> None:
    """Real v1 tests ``'llm.listenIpInfo' in switch_options``: None raises TypeError, not LLMException."""
    d = _decoder(v2=False, **{"llm.EnableSwitchRole": "1"})
    with pytest.raises(TypeError, match="NoneType"):
        d.switch_role(LLMRole.PROMPT)


def test_v1_switch_to_prompt_without_listen_info_has_the_real_message(world: SimWorld) -> None:
    d = _decoder(v2=False, **{"llm.EnableSwitchRole": "1"})
    with pytest.raises(LLMException, match=r'option "llm\.listenIpInfo" was specified') as info:
        d.switch_role(LLMRole.PROMPT, {})
    assert info.value.status_code is S.LLM_PARAM_INVALID


def test_v2_switch_role_looks_the_role_up_before_checking_switch_options(world: SimWorld) -> None:
    """Real v2 maps the role to its string (a dict lookup) before it type-checks ``switch_options``."""
    d = _decoder()
    with pytest.raises(KeyError):
        d.switch_role(None, "not a dict")  # type: ignore[arg-type]


def test_a_pull_over_an_end_whose_peer_finalized_and_came_back_fails(world: SimWorld) -> None:
    p, d = _prompt(), _decoder()
    assert d.link_clusters([link_info(P_ID)])[0] is S.LLM_SUCCESS
    p.finalize()
    p = _prompt()
    desc = CacheDesc(2, [1, 8, 16], DataType.DT_FLOAT16)
    src = p.cache_manager.allocate_cache(desc, [CacheKey(P_ID, 5)])
    for view in tensor_views(world.memory, src.tensor_addrs, (desc.size,), np.uint8):
        view[...] = 7
    dst = d.cache_manager.allocate_cache(desc)
    with pytest.raises(LLMException):
        d.cache_manager.pull_cache(CacheKey(P_ID, 5), dst)
    for view in tensor_views(world.memory, dst.tensor_addrs, (desc.size,), np.uint8):
        assert not (view == 7).all(), "no bytes crossed a link the new Prompt never made"


def test_push_cache_with_a_source_batch_past_the_cache_is_param_invalid(world: SimWorld) -> None:
    opts = {"llm.EnableRemoteCacheAccessible": "1"}
    p = LLMDataDist(LLMRole.PROMPT, P_ID)
    p.init(
        {
            "ge.exec.deviceId": "0",
            "llm.listenIpInfo": listen_on(P_ID),
            "llm.EnableCacheManager": "1",
            "llm.MemPoolConfig": json.dumps({"memory_size": 1 << 22, "page_shift": 12}),
            **opts,
        }
    )
    d = _decoder(**opts)
    assert d.link_clusters([link_info(P_ID)])[0] is S.LLM_SUCCESS
    desc = CacheDesc(2, [1, 8, 16], DataType.DT_FLOAT16)
    src, dst = d.cache_manager.allocate_cache(desc), p.cache_manager.allocate_cache(desc)
    for view in tensor_views(world.memory, dst.tensor_addrs, (desc.size,), np.uint8):
        view[...] = 9
    with pytest.raises(LLMException) as info:
        d.cache_manager.push_cache(CacheKeyByIdAndIndex(P_ID, dst.cache_id, 0), src, src_batch_index=5)
    assert info.value.status_code is S.LLM_PARAM_INVALID
    for view in tensor_views(world.memory, dst.tensor_addrs, (desc.size,), np.uint8):
        assert (view == 9).all(), "nothing was written"
