"""Validation the real engine does at ``init`` / ``switch_role``, and no more.

Sources (file:line) are in ``docs/vendor_facts.md``; each failed call leaves no instance and no
listener behind.
"""

from __future__ import annotations

import json
from typing import Dict

import pytest

from datadist_sim._world.world import SimWorld
from datadist_sim.llm_datadist.configs import LLMRole
from datadist_sim.llm_datadist.status import LLMException, LLMStatusCode
from datadist_sim.llm_datadist.v2.llm_datadist import LLMDataDist

from .conftest import PROMPT_IP, info

S = LLMStatusCode


def v2(cluster_id: int = 0, role: LLMRole = LLMRole.PROMPT, **extra: object) -> LLMDataDist:
    dd = LLMDataDist(role, cluster_id)
    opts: Dict[object, object] = {"ge.exec.deviceId": "0", "llm.EnableCacheManager": "1"}
    opts.update(extra)
    dd.init(opts)  # type: ignore[arg-type]
    return dd


def assert_nothing_left(world: SimWorld) -> None:
    assert not world.nodes
    assert world.listeners == {}


# -- listen address ------------------------------------------------------------------------------


def test_v1_prompt_listen_host_that_is_not_an_ip_is_a_plain_runtime_error(world: SimWorld) -> None:
    dd = LLMDataDist(LLMRole.PROMPT, 0)
    with pytest.raises(RuntimeError, match="Can not parse ip str:prompt-host") as caught:
        dd.init({"ge.exec.deviceId": "0", "llm.listenIpInfo": "prompt-host:26000"})
    assert type(caught.value) is RuntimeError
    assert_nothing_left(world)


def test_v1_switch_to_prompt_with_a_host_that_is_not_an_ip_is_a_plain_runtime_error(world: SimWorld) -> None:
    dd = LLMDataDist(LLMRole.DECODER, 1)
    dd.init({"ge.exec.deviceId": "0", "llm.EnableSwitchRole": "1"})
    with pytest.raises(RuntimeError, match="Can not parse ip str") as caught:
        dd.switch_role(LLMRole.PROMPT, {"llm.listenIpInfo": "prompt-host:26000"})
    assert type(caught.value) is RuntimeError
    assert world.listeners == {}


def test_v2_listen_host_that_is_not_an_ip_is_param_invalid(world: SimWorld) -> None:
    with pytest.raises(LLMException, match="not a valid ip address") as caught:
        v2(**{"llm.listenIpInfo": "prompt-host:26000"})
    assert caught.value.status_code is S.LLM_PARAM_INVALID
    assert_nothing_left(world)


def test_v2_listen_port_is_truncated_to_16_bits_at_bind(world: SimWorld) -> None:
    v2(**{"llm.listenIpInfo": f"{PROMPT_IP}:{65536 + 26000}"})
    assert world.listeners == {(PROMPT_IP, 26000): 0}
    d = v2(1, LLMRole.DECODER)
    assert d.link_clusters([info(0, 26000)]) == (S.LLM_SUCCESS, [S.LLM_SUCCESS])


def test_v2_negative_listen_port_wraps_as_an_unsigned_integer(world: SimWorld) -> None:
    v2(**{"llm.listenIpInfo": f"{PROMPT_IP}:-1"})
    assert world.listeners == {(PROMPT_IP, 65535): 0}


def test_v2_listen_port_that_does_not_fit_32_bits_is_param_invalid(world: SimWorld) -> None:
    with pytest.raises(LLMException) as caught:
        v2(**{"llm.listenIpInfo": f"{PROMPT_IP}:{2**32}"})
    assert caught.value.status_code is S.LLM_PARAM_INVALID
    assert_nothing_left(world)


def test_v2_two_ports_equal_modulo_65536_collide_at_bind(world: SimWorld) -> None:
    v2(**{"llm.listenIpInfo": f"{PROMPT_IP}:26000"})
    with pytest.raises(LLMException) as caught:
        v2(1, **{"llm.listenIpInfo": f"{PROMPT_IP}:{65536 + 26000}"})
    assert caught.value.status_code is S.LLM_FAILED


def test_v2_switch_role_listen_host_that_is_not_an_ip_is_param_invalid(world: SimWorld) -> None:
    d = v2(1, LLMRole.DECODER)
    with pytest.raises(LLMException) as caught:
        d.switch_role(LLMRole.PROMPT, {"llm.listenIpInfo": "prompt-host:26000"})
    assert caught.value.status_code is S.LLM_PARAM_INVALID
    assert world.listeners == {}


# -- MemPoolConfig --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "memory_size",
    ["67108864", True, 67108864.0, -1, 0, 1024],
    ids=["str", "bool", "float", "negative", "zero", "below-one-page"],
)
def test_mem_pool_memory_size_not_a_positive_int_of_a_page_or_more_is_param_invalid(
    world: SimWorld, memory_size: object
) -> None:
    with pytest.raises(LLMException) as caught:
        v2(**{"llm.MemPoolConfig": json.dumps({"memory_size": memory_size})})
    assert caught.value.status_code is S.LLM_PARAM_INVALID
    assert_nothing_left(world)
    assert world.memory.backed_bytes == 0


@pytest.mark.parametrize("page_shift", ["16", 16.0, True], ids=["str", "float", "bool"])
def test_mem_pool_page_shift_not_an_unsigned_int_is_param_invalid(
    world: SimWorld, page_shift: object
) -> None:
    with pytest.raises(LLMException) as caught:
        v2(**{"llm.MemPoolConfig": json.dumps({"memory_size": 1 << 20, "page_shift": page_shift})})
    assert caught.value.status_code is S.LLM_PARAM_INVALID


def test_mem_pool_of_exactly_one_page_is_accepted(world: SimWorld) -> None:
    v2(**{"llm.MemPoolConfig": json.dumps({"memory_size": 1 << 10, "page_shift": 10})})
    assert len(world.nodes) == 1


# -- option types ---------------------------------------------------------------------------------


@pytest.mark.parametrize("v2_mode", [True, False], ids=["v2", "v1"])
@pytest.mark.parametrize(
    ("key", "value"),
    [("llm.SyncKvCacheWaitTime", 100), (7, "x"), ("llm.Custom", None)],
    ids=["int-value", "int-key", "none-value"],
)
def test_option_key_or_value_that_is_not_str_is_type_error(
    world: SimWorld, v2_mode: bool, key: object, value: object
) -> None:
    opts: Dict[object, object] = {"ge.exec.deviceId": "0", key: value}
    if v2_mode:
        opts["llm.EnableCacheManager"] = "1"
    else:
        opts["llm.listenIpInfo"] = f"{PROMPT_IP}:26000"
    with pytest.raises(TypeError, match="incompatible function arguments"):
        LLMDataDist(LLMRole.PROMPT, 0).init(opts)  # type: ignore[arg-type]
    assert_nothing_left(world)


def test_option_value_given_as_bytes_reaches_the_engine_as_text(world: SimWorld) -> None:
    v2(**{"llm.SyncKvCacheWaitTime": b"250"})
    node = world.node(0)
    assert node is not None
    assert node.settings.sync_kv_timeout_ms == 250


def test_switch_role_option_value_that_is_not_str_is_type_error(world: SimWorld) -> None:
    d = v2(1, LLMRole.DECODER)
    with pytest.raises(TypeError, match="incompatible function arguments"):
        d.switch_role(LLMRole.PROMPT, {"llm.Custom": 1})  # type: ignore[dict-item]


# -- SyncKvCacheWaitTime --------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["+5", " 5", "-5", "1e3", "", "5ms", "\uff15"])
def test_sync_kv_wait_time_that_is_not_all_ascii_digits_is_param_invalid(world: SimWorld, value: str) -> None:
    with pytest.raises(LLMException, match="sync kv wait time") as caught:
        v2(**{"llm.SyncKvCacheWaitTime": value})
    assert caught.value.status_code is S.LLM_PARAM_INVALID
    assert_nothing_left(world)


def test_sync_kv_wait_time_that_is_not_all_digits_is_param_invalid_in_v1_too(world: SimWorld) -> None:
    with pytest.raises(LLMException) as caught:
        LLMDataDist(LLMRole.DECODER, 1).init({"ge.exec.deviceId": "0", "llm.SyncKvCacheWaitTime": "-1"})
    assert caught.value.status_code is S.LLM_PARAM_INVALID


def test_sync_kv_wait_time_of_zero_passes_the_digits_check(world: SimWorld) -> None:
    v2(1, LLMRole.DECODER, **{"llm.SyncKvCacheWaitTime": "0"})
    node = world.node(1)
    assert node is not None
    assert node.settings.sync_kv_timeout_ms == 0
