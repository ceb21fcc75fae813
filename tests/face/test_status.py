"""LLMStatusCode values, LLMException, Status, code_2_status and the status table (reference §2)."""

from __future__ import annotations

from enum import IntEnum

import pytest

import datadist_sim
from datadist_sim.llm_datadist.status import (
    LLMException,
    LLMStatusCode,
    Status,
    code_2_status,
    handle_llm_status,
    raise_if_false,
    raise_if_true,
)

REAL_VALUES = {
    "LLM_SUCCESS": 0,
    "LLM_FAILED": 4294967295,
    "LLM_PARAM_INVALID": 1343270917,
    "LLM_WAIT_PROCESS_TIMEOUT": 1343270913,
    "LLM_KV_CACHE_NOT_EXIST": 1343270914,
    "LLM_REPEAT_REQUEST": 1343270915,
    "LLM_REQUEST_ALREADY_COMPLETED": 1343270916,
    "LLM_ENGINE_FINALIZED": 1343270918,
    "LLM_NOT_YET_LINK": 1343270919,
    "LLM_ALREADY_LINK": 1343270920,
    "LLM_LINK_FAILED": 1343270921,
    "LLM_UNLINK_FAILED": 1343270922,
    "LLM_NOTIFY_PROMPT_UNLINK_FAILED": 1343270923,
    "LLM_CLUSTER_NUM_EXCEED_LIMIT": 1343270924,
    "LLM_PROCESSING_LINK": 1343270925,
    "LLM_DEVICE_OUT_OF_MEMORY": 1343270926,
    "LLM_PREFIX_ALREADY_EXIST": 1343270927,
    "LLM_PREFIX_NOT_EXIST": 1343270928,
    "LLM_SEQ_LENOVERLIMIT": 1343270929,
    "LLM_NO_FREE_BLOCK": 1343270930,
    "LLM_BLOCKS_OUT_OF_MEMORY": 1343270931,
    "LLM_EXIST_LINK": 1343270936,
    "LLM_FEATURE_NOT_ENABLED": 1343270937,
    "LLM_TIMEOUT": 1343270938,
    "LLM_LINK_BUSY": 1343270939,
    "LLM_OUT_OF_MEMORY": 1343270940,
    "LLM_DEVICE_MEM_ERROR": 507053,
    "LLM_SUSPECT_REMOTE_ERROR": 507057,
    "LLM_UNKNOWN_ERROR": -1,
}


def test_all_29_members_in_declaration_order_with_real_integers() -> None:
    assert issubclass(LLMStatusCode, IntEnum)
    assert [m.name for m in LLMStatusCode] == list(REAL_VALUES)
    for name, value in REAL_VALUES.items():
        assert LLMStatusCode[name] == value


def test_str_is_class_dot_name() -> None:
    assert str(LLMStatusCode.LLM_LINK_FAILED) == "LLMStatusCode.LLM_LINK_FAILED"
    assert f"{LLMStatusCode.LLM_TIMEOUT}" == "LLMStatusCode.LLM_TIMEOUT"


def test_exception_is_runtime_error_with_status_code_property() -> None:
    exc = LLMException("boom", status_code=LLMStatusCode.LLM_TIMEOUT)
    assert isinstance(exc, RuntimeError)
    assert exc.status_code is LLMStatusCode.LLM_TIMEOUT
    assert LLMException("x").status_code is LLMStatusCode.LLM_SUCCESS
    assert str(exc) == "boom"


def test_status_is_ok_only_for_success() -> None:
    assert Status(LLMStatusCode.LLM_SUCCESS).is_ok()
    assert not Status(LLMStatusCode.LLM_FAILED).is_ok()
    assert Status(LLMStatusCode.LLM_FAILED).status_code is LLMStatusCode.LLM_FAILED


def test_code_2_status_maps_unknown_integers_to_failed() -> None:
    assert code_2_status(1343270921) is LLMStatusCode.LLM_LINK_FAILED
    assert code_2_status(0x5010B014) is LLMStatusCode.LLM_FAILED, "C++-only LLM_CACHE_INCOMPATIBLE"
    assert code_2_status(-1) is LLMStatusCode.LLM_FAILED, "UNKNOWN_ERROR is never produced"


def test_handle_llm_status_raises_the_real_message_form() -> None:
    handle_llm_status(0, "[pull_cache]", "x")
    with pytest.raises(LLMException) as info:
        handle_llm_status(1343270914, "[pull_cache]", "cache_key = K")
    assert info.value.status_code is LLMStatusCode.LLM_KV_CACHE_NOT_EXIST
    assert str(info.value) == (
        "[pull_cache] failed, error code is LLMStatusCode.LLM_KV_CACHE_NOT_EXIST, cache_key = K."
    )


def test_raise_if_helpers_default_to_param_invalid() -> None:
    raise_if_false(True, "never")
    raise_if_true(False, "never")
    with pytest.raises(LLMException, match="bad 3") as info:
        raise_if_false(False, "bad {}", 3)
    assert info.value.status_code is LLMStatusCode.LLM_PARAM_INVALID
    with pytest.raises(LLMException) as info:
        raise_if_true(True, "x", status_code=LLMStatusCode.LLM_FAILED)
    assert info.value.status_code is LLMStatusCode.LLM_FAILED


def test_status_table_covers_every_code_with_meaning_retryable_and_remedy() -> None:
    assert set(datadist_sim.STATUS_TABLE) == set(LLMStatusCode)
    for code in LLMStatusCode:
        info = datadist_sim.status_info(code)
        assert info.code is code
        assert info.description
        assert info.remedy
        assert info.retryable in ("yes", "no", "n.a.")
    assert datadist_sim.status_info(507057).retryable == "no"
    assert datadist_sim.status_info("LLM_PROCESSING_LINK").is_retryable
    assert datadist_sim.status_info(LLMStatusCode.LLM_SUCCESS).retryable == "n.a."


def test_the_six_codes_missing_from_the_users_table_come_from_the_reference() -> None:
    missing = {
        "LLM_REQUEST_ALREADY_COMPLETED",
        "LLM_ENGINE_FINALIZED",
        "LLM_SEQ_LENOVERLIMIT",
        "LLM_NO_FREE_BLOCK",
        "LLM_BLOCKS_OUT_OF_MEMORY",
        "LLM_TIMEOUT",
    }
    from_reference = {i.name for i in datadist_sim.STATUS_TABLE.values() if "llm_datadist_api" in i.source}
    assert from_reference == missing


def test_retryable_codes_match_the_table() -> None:
    codes = datadist_sim.retryable_codes()
    assert LLMStatusCode.LLM_TIMEOUT in codes
    assert LLMStatusCode.LLM_FAILED not in codes
    assert LLMStatusCode.LLM_SUSPECT_REMOTE_ERROR not in codes
