"""The hixl transfer backend (``llm.TransferBackend = "hixl"``): a one-sided link table.

Vendor facts (hixl ``src/llm_datadist/transfer_engine/hixl_transfer_engine.cc`` and the adxl channel code
under it) are listed in ``docs/vendor_facts.md``; the default backend keeps its two-sided table.
"""

from __future__ import annotations

import json
from typing import List

import numpy as np
import pytest

from datadist_sim._world.world import SimWorld
from datadist_sim.faults import Fault
from datadist_sim.llm_datadist.configs import LLMClusterInfo, LLMRole
from datadist_sim.llm_datadist.data_type import DataType
from datadist_sim.llm_datadist.status import LLMException, LLMStatusCode
from datadist_sim.llm_datadist.v2.llm_datadist import LLMDataDist
from datadist_sim.llm_datadist.v2.llm_types import Cache, CacheDesc, CacheKeyByIdAndIndex

from .conftest import DECODE_IP, PROMPT_IP, decoder, info, prompt

S = LLMStatusCode
P_PORT, D_PORT = 26000, 26001


def hixl(role: LLMRole, cluster_id: int, ip: str, port: int, backend: str = "hixl") -> LLMDataDist:
    dd = LLMDataDist(role, cluster_id)
    dd.init(
        {
            "ge.exec.deviceId": "0",
            "llm.EnableCacheManager": "1",
            "llm.TransferBackend": backend,
            "llm.listenIpInfo": f"{ip}:{port}",
            "llm.MemPoolConfig": json.dumps({"memory_size": 1 << 24, "page_shift": 16}),
        }
    )
    return dd


def hixl_pair() -> tuple[LLMDataDist, LLMDataDist]:
    return (
        hixl(LLMRole.PROMPT, 0, PROMPT_IP, P_PORT),
        hixl(LLMRole.DECODER, 1, DECODE_IP, D_PORT),
    )


def to_prompt() -> LLMClusterInfo:
    return info(0, P_PORT, remote_ip=PROMPT_IP, local_ip=DECODE_IP)


def to_decoder() -> LLMClusterInfo:
    return info(1, D_PORT, remote_ip=DECODE_IP, local_ip=PROMPT_IP)


def id_only(remote_id: int) -> LLMClusterInfo:
    """What the vendor's hixl sample unlinks with: the remote cluster id and nothing else."""
    c = LLMClusterInfo()
    c.remote_cluster_id = remote_id
    return c


def views(world: SimWorld, cache: Cache) -> List[np.ndarray]:
    from datadist_sim._world.address_space import tensor_views

    return tensor_views(world.memory, cache.tensor_addrs, cache.cache_desc.shape, np.float32)


def desc() -> CacheDesc:
    return CacheDesc(2, [2, 8], DataType.DT_FLOAT)


def test_two_hixl_instances_linking_each_other_both_succeed(world: SimWorld) -> None:
    p, d = hixl_pair()
    assert d.link_clusters([to_prompt()]) == (S.LLM_SUCCESS, [S.LLM_SUCCESS])
    assert p.link_clusters([to_decoder()]) == (S.LLM_SUCCESS, [S.LLM_SUCCESS])
    assert world.links() == [(0, 1), (1, 0)]


def test_hixl_link_is_held_by_the_caller_alone(world: SimWorld) -> None:
    _, d = hixl_pair()
    d.link_clusters([to_prompt()])
    assert world.links() == [(1, 0)]


def test_hixl_linking_the_same_peer_twice_is_already_link(world: SimWorld) -> None:
    _, d = hixl_pair()
    d.link_clusters([to_prompt()])
    assert d.link_clusters([to_prompt()]) == (S.LLM_ALREADY_LINK, [S.LLM_ALREADY_LINK])


def test_default_backend_second_direction_is_already_link(world: SimWorld) -> None:
    p = prompt(0, P_PORT, v2=True)
    d = decoder(1, v2=True, listen=f"{DECODE_IP}:{D_PORT}")
    assert d.link_clusters([to_prompt()]) == (S.LLM_SUCCESS, [S.LLM_SUCCESS])
    assert p.link_clusters([to_decoder()]) == (S.LLM_ALREADY_LINK, [S.LLM_ALREADY_LINK])


def test_default_backend_unlink_without_remote_ip_is_param_invalid(world: SimWorld) -> None:
    prompt(0, P_PORT, v2=True)
    d = decoder(1, v2=True)
    d.link_clusters([to_prompt()])
    assert d.unlink_clusters([id_only(0)]) == (S.LLM_PARAM_INVALID, [S.LLM_PARAM_INVALID])
    assert world.is_linked(1, 0)


def test_either_hixl_side_pushes_and_pulls_over_its_own_link_whatever_its_role(world: SimWorld) -> None:
    p, d = hixl_pair()
    d.link_clusters([to_prompt()])
    p.link_clusters([to_decoder()])
    p_cache = p.cache_manager.allocate_cache(desc())
    d_cache = d.cache_manager.allocate_cache(desc())
    for v in views(world, d_cache):
        v[...] = 7.0
    # The Prompt pulls from the Decoder, then the Decoder pushes batch 1 to the Prompt.
    p.cache_manager.pull_cache(CacheKeyByIdAndIndex(1, d_cache.cache_id, 0), p_cache, 0)
    for v in views(world, d_cache):
        v[1] = 3.0
    d.cache_manager.push_cache(CacheKeyByIdAndIndex(0, p_cache.cache_id, 1), d_cache, 1)
    for v in views(world, p_cache):
        assert (v[0] == 7.0).all()
        assert (v[1] == 3.0).all()


def test_hixl_pull_without_an_own_link_is_not_yet_link(world: SimWorld) -> None:
    p, d = hixl_pair()
    d.link_clusters([to_prompt()])  # only the Decoder holds a link
    p_cache = p.cache_manager.allocate_cache(desc())
    d_cache = d.cache_manager.allocate_cache(desc())
    for v in views(world, p_cache):
        v[...] = 1.0
    with pytest.raises(LLMException) as caught:
        p.cache_manager.pull_cache(CacheKeyByIdAndIndex(1, d_cache.cache_id, 0), p_cache, 0)
    assert caught.value.status_code is S.LLM_NOT_YET_LINK
    assert all((v == 1.0).all() for v in views(world, p_cache))


def test_hixl_unlink_without_remote_ip_or_force_drops_the_callers_entry_and_succeeds(world: SimWorld) -> None:
    p, d = hixl_pair()
    d.link_clusters([to_prompt()])
    p.link_clusters([to_decoder()])
    assert d.unlink_clusters([id_only(0)]) == (S.LLM_SUCCESS, [S.LLM_SUCCESS])
    assert world.links() == [(0, 1)], "the Prompt's own link to the Decoder stays"
    assert p.unlink_clusters([id_only(1)]) == (S.LLM_SUCCESS, [S.LLM_SUCCESS])
    assert world.links() == []


def test_hixl_unlink_of_a_peer_never_linked_succeeds(world: SimWorld) -> None:
    _, d = hixl_pair()
    assert d.unlink_clusters([id_only(0)]) == (S.LLM_SUCCESS, [S.LLM_SUCCESS])


def test_hixl_unlink_after_the_peer_finalized_succeeds(world: SimWorld) -> None:
    p, d = hixl_pair()
    d.link_clusters([to_prompt()])
    p.finalize()
    assert d.unlink_clusters([id_only(0)]) == (S.LLM_SUCCESS, [S.LLM_SUCCESS])
    assert world.links() == []


def test_hixl_pull_from_a_peer_that_finalized_and_came_back_is_not_yet_link(world: SimWorld) -> None:
    p, d = hixl_pair()
    d.link_clusters([to_prompt()])
    p.finalize()
    p = hixl(LLMRole.PROMPT, 0, PROMPT_IP, P_PORT)
    p_cache = p.cache_manager.allocate_cache(desc())
    d_cache = d.cache_manager.allocate_cache(desc())
    with pytest.raises(LLMException) as caught:
        d.cache_manager.pull_cache(CacheKeyByIdAndIndex(0, p_cache.cache_id, 0), d_cache, 0)
    assert caught.value.status_code is S.LLM_NOT_YET_LINK
    assert d.unlink_clusters([id_only(0)])[0] is S.LLM_SUCCESS
    assert d.link_clusters([to_prompt()]) == (S.LLM_SUCCESS, [S.LLM_SUCCESS])
    d.cache_manager.pull_cache(CacheKeyByIdAndIndex(0, p_cache.cache_id, 0), d_cache, 0)


def test_hixl_link_to_a_default_backend_listener_is_link_failed(world: SimWorld) -> None:
    prompt(0, P_PORT, v2=True)
    d = hixl(LLMRole.DECODER, 1, DECODE_IP, D_PORT)
    assert d.link_clusters([to_prompt()]) == (S.LLM_LINK_FAILED, [S.LLM_LINK_FAILED])


def test_hixl_link_to_an_address_nobody_serves_is_failed_at_once(world: SimWorld) -> None:
    """The hixl engine's connect to a port nobody listens on is refused: hixl ``FAILED``, i.e.
    ``LLM_FAILED`` (hixl ``src/hixl/common/ctrl_msg_plugin.cc:119-122``, ``common/llm_log.h:164-176``),
    without waiting out the link timeout; the caller keeps no entity."""
    d = hixl(LLMRole.DECODER, 1, DECODE_IP, D_PORT)
    start = world.now()
    assert d.link_clusters([to_prompt()], 5000) == (S.LLM_FAILED, [S.LLM_FAILED])
    assert world.now() - start < 5.0
    assert world.links() == []


def test_hixl_link_across_a_partition_is_timeout_after_the_link_timeout(world: SimWorld) -> None:
    """A cut network drops the connect, which the hixl engine gives up at the link timeout: hixl
    ``TIMEOUT``, i.e. ``LLM_TIMEOUT`` (``ctrl_msg_plugin.cc:77-80``); the default backend's
    ``LLM_LINK_FAILED`` is no hixl code."""
    _, d = hixl_pair()
    world.faults.add(Fault.partition(0, 1))
    start = world.now()
    assert d.link_clusters([to_prompt()], 2000) == (S.LLM_TIMEOUT, [S.LLM_TIMEOUT])
    assert world.now() - start >= 2.0
    assert world.links() == []


def test_unknown_transfer_backend_fails_init_with_param_invalid(world: SimWorld) -> None:
    with pytest.raises(LLMException, match="Transfer backend:tcp is not supported") as caught:
        hixl(LLMRole.PROMPT, 0, PROMPT_IP, P_PORT, backend="tcp")
    assert caught.value.status_code is S.LLM_PARAM_INVALID
    assert not world.nodes


@pytest.mark.parametrize("call", ["link", "unlink", "query_register_mem_status"])
def test_rank_table_calls_on_hixl_are_feature_not_enabled(world: SimWorld, call: str) -> None:
    p, _ = hixl_pair()
    table = json.dumps({"version": "1.0", "status": "completed"})
    args = ("comm", {0: 0, 1: 1}, table) if call == "link" else (1,)
    with pytest.raises(LLMException) as caught:
        getattr(p, call)(*args)
    assert caught.value.status_code is S.LLM_FEATURE_NOT_ENABLED


def test_hixl_switch_role_with_live_links_succeeds(world: SimWorld) -> None:
    p, d = hixl_pair()
    p.link_clusters([to_decoder()])
    p.switch_role(LLMRole.DECODER)
    node = world.node(0)
    assert node is not None
    assert node.role.value == "Decoder"
    assert world.links() == [(0, 1)]
    assert d.link_clusters([to_prompt()])[0] is S.LLM_SUCCESS, "the engine still listens"


def test_hixl_switch_role_to_another_listen_address_is_feature_not_enabled(world: SimWorld) -> None:
    p, _ = hixl_pair()
    with pytest.raises(LLMException) as caught:
        p.switch_role(LLMRole.DECODER, {"llm.listenIpInfo": f"{PROMPT_IP}:27000"})
    assert caught.value.status_code is S.LLM_FEATURE_NOT_ENABLED
    p.switch_role(LLMRole.DECODER, {"llm.listenIpInfo": f"{PROMPT_IP}:{P_PORT}"})


# -- Decodes listening on port 0 (client-only engines) ---------------------------------------------


def test_hixl_decodes_on_port_0_link_out_both_ways_of_data_and_nobody_links_to_them(world: SimWorld) -> None:
    """A serving engine's Decodes on one host give ``llm.listenIpInfo`` port 0: neither hixl engine
    listens then (adxl ``channel_msg_handler.cc:191-194``, hixl_cs ``hixl_server.cc:96``), so two of them
    share the address, each links to the Prompt, and both directions of data go over those links (a
    pull of the Prompt's KV, a push back); a Prompt linking to a Decode's port 0 reaches nobody
    (``LLM_FAILED``: a refused connect), while the Prompt's own link to a Decode that listens on a port
    works."""
    p = hixl(LLMRole.PROMPT, 0, PROMPT_IP, P_PORT)
    decodes = [hixl(LLMRole.DECODER, 1, DECODE_IP, 0), hixl(LLMRole.DECODER, 2, DECODE_IP, 0)]
    p_cache = p.cache_manager.allocate_cache(desc())
    for v in views(world, p_cache):
        v[...] = 5.0
    for n, d in enumerate(decodes, start=1):
        assert d.link_clusters([to_prompt()]) == (S.LLM_SUCCESS, [S.LLM_SUCCESS])
        back = info(n, 0, remote_ip=DECODE_IP, local_ip=PROMPT_IP)
        assert p.link_clusters([back], 1000) == (S.LLM_FAILED, [S.LLM_FAILED])
        d_cache = d.cache_manager.allocate_cache(desc())
        d.cache_manager.pull_cache(CacheKeyByIdAndIndex(0, p_cache.cache_id, 0), d_cache, 1)
        for v in views(world, d_cache):
            assert (v[1] == 5.0).all()
            assert (v[0] == 0.0).all()
            v[0] = float(n)
        d.cache_manager.push_cache(CacheKeyByIdAndIndex(0, p_cache.cache_id, 1), d_cache, 0)
        for v in views(world, p_cache):
            assert (v[1] == float(n)).all()
    assert sorted(world.links()) == [(1, 0), (2, 0)]
    listening = hixl(LLMRole.DECODER, 3, DECODE_IP, D_PORT)
    assert p.link_clusters([info(3, D_PORT, remote_ip=DECODE_IP, local_ip=PROMPT_IP)]) == (
        S.LLM_SUCCESS,
        [S.LLM_SUCCESS],
    )
    assert listening.link_clusters([to_prompt()]) == (S.LLM_SUCCESS, [S.LLM_SUCCESS])
    assert (0, 3) in world.links()
    assert (3, 0) in world.links()
