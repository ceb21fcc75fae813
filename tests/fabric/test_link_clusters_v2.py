"""link_clusters / unlink_clusters / switch_role in CacheManager mode (reference §5.4, §5.5, §5.7, §15)."""

from __future__ import annotations

import pytest

from datadist_sim._world.world import SimWorld
from datadist_sim.llm_datadist.configs import LLMClusterInfo, LLMRole
from datadist_sim.llm_datadist.status import LLMException, LLMStatusCode

from .conftest import DECODE_IP, decoder, info, prompt

S = LLMStatusCode


def test_any_role_may_link_and_the_listener_is_the_server(world: SimWorld) -> None:
    prompt(0, v2=True)
    d = decoder(1, v2=True)
    assert d.link_clusters([info(0)]) == (S.LLM_SUCCESS, [S.LLM_SUCCESS])
    server_decoder = decoder(2, v2=True, listen=f"{DECODE_IP}:27000")
    client_prompt = prompt(3, 26003, v2=True)
    assert client_prompt.link_clusters([info(2, 27000, remote_ip=DECODE_IP)]) == (
        S.LLM_SUCCESS,
        [S.LLM_SUCCESS],
    )
    assert world.is_linked(1, 0)
    assert world.is_linked(3, server_decoder.cluster_id)


def test_empty_cluster_list_is_param_invalid(world: SimWorld) -> None:
    assert decoder(1, v2=True).link_clusters([]) == (S.LLM_PARAM_INVALID, [])


def test_empty_local_ip_list_without_local_comm_res_raises_param_invalid(world: SimWorld) -> None:
    c = LLMClusterInfo()
    c.remote_cluster_id = 0
    c.append_remote_ip_info("192.168.1.1", 26000)
    with pytest.raises(LLMException, match="local_ip_info_list is empty") as exc:
        decoder(1, v2=True).link_clusters([c])
    assert exc.value.status_code is S.LLM_PARAM_INVALID


def test_remote_cluster_id_unset_is_type_error(world: SimWorld) -> None:
    c = LLMClusterInfo()
    c.append_local_ip_info(DECODE_IP, 0)
    with pytest.raises(TypeError, match="remote_cluster_id"):
        decoder(1, v2=True).link_clusters([c])


def test_two_remote_endpoints_give_a_per_cluster_param_invalid(world: SimWorld) -> None:
    prompt(0, v2=True)
    c = info(0)
    c.append_remote_ip_info("192.168.1.1", 26001)
    assert decoder(1, v2=True).link_clusters([c]) == (S.LLM_PARAM_INVALID, [S.LLM_PARAM_INVALID])


def test_nobody_listening_gives_link_failed_after_the_timeout(world: SimWorld) -> None:
    d = decoder(1, v2=True)
    assert d.link_clusters([info(0)], timeout=3000) == (S.LLM_LINK_FAILED, [S.LLM_LINK_FAILED])
    assert world.now() == 3.0


def test_timeout_shorter_than_link_setup_gives_llm_timeout(world: SimWorld) -> None:
    prompt(0, v2=True)
    assert decoder(1, v2=True).link_clusters([info(0)], timeout=1) == (S.LLM_TIMEOUT, [S.LLM_TIMEOUT])
    assert world.links() == []


def test_relink_gives_already_link_and_overall_is_the_last_failure(world: SimWorld) -> None:
    prompt(0, v2=True)
    d = decoder(1, v2=True)
    d.link_clusters([info(0)])
    assert d.link_clusters([info(0), info(7, 26007)]) == (
        S.LLM_LINK_FAILED,
        [S.LLM_ALREADY_LINK, S.LLM_LINK_FAILED],
    )
    assert d.link_clusters([info(0)]) == (S.LLM_ALREADY_LINK, [S.LLM_ALREADY_LINK])


def test_17_clusters_in_one_call_follow_the_code_by_default(world: SimWorld) -> None:
    d = decoder(100, v2=True)
    ret, rets = d.link_clusters([info(i, 26000 + i) for i in range(17)], timeout=10)
    assert (ret, rets) == (S.LLM_LINK_FAILED, [S.LLM_LINK_FAILED] * 17)


def test_17_clusters_in_one_call_exceed_the_limit_when_following_the_docs(world: SimWorld) -> None:
    world.config.v2_cluster_limit = True
    d = decoder(100, v2=True)
    assert d.link_clusters([info(i, 26000 + i) for i in range(17)]) == (S.LLM_CLUSTER_NUM_EXCEED_LIMIT, [])


def test_the_513th_link_is_param_invalid(world: SimWorld) -> None:
    d = decoder(10_000, v2=True)
    for start in range(0, 513, 16):
        ids = range(start, min(start + 16, 513))
        for i in ids:
            prompt(i, 20000 + i, v2=True)
        ret, rets = d.link_clusters([info(i, 20000 + i) for i in ids])
    assert ret is S.LLM_PARAM_INVALID
    assert rets[-1] is S.LLM_PARAM_INVALID
    assert len(d._node.peers) == 512  # type: ignore[union-attr]


def test_non_force_unlink_tears_down_both_ends(world: SimWorld) -> None:
    prompt(0, v2=True)
    d = decoder(1, v2=True)
    d.link_clusters([info(0)])
    assert d.unlink_clusters([info(0)]) == (S.LLM_SUCCESS, [S.LLM_SUCCESS])
    assert world.links() == []


def test_non_force_unlink_of_an_unreachable_server_is_unlink_failed(world: SimWorld) -> None:
    p = prompt(0, v2=True)
    d = decoder(1, v2=True)
    d.link_clusters([info(0)])
    p.finalize()
    assert d.unlink_clusters([info(0)], timeout=1000) == (S.LLM_UNLINK_FAILED, [S.LLM_UNLINK_FAILED])
    assert d.unlink_clusters([info(0)], force=True) == (S.LLM_SUCCESS, [S.LLM_SUCCESS])
    assert world.links() == []


def test_force_unlink_of_a_cluster_never_linked_succeeds(world: SimWorld) -> None:
    assert decoder(1, v2=True).unlink_clusters([info(0)], force=True) == (S.LLM_SUCCESS, [S.LLM_SUCCESS])


def test_force_must_be_a_bool(world: SimWorld) -> None:
    with pytest.raises(TypeError, match="force"):
        decoder(1, v2=True).unlink_clusters([info(0)], force=1)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("timeout", "error"), [(0, LLMException), (-5, LLMException), (2**31, ValueError), ("1", TypeError)]
)
def test_timeout_is_checked(world: SimWorld, timeout: object, error: type) -> None:
    with pytest.raises(error):
        decoder(1, v2=True).link_clusters([info(0)], timeout=timeout)  # type: ignore[arg-type]


def test_clusters_must_be_a_list_of_cluster_infos(world: SimWorld) -> None:
    with pytest.raises(TypeError, match="clusters"):
        decoder(1, v2=True).link_clusters([object()])  # type: ignore[list-item]


# -- switch_role ---------------------------------------------------------------------------------


def test_v2_switch_role_with_live_links_raises_exist_link(world: SimWorld) -> None:
    prompt(0, v2=True)
    d = decoder(1, v2=True)
    d.link_clusters([info(0)])
    with pytest.raises(LLMException) as exc:
        d.switch_role(LLMRole.PROMPT, {"llm.listenIpInfo": f"{DECODE_IP}:27000"})
    assert exc.value.status_code is S.LLM_EXIST_LINK


def test_v2_switch_role_moves_the_listener_and_roles_swap(world: SimWorld) -> None:
    p = prompt(0, v2=True)
    d = decoder(1, v2=True)
    p.switch_role(LLMRole.DECODER)
    assert world.listener_at(("192.168.1.1", 26000)) is None
    d.switch_role(LLMRole.PROMPT, {"llm.listenIpInfo": f"{DECODE_IP}:27000"})
    assert p.link_clusters([info(1, 27000, remote_ip=DECODE_IP, local_ip="192.168.1.1")]) == (
        S.LLM_SUCCESS,
        [S.LLM_SUCCESS],
    )


def test_v2_switch_to_the_same_role_is_allowed_as_in_the_code(world: SimWorld) -> None:
    d = decoder(1, v2=True)
    d.switch_role(LLMRole.DECODER)


def test_v1_switch_role_without_enable_switch_role_is_feature_not_enabled(world: SimWorld) -> None:
    d = decoder(1)
    with pytest.raises(LLMException) as exc:
        d.switch_role(LLMRole.PROMPT, {"llm.listenIpInfo": f"{DECODE_IP}:27000"})
    assert exc.value.status_code is S.LLM_FEATURE_NOT_ENABLED


def test_v1_switch_role_with_two_devices_is_feature_not_enabled(world: SimWorld) -> None:
    d = decoder(1, **{"llm.EnableSwitchRole": "1", "ge.exec.deviceId": "0;1"})
    with pytest.raises(LLMException) as exc:
        d.switch_role(LLMRole.PROMPT, {"llm.listenIpInfo": f"{DECODE_IP}:27000"})
    assert exc.value.status_code is S.LLM_FEATURE_NOT_ENABLED


def test_v1_switch_role_with_links_left_is_exist_link(world: SimWorld) -> None:
    prompt(0)
    d = decoder(1, **{"llm.EnableSwitchRole": "1"})
    d.link_clusters([info(0)])
    with pytest.raises(LLMException) as exc:
        d.switch_role(LLMRole.PROMPT, {"llm.listenIpInfo": f"{DECODE_IP}:27000"})
    assert exc.value.status_code is S.LLM_EXIST_LINK


def test_v1_switch_to_the_same_role_is_param_invalid(world: SimWorld) -> None:
    d = decoder(1, **{"llm.EnableSwitchRole": "1"})
    with pytest.raises(LLMException, match="role not changed") as exc:
        d.switch_role(LLMRole.DECODER)
    assert exc.value.status_code is S.LLM_PARAM_INVALID


def test_v1_switch_to_prompt_without_listen_ip_info_is_param_invalid(world: SimWorld) -> None:
    d = decoder(1, **{"llm.EnableSwitchRole": "1"})
    with pytest.raises(LLMException, match="listenIpInfo") as exc:
        d.switch_role(LLMRole.PROMPT, {})
    assert exc.value.status_code is S.LLM_PARAM_INVALID


def test_v1_decoder_becomes_prompt_and_accepts_links(world: SimWorld) -> None:
    d = decoder(1, **{"llm.EnableSwitchRole": "1"})
    d.switch_role(LLMRole.PROMPT, {"llm.listenIpInfo": f"{DECODE_IP}:27000"})
    other = decoder(2)
    assert other.link_clusters([info(1, 27000, remote_ip=DECODE_IP, local_ip="192.168.3.1")]) == (
        S.LLM_SUCCESS,
        [S.LLM_SUCCESS],
    )
