"""Helpers of ``llm_datadist.v2.llm_utils`` against the real module."""

from __future__ import annotations

from typing import Any, Type

import pytest
from hypothesis import given
from hypothesis import strategies as st

from datadist_sim.llm_datadist.data_type import DataType
from datadist_sim.llm_datadist.status import LLMException, LLMStatusCode
from datadist_sim.llm_datadist.v2 import llm_utils
from datadist_sim.llm_datadist.v2.llm_types import (
    BlocksCacheKey,
    CacheDesc,
    CacheKey,
    CacheKeyByIdAndIndex,
    MemInfo,
    Memtype,
    Placement,
)

U64 = 2**64 - 1


def _param_invalid(fn: Any, *args: Any) -> str:
    with pytest.raises(LLMException) as info:
        fn(*args)
    assert info.value.status_code is LLMStatusCode.LLM_PARAM_INVALID
    return str(info.value)


@pytest.mark.parametrize(("value", "valid"), [(0, True), (U64 - 1, True), (U64, False), (-1, False)])
def test_valid_ids(value: int, valid: bool) -> None:
    assert llm_utils.is_valid_id(value) is valid
    assert llm_utils.is_invalid_id(value) is not valid


def test_check_cache_key_needs_exactly_one_of_req_and_prefix() -> None:
    llm_utils.check_cache_key(CacheKey(1, 2))
    llm_utils.check_cache_key(CacheKey(1, U64, 0, 5))
    neither = _param_invalid(llm_utils.check_cache_key, CacheKey(1, U64))
    assert neither.startswith("one of req id and prefix id should contain valid value")
    both = _param_invalid(llm_utils.check_cache_key, CacheKey(1, 2, 0, 3))
    assert both.startswith("only one of req id and prefix id should contain valid value")


def test_layer_range_to_tensor_indices() -> None:
    assert llm_utils.layer_range_to_tensor_indices(range(1, 3), range(0, 1)) == ([2, 3, 4, 5], [0, 1])
    assert llm_utils.layer_range_to_tensor_indices(None, None) == ([], [])
    assert llm_utils.layer_range_to_tensor_indices(range(2, 4), None, 3) == ([6, 7, 8, 9, 10, 11], [])
    assert llm_utils.layer_range_to_tensor_indices(range(3, 1), range(0, 0)) == ([], [])


def test_layer_range_to_tensor_indices_errors() -> None:
    with pytest.raises(TypeError):
        llm_utils.layer_range_to_tensor_indices([0, 1], None)  # type: ignore[arg-type]
    step = _param_invalid(llm_utils.layer_range_to_tensor_indices, None, range(0, 4, 2))
    assert step == "param check failed, dst_layer_range step must be 1."
    negative = _param_invalid(llm_utils.layer_range_to_tensor_indices, range(-1, 2), None)
    assert negative == "src_layer_range is invalid, the start value:-1 is < 0"
    with pytest.raises(ValueError, match="not a uint32 value"):
        llm_utils.layer_range_to_tensor_indices(range(2**32 - 1, 2**32 + 1), None)


@given(st.integers(0, 1000), st.integers(1, 50), st.integers(1, 4))
def test_layer_indices_cover_each_layer_tensors(start: int, length: int, per_layer: int) -> None:
    src, _ = llm_utils.layer_range_to_tensor_indices(range(start, start + length), None, per_layer)
    assert src == list(range(start * per_layer, (start + length) * per_layer))


def test_parse_listen_ip_info() -> None:
    assert llm_utils.parse_listen_ip_info("10.0.0.1:26000") == ("10.0.0.1", 26000)
    assert _param_invalid(llm_utils.parse_listen_ip_info, "10.0.0.1") == (
        'llm.listenIpInfo "10.0.0.1" is invalid, format should be "ip:port"'
    )
    _param_invalid(llm_utils.parse_listen_ip_info, "a:1:2")
    with pytest.raises(ValueError, match="invalid literal"):
        llm_utils.parse_listen_ip_info("10.0.0.1:port")
    with pytest.raises(TypeError):
        llm_utils.parse_listen_ip_info(1)  # type: ignore[arg-type]


def test_calc_tensor_size() -> None:
    assert llm_utils.calc_tensor_size([2, 3], DataType.DT_FLOAT) == 24
    assert llm_utils.calc_tensor_size([], DataType.DT_INT64) == 8
    _param_invalid(llm_utils.calc_tensor_size, [-1, 3], DataType.DT_FLOAT)


@pytest.mark.parametrize(("value", "error"), [((1, -1), ValueError), ((1, "2"), TypeError), ({1}, TypeError)])
def test_check_block_indices(value: Any, error: Type[BaseException]) -> None:
    llm_utils.check_block_indices("b", None)
    llm_utils.check_block_indices("b", [0, U64])
    with pytest.raises(error):
        llm_utils.check_block_indices("b", value)


def test_clone_cache_desc_copies_the_shape_but_not_the_blocks_flag() -> None:
    desc = CacheDesc(2, [4, 8], DataType.DT_BF16, Placement.HOST, 1, 0, "ND")
    desc._is_blocks = True
    clone = llm_utils.clone_cache_desc(desc)
    assert clone.shape == desc.shape
    assert clone.shape is not desc.shape
    assert repr(clone) == repr(desc)
    assert clone._is_blocks is False


def test_pack_helpers_give_the_engine_field_tuples() -> None:
    assert llm_utils.pack_cache_key(CacheKey(1, 2, 3, 4)) == (1, -1, 0, 2, 4, 3, False)
    assert llm_utils.pack_cache_key_by_id(CacheKeyByIdAndIndex(1, 5, 6)) == (1, 5, 6, U64, U64, 0, False)
    assert llm_utils.pack_block_cache_key(BlocksCacheKey(1, 7)) == (1, -1, 0, U64, U64, 7, True)
    assert llm_utils.pack_mem_info(MemInfo(Memtype.MEM_TYPE_HOST, 8, 9)) == (1, 8, 9)
    desc = CacheDesc(2, [4, 8], DataType.DT_FLOAT16, Placement.HOST, 0, 1)
    # hixl llm_utils.py at 49b96c60: batch_dim after seq_len_dim_index; the kind is the API's to say
    assert llm_utils.pack_cache_desc(desc) == (2, 1, 1, 0, [4, 8], 0, False)
    assert llm_utils.pack_cache_desc(desc, is_blocks=True) == (2, 1, 1, 0, [4, 8], 0, True)
    desc._is_blocks = True
    assert llm_utils.pack_cache_desc(desc, is_blocks=False)[-1] is False
    assert desc._is_blocks is True  # packing never changes the desc


@given(st.integers(0, U64), st.integers(0, U64), st.integers(0, U64), st.integers(0, U64))
def test_equal_keys_pack_equal(cluster: int, req: int, model: int, prefix: int) -> None:
    # Keys compare by identity; the packed tuple is what the simulator indexes by.
    a, b = (
        CacheKey(cluster, req, model, prefix),
        CacheKey(prompt_cluster_id=cluster, req_id=req, model_id=model, prefix_id=prefix),
    )
    assert a != b
    assert llm_utils.pack_cache_key(a) == llm_utils.pack_cache_key(b)
