"""The v1 package's own ``handle_llm_status``, ``raise_if_false`` and ``raise_if_true`` raise its own
``LLMException`` with its own codes (GE ``api/python/llm_datadist_v1/status.py:125-144``), not the v2
package's, though both are made by the same factories."""

from __future__ import annotations

import pytest

from datadist_sim.llm_datadist import status as v2_status
from datadist_sim.llm_datadist_v1 import status as v1_status

V1Code = v1_status.LLMStatusCode


def test_v1_handle_llm_status_raises_the_v1_class_with_the_real_message_form() -> None:
    v1_status.handle_llm_status(0, "[pull_cache]", "x")
    v1_status.handle_llm_status(V1Code.LLM_SUCCESS, "[pull_cache]", "x")  # a v1 member is read by name
    with pytest.raises(v1_status.LLMException) as info:
        v1_status.handle_llm_status(1343270914, "[pull_cache]", "cache_key = K")
    assert not isinstance(info.value, v2_status.LLMException)
    assert info.value.status_code is V1Code.LLM_KV_CACHE_NOT_EXIST
    assert str(info.value) == (
        "[pull_cache] failed, error code is LLMStatusCode.LLM_KV_CACHE_NOT_EXIST, cache_key = K."
    )


def test_v1_raise_if_helpers_raise_the_v1_class_defaulting_to_the_v1_param_invalid() -> None:
    v1_status.raise_if_false(True, "never")
    v1_status.raise_if_true(False, "never")
    with pytest.raises(v1_status.LLMException, match="bad 3") as info:
        v1_status.raise_if_false(False, "bad {}", 3)
    assert not isinstance(info.value, v2_status.LLMException)
    assert info.value.status_code is V1Code.LLM_PARAM_INVALID
    with pytest.raises(v1_status.LLMException) as info:
        v1_status.raise_if_true(True, "x {n}", n=1, status_code=V1Code.LLM_FAILED)
    assert str(info.value) == "x 1"
    assert info.value.status_code is V1Code.LLM_FAILED


def test_v2_helpers_still_raise_the_v2_class() -> None:
    with pytest.raises(v2_status.LLMException) as info:
        v2_status.raise_if_false(False, "bad")
    assert not isinstance(info.value, v1_status.LLMException)
    assert info.value.status_code is v2_status.LLMStatusCode.LLM_PARAM_INVALID
