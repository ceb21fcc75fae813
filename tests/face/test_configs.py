"""LLMRole and LlmConfig against the real ``llm_datadist.configs`` (reference section 3)."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Tuple, Type

import pytest
from hypothesis import given
from hypothesis import strategies as st

from datadist_sim.llm_datadist.configs import LLMConfig, LlmConfig, LLMRole
from datadist_sim.llm_datadist.status import LLMException, LLMStatusCode

PARAM_INVALID = LLMStatusCode.LLM_PARAM_INVALID
INT32_MAX = 2**31 - 1
UINT32_MAX = 2**32 - 1


def _set(name: str, value: Any) -> LlmConfig:
    cfg = LlmConfig()
    setattr(cfg, name, value)
    return cfg


# -- LLMRole ---------------------------------------------------------------------------------------------


def test_llm_role_values_and_str() -> None:
    assert [(m.name, int(m)) for m in LLMRole] == [("PROMPT", 1), ("DECODER", 2), ("MIX", 3)]
    assert LLMRole.DECODER == 2  # IntEnum: compares with plain ints
    assert str(LLMRole.PROMPT) == "LLMRole.PROMPT"
    assert f"{LLMRole.MIX}" == "LLMRole.MIX"


def test_llmconfig_is_an_alias() -> None:
    assert LLMConfig is LlmConfig


# -- setters: accepted values ----------------------------------------------------------------------------

ACCEPTED: List[Tuple[str, Any]] = [
    ("ge_options", {"ge.flowGraphMemMaxSize": "1024"}),
    ("ge_options", {}),
    ("device_id", 0),
    ("device_id", INT32_MAX),
    ("device_id", [0, 1]),
    ("device_id", (3,)),
    ("sync_kv_timeout", 1),
    ("sync_kv_timeout", INT32_MAX),
    ("sync_kv_timeout", "1000"),
    ("deploy_res_path", "/tmp/res"),
    ("deploy_res_path", None),
    ("listen_ip_info", "127.0.0.1:26000"),
    ("listen_ip_info", None),
    ("buf_pool_cfg", '{"buf_cfg": []}'),
    ("mem_pool_cfg", '{"memory_size": 1024}'),
    ("host_mem_pool_cfg", '{"memory_size": 1024}'),
    ("enable_cache_manager", True),
    ("enable_cache_manager", False),
    ("enable_cache_manager", None),
    ("enable_remote_cache_accessible", True),
    ("enable_switch_role", True),
    ("link_total_time", 0),
    ("link_total_time", UINT32_MAX),
    ("link_retry_count", 1),
    ("link_retry_count", 100),
    ("rdma_traffic_class", 0),
    ("rdma_traffic_class", UINT32_MAX),
    ("rdma_service_level", 4),
    ("local_comm_res", ""),
    ("local_comm_res", "{}"),
    ("transfer_backend", "hixl"),
    ("global_resource_config", "{}"),
    ("output_max_size", 0),
    ("output_max_size", None),
    ("mem_utilization", 0.0),
    ("mem_utilization", 1.0),
    ("mem_utilization", 0.5),
]


@pytest.mark.parametrize(("name", "value"), ACCEPTED)
def test_setter_accepts_and_getter_returns_it(name: str, value: Any) -> None:
    cfg = _set(name, value)
    got = getattr(cfg, name)
    if value is None and name in ("enable_cache_manager",):
        assert got is False  # unset -> getter default
    else:
        assert got == value


# -- setters: rejected values ----------------------------------------------------------------------------

REJECTED: List[Tuple[str, Any, Type[BaseException]]] = [
    ("ge_options", "x=y", TypeError),
    ("ge_options", {"k": 1}, TypeError),
    ("ge_options", {1: "v"}, TypeError),
    ("ge_options", None, AttributeError),  # real: check_dict(None) -> None.items()
    ("device_id", "0", TypeError),
    ("device_id", None, TypeError),
    ("device_id", 1.0, TypeError),
    ("device_id", [0, "1"], TypeError),
    ("device_id", INT32_MAX + 1, ValueError),
    ("device_id", [0, INT32_MAX + 1], ValueError),
    ("sync_kv_timeout", None, TypeError),
    ("sync_kv_timeout", 1.5, TypeError),
    ("sync_kv_timeout", INT32_MAX + 1, ValueError),
    ("sync_kv_timeout", str(INT32_MAX + 1), ValueError),
    ("deploy_res_path", 1, TypeError),
    ("listen_ip_info", 26000, TypeError),
    ("buf_pool_cfg", {}, TypeError),
    ("mem_pool_cfg", 1, TypeError),
    ("host_mem_pool_cfg", b"x", TypeError),
    ("enable_cache_manager", 1, TypeError),
    ("enable_cache_manager", "1", TypeError),
    ("enable_remote_cache_accessible", 0, TypeError),
    ("enable_switch_role", 1, TypeError),
    ("link_total_time", "10", TypeError),
    ("link_total_time", None, TypeError),
    ("link_retry_count", 1.0, TypeError),
    ("rdma_traffic_class", None, TypeError),
    ("rdma_traffic_class", -1, ValueError),
    ("rdma_traffic_class", UINT32_MAX + 1, ValueError),
    ("rdma_service_level", "4", TypeError),
    ("rdma_service_level", UINT32_MAX + 1, ValueError),
    ("local_comm_res", 0, TypeError),
    ("transfer_backend", 1, TypeError),
    ("global_resource_config", {}, TypeError),
    ("cluster_info", {}, TypeError),
    ("cluster_info", None, TypeError),  # real: json.loads(None)
    ("cluster_info", "not json", ValueError),
    ("output_max_size", "1", TypeError),
    ("mem_utilization", 1, TypeError),  # an int is not a float
    ("mem_utilization", None, TypeError),
    ("mem_utilization", "0.9", TypeError),
]


@pytest.mark.parametrize(("name", "value", "error"), REJECTED)
def test_setter_rejects_with_the_real_error_type(name: str, value: Any, error: Type[BaseException]) -> None:
    cfg = LlmConfig()
    before = getattr(cfg, name)
    with pytest.raises(error) as info:
        setattr(cfg, name, value)
    assert not isinstance(info.value, LLMException)
    assert getattr(cfg, name) == before  # a rejected value is not stored


PARAM_INVALID_CASES: List[Tuple[str, Any]] = [
    ("device_id", -1),
    ("device_id", [0, -1]),
    ("device_id", [INT32_MAX + 1, -1]),  # all sign checks run before any range check
    ("sync_kv_timeout", 0),
    ("sync_kv_timeout", -5),
    ("sync_kv_timeout", "abc"),
    ("sync_kv_timeout", "-5"),
    ("sync_kv_timeout", ""),
    ("sync_kv_timeout", "0"),
    ("link_total_time", -1),
    ("link_total_time", UINT32_MAX + 1),
    ("link_retry_count", 0),
    ("link_retry_count", 101),
    ("mem_utilization", -0.01),
    ("mem_utilization", 1.01),
    ("mem_utilization", float("nan")),
]


@pytest.mark.parametrize(("name", "value"), PARAM_INVALID_CASES)
def test_setter_semantic_errors_are_param_invalid(name: str, value: Any) -> None:
    with pytest.raises(LLMException) as info:
        _set(name, value)
    assert info.value.status_code is PARAM_INVALID


def test_none_resets_string_and_bool_options() -> None:
    cfg = LlmConfig()
    cfg.local_comm_res = "x"
    cfg.local_comm_res = None
    assert cfg.local_comm_res == ""
    assert "llm.LocalCommRes" not in cfg.generate_options()


@given(st.integers(min_value=0, max_value=INT32_MAX))
def test_device_id_int32_boundary(dev: int) -> None:
    assert _set("device_id", dev).generate_options()["ge.exec.deviceId"] == str(dev)


@given(st.integers(min_value=INT32_MAX + 1, max_value=2**70))
def test_device_id_beyond_int32_is_value_error(dev: int) -> None:
    with pytest.raises(ValueError, match="is not a int32 value"):
        _set("device_id", dev)


def test_type_error_message_has_the_real_form() -> None:
    with pytest.raises(
        TypeError, match=r"^enable_cache_manager only support \['bool'\], but got <class 'int'>\.$"
    ):
        _set("enable_cache_manager", 1)


# -- getter defaults -------------------------------------------------------------------------------------


def test_getter_defaults() -> None:
    cfg = LlmConfig()
    expected: Dict[str, Any] = {
        "ge_options": {},
        "device_id": None,
        "sync_kv_timeout": None,
        "deploy_res_path": "",
        "listen_ip_info": "",
        "buf_pool_cfg": "",
        "mem_pool_cfg": "",
        "host_mem_pool_cfg": "",
        "enable_cache_manager": False,
        "enable_remote_cache_accessible": False,
        "enable_switch_role": False,
        "link_total_time": 0,
        "link_retry_count": 1,
        "rdma_traffic_class": None,
        "rdma_service_level": None,
        "local_comm_res": "",
        "transfer_backend": "",
        "global_resource_config": "",
        "cluster_info": "",
        "output_max_size": None,
        "mem_utilization": 0.95,
        "options": {},
    }
    assert {name: getattr(cfg, name) for name in expected} == expected


# -- generate_options ------------------------------------------------------------------------------------


def test_empty_config_emits_only_memory_utilization() -> None:
    assert LlmConfig().generate_options() == {"llm.MemoryUtilization": "0.95"}


def test_reference_example() -> None:
    cfg = LLMConfig()
    cfg.device_id = 0
    cfg.sync_kv_timeout = 1000
    cfg.enable_cache_manager = True
    opts = cfg.generate_options()
    assert opts == {
        "ge.exec.deviceId": "0",
        "ge.session_device_id": "0",
        "llm.SyncKvCacheWaitTime": "1000",
        "llm.EnableCacheManager": "1",
        "llm.MemoryUtilization": "0.95",
    }
    assert list(opts) == [
        "ge.exec.deviceId",
        "ge.session_device_id",
        "llm.SyncKvCacheWaitTime",
        "llm.EnableCacheManager",
        "llm.MemoryUtilization",
    ]


def test_same_dict_object_every_call_and_gen_options_alias() -> None:
    cfg = LlmConfig()
    first = cfg.generate_options()
    assert cfg.gen_options() is first
    assert cfg.generate_options() is first
    assert cfg.options is first


def test_keys_are_never_removed() -> None:
    cfg = LlmConfig()
    cfg.listen_ip_info = "1.2.3.4:26000"
    cfg.enable_switch_role = True
    cfg.local_comm_res = ""
    opts = cfg.generate_options()
    cfg.listen_ip_info = ""
    cfg.enable_switch_role = False
    cfg.local_comm_res = None
    again = cfg.generate_options()
    assert again is opts
    assert again["llm.listenIpInfo"] == "1.2.3.4:26000"
    assert again["llm.EnableSwitchRole"] == "1"
    assert again["llm.LocalCommRes"] == ""


def test_values_are_updated_in_place() -> None:
    cfg = LlmConfig()
    opts = cfg.generate_options()
    cfg.mem_utilization = 0.5
    cfg.generate_options()
    assert opts["llm.MemoryUtilization"] == "0.5"


def test_caller_mutations_of_the_dict_persist() -> None:
    cfg = LlmConfig()
    cfg.generate_options()["llm.Extra"] = "1"
    assert cfg.generate_options()["llm.Extra"] == "1"


def test_device_id_list_emits_joined_ids_and_first_as_session_device() -> None:
    opts = _set("device_id", [2, 3]).generate_options()
    assert opts["ge.exec.deviceId"] == "2;3"
    assert opts["ge.session_device_id"] == "2"
    assert list(opts)[:2] == ["ge.session_device_id", "ge.exec.deviceId"]


def test_empty_device_list_fails_only_at_generation() -> None:
    cfg = _set("device_id", [])
    with pytest.raises(IndexError):
        cfg.generate_options()


def test_ge_options_are_merged_first() -> None:
    cfg = LlmConfig()
    cfg.ge_options = {"ge.exec.deviceId": "9", "ge.flowGraphMemMaxSize": "1024"}
    cfg.device_id = 1
    opts = cfg.generate_options()
    assert next(iter(opts)) == "ge.exec.deviceId"
    assert opts["ge.exec.deviceId"] == "1"  # the property wins over ge_options
    assert opts["ge.flowGraphMemMaxSize"] == "1024"


# (property, value, option key, emitted text)
EMIT_WHEN_EVER_SET: List[Tuple[str, Any, str, str]] = [
    ("enable_cache_manager", False, "llm.EnableCacheManager", "0"),
    ("enable_remote_cache_accessible", False, "llm.EnableRemoteCacheAccessible", "0"),
    ("link_total_time", 0, "llm.LinkTotalTime", "0"),
    ("link_retry_count", 1, "llm.LinkRetryCount", "1"),
    ("rdma_traffic_class", 0, "llm.RdmaTrafficClass", "0"),
    ("rdma_service_level", 0, "llm.RdmaServiceLevel", "0"),
    ("local_comm_res", "", "llm.LocalCommRes", ""),
    ("transfer_backend", "", "llm.TransferBackend", ""),
    ("global_resource_config", "", "llm.GlobalResourceConfig", ""),
    ("output_max_size", 0, "llm.OutputMaxSize", "0"),
    ("sync_kv_timeout", "0001", "llm.SyncKvCacheWaitTime", "0001"),
]


@pytest.mark.parametrize(("name", "value", "key", "text"), EMIT_WHEN_EVER_SET)
def test_emitted_when_ever_set_even_to_a_default(name: str, value: Any, key: str, text: str) -> None:
    assert key not in LlmConfig().generate_options()
    assert _set(name, value).generate_options()[key] == text


EMIT_WHEN_TRUTHY: List[Tuple[str, Any, str]] = [
    ("deploy_res_path", "/res", "llm.deployResPath"),
    ("listen_ip_info", "1.1.1.1:1", "llm.listenIpInfo"),
    ("buf_pool_cfg", "{}", "llm.BufPoolCfg"),
    ("mem_pool_cfg", "{}", "llm.MemPoolConfig"),
    ("host_mem_pool_cfg", "{}", "llm.HostMemPoolConfig"),
]


@pytest.mark.parametrize(("name", "value", "key"), EMIT_WHEN_TRUTHY)
def test_string_options_emitted_only_when_non_empty(name: str, value: str, key: str) -> None:
    assert key not in _set(name, "").generate_options()
    assert _set(name, value).generate_options()[key] == value


def test_enable_switch_role_emitted_only_when_true() -> None:
    assert "llm.EnableSwitchRole" not in _set("enable_switch_role", False).generate_options()
    assert _set("enable_switch_role", True).generate_options()["llm.EnableSwitchRole"] == "1"


def test_bool_flags_emit_one_or_zero() -> None:
    assert _set("enable_cache_manager", True).generate_options()["llm.EnableCacheManager"] == "1"
    assert (
        _set("enable_remote_cache_accessible", True).generate_options()["llm.EnableRemoteCacheAccessible"]
        == "1"
    )


def test_cluster_info_converts_listen_ips_to_engine_ints() -> None:
    cfg = LlmConfig()
    cfg.cluster_info = json.dumps({"cluster_id": 1, "listen_ip_info": [{"ip": "1.0.0.0", "port": 26000}]})
    stored = json.loads(cfg.cluster_info)
    assert stored["listen_ip_info"] == [{"ip": 1, "port": 26000}]
    assert cfg.generate_options()["llm.ClusterInfo"] == cfg.cluster_info


def test_cluster_info_with_bad_ip_is_runtime_error() -> None:
    with pytest.raises(RuntimeError, match="Can not parse ip str:nope"):
        _set("cluster_info", json.dumps({"listen_ip_info": [{"ip": "nope"}]}))


def test_full_config_key_order_matches_real_builder() -> None:
    cfg = LlmConfig()
    cfg.ge_options = {"ge.a": "1"}
    cfg.device_id = 0
    cfg.sync_kv_timeout = 5
    cfg.deploy_res_path = "p"
    cfg.buf_pool_cfg = "b"
    cfg.mem_pool_cfg = "m"
    cfg.host_mem_pool_cfg = "h"
    cfg.enable_cache_manager = True
    cfg.enable_remote_cache_accessible = True
    cfg.listen_ip_info = "1.1.1.1:1"
    cfg.link_total_time = 2
    cfg.link_retry_count = 3
    cfg.rdma_traffic_class = 132
    cfg.rdma_service_level = 4
    cfg.local_comm_res = "r"
    cfg.transfer_backend = "hixl"
    cfg.global_resource_config = "g"
    cfg.cluster_info = "{}"
    cfg.output_max_size = 7
    cfg.enable_switch_role = True
    assert list(cfg.generate_options()) == [
        "ge.a",
        "ge.exec.deviceId",
        "ge.session_device_id",
        "llm.SyncKvCacheWaitTime",
        "llm.deployResPath",
        "llm.BufPoolCfg",
        "llm.MemPoolConfig",
        "llm.HostMemPoolConfig",
        "llm.EnableCacheManager",
        "llm.EnableRemoteCacheAccessible",
        "llm.listenIpInfo",
        "llm.LinkTotalTime",
        "llm.LinkRetryCount",
        "llm.RdmaTrafficClass",
        "llm.RdmaServiceLevel",
        "llm.LocalCommRes",
        "llm.TransferBackend",
        "llm.GlobalResourceConfig",
        "llm.ClusterInfo",
        "llm.OutputMaxSize",
        "llm.EnableSwitchRole",
        "llm.MemoryUtilization",
    ]
