"""The table of codes each operation can give per engine mode (``faults.engine_codes``): its shape, and
the vendor facts it records (docs/vendor_facts.md, "Codes each operation can give, per mode")."""

from __future__ import annotations

import pytest

from datadist_sim._status import LLMStatusCode as C
from datadist_sim.faults import engine_codes as ec
from datadist_sim.faults.checks import API_OPS


def test_the_table_has_a_row_for_every_traced_operation_in_every_mode() -> None:
    assert ec.OPS == API_OPS
    for op in API_OPS:
        for mode in ec.modes():
            row = ec.row(op, mode)
            assert row.args_only <= set(row.codes)
            assert row.source, (op, mode)
            assert row.timeout is None or row.timeout in row.codes, (op, mode)
            assert C.LLM_SUCCESS not in row.codes


def test_modes_are_named_as_reports_and_files_name_them() -> None:
    assert [m.value for m in ec.modes()] == ["v2", "hixl", "v2-kv", "v1", "hixl-engine"]
    assert ec.to_mode("hixl") is ec.EngineMode.HIXL
    assert ec.to_mode("hixl-engine") is ec.EngineMode.HIXL_ENGINE
    with pytest.raises(ValueError, match="modes: v2, hixl, v2-kv, v1, hixl-engine"):
        ec.to_mode("v3")


def test_mode_of_an_instance() -> None:
    assert ec.mode_of(cache_manager=True) is ec.EngineMode.V2
    assert ec.mode_of(cache_manager=True, hixl=True) is ec.EngineMode.HIXL
    assert ec.mode_of(cache_manager=False) is ec.EngineMode.V2_KV


def test_cache_manager_allocate_gives_only_what_cache_manager_cc_returns() -> None:
    # hixl cache_manager.cc:171-212: no pool, pool exhausted, bad keys; the table's ACL update -> FAILED.
    assert ec.codes_for("allocate_cache", "v2") == {
        C.LLM_FEATURE_NOT_ENABLED,
        C.LLM_OUT_OF_MEMORY,
        C.LLM_PARAM_INVALID,
        C.LLM_FAILED,
    }
    assert C.LLM_TIMEOUT not in ec.codes_for("allocate_cache", "v2")
    assert ec.timeout_code("allocate_cache", "v2") is None


def test_query_register_mem_status_fails_only_for_an_unknown_comm() -> None:
    # hixl comm_link_manager.cc:428-443.
    assert ec.fault_codes("query_register_mem_status", "v2") == (C.LLM_NOT_YET_LINK,)
    assert C.LLM_FAILED not in ec.codes_for("query_register_mem_status", "v2")


def test_cache_manager_mode_never_gives_the_v1_engines_codes() -> None:
    # LLM_WAIT_PROC_TIMEOUT and LLM_DEVICE_OUT_OF_MEMORY have no producer in hixl's engine (only a log
    # call, sync_flag.cc:24); GE's engine gives both (llm_flow_service.cc, udf cache_manager.cpp:68).
    for op in API_OPS:
        for mode in ("v2", "hixl"):
            assert C.LLM_WAIT_PROCESS_TIMEOUT not in ec.codes_for(op, mode), op
            assert C.LLM_DEVICE_OUT_OF_MEMORY not in ec.codes_for(op, mode), op
            assert C.LLM_LINK_BUSY not in ec.codes_for(op, mode), op
    assert C.LLM_DEVICE_OUT_OF_MEMORY in ec.codes_for("allocate_cache", "v1")
    assert C.LLM_WAIT_PROCESS_TIMEOUT in ec.codes_for("pull_cache", "v2-kv")


def test_a_timeout_gives_the_modes_own_code() -> None:
    assert ec.timeout_code("pull_cache", "v2") is C.LLM_TIMEOUT
    assert ec.timeout_code("pull_cache", "v1") is C.LLM_WAIT_PROCESS_TIMEOUT
    assert ec.timeout_code("link_clusters", "v2") is C.LLM_TIMEOUT
    assert ec.timeout_code("link_clusters", "v2-kv") is C.LLM_WAIT_PROCESS_TIMEOUT


def test_the_two_kv_cache_manager_modes_run_one_engine() -> None:
    for op in API_OPS:
        assert ec.row(op, "v1").codes == ec.row(op, "v2-kv").codes


def test_argument_codes_are_not_fault_codes() -> None:
    assert C.LLM_PARAM_INVALID in ec.codes_for("pull_cache", "v2")
    assert C.LLM_PARAM_INVALID not in ec.fault_codes("pull_cache", "v2")
    assert ec.fault_codes("pull_cache", "v2")[0] is C.LLM_TIMEOUT
    assert ec.fault_codes("check_link_status", "v2") == ()


def test_check_code_names_the_codes_an_operation_can_give() -> None:
    with pytest.raises(ValueError, match="allocate_cache cannot give LLM_TIMEOUT in any mode") as err:
        ec.check_code("allocate_cache", C.LLM_TIMEOUT)
    assert "LLM_FEATURE_NOT_ENABLED, LLM_FAILED, LLM_PARAM_INVALID (v2, hixl)" in str(err.value)
    ec.check_code("pull_cache", C.LLM_LINK_BUSY)  # v1 gives it
    wanted = "pull_cache cannot give LLM_LINK_BUSY in v2 mode; it gives LLM_TIMEOUT"
    with pytest.raises(ValueError, match=wanted):
        ec.check_code("pull_cache", C.LLM_LINK_BUSY, "v2")
    assert ec.modes_giving("pull_cache", C.LLM_LINK_BUSY) == (ec.EngineMode.V2_KV, ec.EngineMode.V1)


def test_what_explore_and_the_strategies_draw_is_the_tables_per_mode_in_order() -> None:
    """explore (``schedule.codes_for``) and the strategies (``_codes``) read ``fault_labels``: a correct
    client's codes, argument-only codes left out, each once, the table's first code first."""
    from datadist_sim import strategies
    from datadist_sim.explore import schedule

    assert ec.fault_labels("allocate_cache", ["v2"]) == ("LLM_OUT_OF_MEMORY", "LLM_FAILED")
    assert ec.fault_labels("allocate_cache", ["v2", "v1"]) == (
        "LLM_OUT_OF_MEMORY",
        "LLM_FAILED",
        "LLM_DEVICE_OUT_OF_MEMORY",
        "LLM_WAIT_PROCESS_TIMEOUT",
    )
    assert schedule.codes_for("allocate_cache", ec.EngineMode.V2) == ec.fault_labels("allocate_cache", ["v2"])
    assert strategies._codes("unlink_clusters", ["hixl"]) == ["LLM_FAILED"]
    assert not ec.can_time_out("allocate_cache", ["v2"])
    assert ec.can_time_out("allocate_cache", ["v2", "v1"])
    assert ec.can_time_out("allocate_cache")
