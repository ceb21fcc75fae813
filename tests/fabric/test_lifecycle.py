"""init / finalize / mode selection / manager properties (reference §5.1-5.3, §5.8)."""

from __future__ import annotations

import pytest

from datadist_sim._world.current import activate
from datadist_sim._world.world import SimConfig, SimWorld
from datadist_sim.llm_datadist.configs import LLMRole
from datadist_sim.llm_datadist.status import LLMException, LLMStatusCode
from datadist_sim.llm_datadist.v2.llm_datadist import LLMDataDist

from .conftest import decoder, options, prompt

S = LLMStatusCode


def test_constructor_rejects_non_role_with_type_error() -> None:
    with pytest.raises(TypeError, match="role"):
        LLMDataDist(1, 0)  # type: ignore[arg-type]


def test_constructor_rejects_negative_cluster_id_with_value_error() -> None:
    with pytest.raises(ValueError, match="cluster_id"):
        LLMDataDist(LLMRole.PROMPT, -1)


def test_methods_before_init_raise_plain_runtime_error(world: SimWorld) -> None:
    dd = LLMDataDist(LLMRole.DECODER, 1)
    for call in (
        lambda: dd.link_clusters([]),
        lambda: dd.unlink_clusters([]),
        lambda: dd.check_link_status(0),
        lambda: dd.switch_role(LLMRole.PROMPT),
        lambda: dd.kv_cache_manager,
        lambda: dd.cache_manager,
        lambda: dd.link("c", {0: 0, 1: 1}, "{}"),
        lambda: dd.unlink(1),
        lambda: dd.query_register_mem_status(1),
    ):
        with pytest.raises(RuntimeError, match="llm datadist is not initialized") as info:
            call()
        assert not isinstance(info.value, LLMException)


def test_init_without_cache_manager_option_selects_kv_cache_manager_mode(world: SimWorld) -> None:
    dd = decoder(1)
    assert dd.kv_cache_manager.is_initialized()
    with pytest.raises(LLMException) as info:
        _ = dd.cache_manager
    assert info.value.status_code is S.LLM_PARAM_INVALID


def test_init_with_enable_cache_manager_selects_cache_manager_mode(world: SimWorld) -> None:
    dd = decoder(1, v2=True)
    assert dd.cache_manager is not None
    with pytest.raises(LLMException) as info:
        _ = dd.kv_cache_manager
    assert info.value.status_code is S.LLM_PARAM_INVALID


def test_local_comm_res_turns_cache_manager_mode_on_by_default(world: SimWorld) -> None:
    dd = LLMDataDist(LLMRole.DECODER, 1)
    dd.init({"ge.exec.deviceId": "0", "llm.LocalCommRes": ""})
    assert dd.cache_manager._enable_remote_cache_accessible


def test_local_comm_res_with_cache_manager_explicitly_off_is_param_invalid(world: SimWorld) -> None:
    dd = LLMDataDist(LLMRole.DECODER, 1)
    with pytest.raises(LLMException) as info:
        dd.init({"llm.LocalCommRes": "", "llm.EnableCacheManager": "0"})
    assert info.value.status_code is S.LLM_PARAM_INVALID
    assert world.node(1) is None


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        ({}, "EnableCacheManager"),
        ({"llm.EnableCacheManager": "1", "llm.EnableRemoteCacheAccessible": "0"}, "RemoteCacheAccessible"),
        ({"llm.EnableCacheManager": "1"}, "listenIpInfo"),
    ],
)
def test_transfer_backend_requirements_raise_param_invalid(
    world: SimWorld, extra: dict[str, str], fragment: str
) -> None:
    dd = LLMDataDist(LLMRole.PROMPT, 1)
    with pytest.raises(LLMException, match=fragment) as info:
        dd.init({"llm.TransferBackend": "hixl", **extra})
    assert info.value.status_code is S.LLM_PARAM_INVALID


def test_options_must_be_a_dict(world: SimWorld) -> None:
    with pytest.raises(TypeError, match="options"):
        LLMDataDist(LLMRole.PROMPT, 1).init([("a", "b")])  # type: ignore[arg-type]


@pytest.mark.parametrize(("value", "error"), [(5, TypeError), ("1,2", LLMException), ("12a", LLMException)])
def test_flow_graph_mem_max_size_is_checked(world: SimWorld, value: object, error: type) -> None:
    with pytest.raises(error):
        LLMDataDist(LLMRole.DECODER, 1).init({"ge.exec.deviceId": "0", "ge.flowGraphMemMaxSize": value})  # type: ignore[dict-item]


def test_v1_prompt_without_listen_ip_info_is_param_invalid(world: SimWorld) -> None:
    with pytest.raises(LLMException, match="listenIp") as info:
        LLMDataDist(LLMRole.PROMPT, 1).init({"ge.exec.deviceId": "0"})
    assert info.value.status_code is S.LLM_PARAM_INVALID


def test_v1_listen_entries_must_match_device_count(world: SimWorld) -> None:
    with pytest.raises(LLMException, match="device num"):
        LLMDataDist(LLMRole.PROMPT, 1).init({"ge.exec.deviceId": "0;1", "llm.listenIpInfo": "1.1.1.1:1"})


def test_v1_without_device_id_fails_with_key_error_as_the_real_code_path(world: SimWorld) -> None:
    with pytest.raises(KeyError):
        LLMDataDist(LLMRole.DECODER, 1).init({})


def test_v2_listen_ip_info_without_port_is_param_invalid(world: SimWorld) -> None:
    with pytest.raises(LLMException) as info:
        LLMDataDist(LLMRole.PROMPT, 1).init(options(v2=True, listen="10.0.0.1"))
    assert info.value.status_code is S.LLM_PARAM_INVALID


def test_init_twice_is_silent_and_keeps_one_instance(world: SimWorld) -> None:
    dd = decoder(1)
    dd.init({"anything": "ignored"})
    assert [n.cluster_id for n in world.nodes] == [1]


def test_one_instance_per_process_rule_is_llm_failed_when_enforced() -> None:
    w = SimWorld(config=SimConfig(one_instance_per_process=True))
    with activate(w):
        first = decoder(1)
        with pytest.raises(LLMException, match="Cannot init multiple LLMDataDists") as info:
            decoder(2)
        assert info.value.status_code is S.LLM_FAILED
        first.finalize()
        decoder(2).finalize()


def test_prompt_and_decoder_live_side_by_side_by_default(world: SimWorld) -> None:
    prompt(0)
    decoder(1)
    assert sorted(n.cluster_id for n in world.nodes) == [0, 1]


def test_finalize_closes_listener_marks_manager_uninitialised_and_is_idempotent(world: SimWorld) -> None:
    dd = prompt(0)
    kvm = dd.kv_cache_manager
    assert world.listener_at(("192.168.1.1", 26000)) is not None
    dd.finalize()
    dd.finalize()
    assert not kvm.is_initialized()
    assert world.listener_at(("192.168.1.1", 26000)) is None
    with pytest.raises(RuntimeError):
        _ = dd.kv_cache_manager


def test_listen_endpoint_in_use_fails_init_and_leaves_no_instance(world: SimWorld) -> None:
    prompt(0)
    with pytest.raises(LLMException) as info:
        prompt(1)
    assert info.value.status_code is S.LLM_FAILED
    assert world.node(1) is None


def test_a_finalized_cluster_id_can_be_initialised_again(world: SimWorld) -> None:
    prompt(0).finalize()
    assert prompt(0).cluster_id == 0


# What hixl's tests/python/test_llm_datadist_coverage.py (at 8bb16aa2) states of init and exit.


def test_the_exit_handler_finalizes_the_live_instance(world: SimWorld) -> None:
    from datadist_sim.llm_datadist.v2.llm_datadist import _shutdown_handler

    dd = prompt(1, v2=True, **{"llm.MemPoolConfig": '{"memory_size": 1048576}'})
    manager = dd.cache_manager
    _shutdown_handler()
    assert LLMDataDist.llm_engine_instance is None
    assert not world.nodes
    with pytest.raises(LLMException) as info:
        manager.allocate_cache(None)  # type: ignore[arg-type]
    assert info.value.status_code is S.LLM_ENGINE_FINALIZED
    _shutdown_handler()  # nothing left to finalize: harmless


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ({"llm.listenIpInfo": "127.0.0.1:26000"}, "llm.EnableCacheManager"),
        ({"llm.EnableCacheManager": "1", "llm.EnableRemoteCacheAccessible": "1"}, "llm.listenIpInfo"),
        (
            {
                "llm.EnableCacheManager": "1",
                "llm.EnableRemoteCacheAccessible": "0",
                "llm.listenIpInfo": "127.0.0.1:1",
            },
            "llm.EnableRemoteCacheAccessible",
        ),
    ],
)
def test_the_hixl_backend_names_the_option_it_needs(world: SimWorld, extra: dict, named: str) -> None:
    dd = LLMDataDist(LLMRole.PROMPT, 15)
    with pytest.raises(LLMException, match=f"llm.TransferBackend is not supported when {named}"):
        dd.init({"ge.exec.deviceId": "0", "llm.TransferBackend": "hixl", **extra})
    assert not world.nodes
