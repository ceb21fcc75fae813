"""Data classes of ``llm_datadist.v2.llm_types`` against the real module (reference sections 2.5 and 6)."""

from __future__ import annotations

import threading
from enum import Enum, IntEnum
from typing import Any, List, Optional, Type

import pytest
from hypothesis import given
from hypothesis import strategies as st

from datadist_sim.llm_datadist.data_type import DataType
from datadist_sim.llm_datadist.status import LLMException, LLMStatusCode
from datadist_sim.llm_datadist.v2 import llm_types
from datadist_sim.llm_datadist.v2.llm_types import (
    BlocksCacheKey,
    Cache,
    CacheDesc,
    CacheKey,
    CacheKeyByIdAndIndex,
    CacheTask,
    KvCache,
    LayerSynchronizer,
    MemInfo,
    Memtype,
    Placement,
    PushType,
    RegisterMemStatus,
    TransferConfig,
    TransferWithCacheKeyConfig,
    check_layer_range,
    int_to_mem_status_dict,
)

S = LLMStatusCode
U64 = 2**64 - 1
uint64s = st.integers(min_value=0, max_value=U64)


def _param_invalid(fn: Any, *args: Any, **kwargs: Any) -> LLMException:
    with pytest.raises(LLMException) as info:
        fn(*args, **kwargs)
    assert info.value.status_code is S.LLM_PARAM_INVALID
    return info.value


def test_module_exports_every_name_the_real_module_defines() -> None:
    real_names = {
        "PushType",
        "RegisterMemStatus",
        "Memtype",
        "MemInfo",
        "int_to_mem_status_dict",
        "Placement",
        "CacheDesc",
        "Cache",
        "BlocksCacheKey",
        "CacheKey",
        "CacheKeyByIdAndIndex",
        "KvCache",
        "LayerSynchronizer",
        "check_layer_range",
        "TransferWithCacheKeyConfig",
        "TransferConfig",
        "CacheTask",
        "_INVALID_ID",
    }
    assert real_names <= set(vars(llm_types))
    assert llm_types.__all__ == [
        "CacheDesc",
        "CacheKey",
        "CacheKeyByIdAndIndex",
        "KvCache",
        "BlocksCacheKey",
        "Placement",
        "CacheTask",
        "TransferConfig",
        "LayerSynchronizer",
        "Cache",
    ]
    assert llm_types._INVALID_ID == U64


# -- enums -----------------------------------------------------------------------------------------------


def test_placement() -> None:
    assert issubclass(Placement, IntEnum)
    assert [(m.name, int(m)) for m in Placement] == [("HOST", 0), ("DEVICE", 1)]
    assert str(Placement.HOST) == "Placement.HOST"
    assert f"{Placement.DEVICE}" == "Placement.DEVICE"


@pytest.mark.parametrize(
    ("enum", "expected"),
    [
        (RegisterMemStatus, [("OK", 0), ("PREPARING", 1), ("FAILED", 2)]),
        (Memtype, [("MEM_TYPE_DEVICE", 0), ("MEM_TYPE_HOST", 1)]),
        (PushType, [("NO_CACHE_KEY", 0), ("BLOCKS_CACHE_KEY", 1), ("CACHE_KEY_BY_ID", 2)]),
    ],
)
def test_plain_enums(enum: Type[Enum], expected: List[Any]) -> None:
    assert not issubclass(enum, IntEnum)
    assert [(m.name, m.value) for m in enum] == expected


def test_int_to_mem_status_dict() -> None:
    assert int_to_mem_status_dict == {
        0: RegisterMemStatus.OK,
        1: RegisterMemStatus.PREPARING,
        2: RegisterMemStatus.FAILED,
    }


# -- MemInfo ---------------------------------------------------------------------------------------------


def test_mem_info() -> None:
    info = MemInfo(Memtype.MEM_TYPE_DEVICE, 4096, 128)
    assert (info.mem_type, info.addr, info.size) == (Memtype.MEM_TYPE_DEVICE, 4096, 128)
    assert str(info) == "MemInfo(mem_type=Memtype.MEM_TYPE_DEVICE, addr=4096, size=128)"
    assert repr(info) == str(info)
    with pytest.raises(TypeError):
        MemInfo(0, 1, 1)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        MemInfo(Memtype.MEM_TYPE_HOST, "1", 1)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        MemInfo(Memtype.MEM_TYPE_HOST, 1, 1.0)  # type: ignore[arg-type]


# -- CacheDesc -------------------------------------------------------------------------------------------


def test_cache_desc_defaults_and_properties() -> None:
    shape = [4, 16, 8]
    desc = CacheDesc(2, shape, DataType.DT_FLOAT16)
    assert desc.shape is shape
    assert desc.num_tensors == 2
    assert desc.data_type is DataType.DT_FLOAT16
    assert desc.placement is Placement.DEVICE
    assert desc.batch_dim == 0
    assert desc.batch_size == 4
    assert desc.seq_len_dim_index == -1
    assert desc.kv_tensor_format is None
    assert desc._is_blocks is False
    assert desc.size == 4 * 16 * 8 * 2


def test_cache_desc_batch_dim_selects_batch_size() -> None:
    desc = CacheDesc(1, (3, 5), DataType.DT_INT8, Placement.HOST, 1, 0, "ND")
    assert (desc.batch_dim, desc.batch_size, desc.seq_len_dim_index) == (1, 5, 0)
    assert desc.kv_tensor_format == "ND"


def test_cache_desc_repr_is_the_real_one() -> None:
    desc = CacheDesc(80, [4, 256], DataType.DT_FLOAT16)
    assert repr(desc) == (
        "CacheDesc(num_tensors=80, shape=[4, 256], data_type=DataType.DT_FLOAT16, "
        "placement=Placement.DEVICE, batch_dim_index=0, seq_len_dim_index=-1,kv_tensor_format=None)"
    )


def test_update_dim_mutates_the_callers_shape_and_resizes() -> None:
    shape = [2, 4]
    desc = CacheDesc(1, shape, DataType.DT_FLOAT)
    assert desc.size == 32
    desc.update_dim(1, 8)
    assert shape == [2, 8]
    assert desc.size == 64
    assert desc.batch_size == 2  # frozen at construction, as in real
    desc.update_dim(0, 5)
    assert desc.batch_size == 2


def test_size_is_lazy_and_cached() -> None:
    shape = [2, 4]
    desc = CacheDesc(1, shape, DataType.DT_INT64)
    assert desc.size == 64
    shape[1] = 100  # changed behind its back: the cached size stays until update_dim
    assert desc.size == 64


def test_size_of_dynamic_shape_raises_without_a_status_code() -> None:
    desc = CacheDesc(1, [-1, 4], DataType.DT_FLOAT)
    with pytest.raises(LLMException, match="Failed to calc tensor size") as info:
        _ = desc.size
    assert info.value.status_code is S.LLM_SUCCESS  # the real raise passes no status_code


@given(
    st.lists(st.integers(min_value=0, max_value=64), min_size=1, max_size=4), st.sampled_from(list(DataType))
)
def test_size_is_product_times_element_size(shape: List[int], dtype: DataType) -> None:
    from datadist_sim.llm_datadist.data_type import element_size

    expected = element_size(dtype)
    for dim in shape:
        expected *= dim
    assert CacheDesc(1, shape, dtype).size == expected


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ((-1, [1], DataType.DT_FLOAT), ValueError),
        ((2**32, [1], DataType.DT_FLOAT), ValueError),
        (("1", [1], DataType.DT_FLOAT), TypeError),
        ((1, "1", DataType.DT_FLOAT), TypeError),
        ((1, [1.0], DataType.DT_FLOAT), TypeError),
        ((1, [1], 1), TypeError),
        ((1, [1], DataType.DT_FLOAT, 1), TypeError),
        ((1, [1], DataType.DT_FLOAT, Placement.HOST, "0"), TypeError),
        ((1, [1], DataType.DT_FLOAT, Placement.HOST, 0, 2**31), ValueError),
        ((1, [1], DataType.DT_FLOAT, Placement.HOST, 0, -1, 5), TypeError),
        ((1, [2**63], DataType.DT_FLOAT), ValueError),
    ],
)
def test_cache_desc_type_and_range_errors(args: Any, error: Type[BaseException]) -> None:
    with pytest.raises(error):
        CacheDesc(*args)


@pytest.mark.parametrize(
    "args",
    [
        (1, [4, 4], DataType.DT_FLOAT, Placement.DEVICE, 2),
        (1, [4, 4], DataType.DT_FLOAT, Placement.DEVICE, -1),
        (1, [], DataType.DT_FLOAT),
        (1, [4, 4], DataType.DT_FLOAT, Placement.DEVICE, 0, 2),
        (1, [4, 4], DataType.DT_FLOAT, Placement.DEVICE, 0, -2),
    ],
)
def test_cache_desc_index_errors_are_param_invalid(args: Any) -> None:
    _param_invalid(CacheDesc, *args)


def test_cache_desc_index_range_is_checked_before_dims() -> None:
    _param_invalid(CacheDesc, 1, [2**63, 1], DataType.DT_FLOAT, Placement.DEVICE, 5)


# -- CacheKey --------------------------------------------------------------------------------------------


def test_cache_key_forms_and_defaults() -> None:
    key = CacheKey(1, 2)
    assert (key.cluster_id, key.prompt_cluster_id, key.req_id, key.model_id, key.prefix_id) == (
        1,
        1,
        2,
        0,
        U64,
    )
    key = CacheKey(prompt_cluster_id=3, req_id=4, model_id=5, prefix_id=6)
    assert (key.cluster_id, key.req_id, key.model_id, key.prefix_id) == (3, 4, 5, 6)
    key = CacheKey(7, req_id=8)
    assert (key.cluster_id, key.req_id) == (7, 8)
    assert CacheKey(cluster_id=1, prompt_cluster_id=2, req_id=0).cluster_id == 1  # cluster_id wins


def test_cache_key_repr() -> None:
    assert repr(CacheKey(1, 2, 3)) == f"CacheKey(cluster_id=1, req_id=2, prefix_id={U64}, model_id=3)"


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((1, 2, 3, 4, 5), {}, "Param num is over limit"),
        ((1, 2, 3, 4), {"model_id": 1}, "Param num is over limit"),
        ((), {"req_id": 1}, "Param prompt_cluster_id or cluster_id is required"),
        ((1,), {}, "Param req_id is required"),
        ((1, 2), {"batch": 1}, "Unsupported param:batch"),
    ],
)
def test_cache_key_argument_errors(args: Any, kwargs: Any, message: str) -> None:
    assert str(_param_invalid(CacheKey, *args, **kwargs)) == message


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"cluster_id": -1, "req_id": 0}, ValueError),
        ({"cluster_id": 0, "req_id": U64 + 1}, ValueError),
        ({"cluster_id": 0, "req_id": 0, "model_id": -1}, ValueError),
        ({"cluster_id": 0, "req_id": 0, "prefix_id": U64 + 1}, ValueError),
        ({"cluster_id": None, "req_id": 0}, TypeError),
        ({"cluster_id": 0, "req_id": "1"}, TypeError),
    ],
)
def test_cache_key_field_ranges(kwargs: Any, error: Type[BaseException]) -> None:
    with pytest.raises(error):
        CacheKey(**kwargs)


@given(uint64s, uint64s, uint64s, uint64s)
def test_cache_key_round_trips_every_uint64(cluster: int, req: int, model: int, prefix: int) -> None:
    key = CacheKey(cluster, req, model, prefix)
    assert (key.cluster_id, key.req_id, key.model_id, key.prefix_id) == (cluster, req, model, prefix)
    again = CacheKey(prompt_cluster_id=cluster, req_id=req, model_id=model, prefix_id=prefix)
    assert repr(again) == repr(key)


def test_keys_compare_by_identity_like_the_real_classes() -> None:
    assert CacheKey(1, 2) != CacheKey(1, 2)
    assert len({CacheKey(1, 2), CacheKey(1, 2)}) == 2
    assert BlocksCacheKey(1) != BlocksCacheKey(1)
    assert CacheKeyByIdAndIndex(1, 2) != CacheKeyByIdAndIndex(1, 2)
    key = CacheKey(1, 2)
    assert {key: 1}[key] == 1


# -- CacheKeyByIdAndIndex --------------------------------------------------------------------------------


def test_cache_key_by_id_and_index() -> None:
    key = CacheKeyByIdAndIndex(1, 2)
    assert (key.cluster_id, key.cache_id, key.batch_index) == (1, 2, 0)
    assert (
        repr(CacheKeyByIdAndIndex(1, -1, 3))
        == "CacheKeyByIdAndIndex(cluster_id=1, cache_id=-1, batch_index=3)"
    )
    assert key._req_id == U64


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ((-1, 0), ValueError),
        ((0, 2**63), ValueError),
        ((0, -(2**63) - 1), ValueError),
        ((0, 0, 2**32), ValueError),
        ((0, 0, -1), ValueError),
        ((None, 0), TypeError),
        ((0, None), TypeError),
        ((0, 0, None), TypeError),
    ],
)
def test_cache_key_by_id_ranges(args: Any, error: Type[BaseException]) -> None:
    with pytest.raises(error):
        CacheKeyByIdAndIndex(*args)


@given(uint64s, st.integers(min_value=-(2**63), max_value=2**63 - 1), st.integers(0, 2**32 - 1))
def test_cache_key_by_id_round_trip(cluster: int, cache_id: int, index: int) -> None:
    key = CacheKeyByIdAndIndex(cluster, cache_id, index)
    assert (key.cluster_id, key.cache_id, key.batch_index) == (cluster, cache_id, index)


# -- BlocksCacheKey --------------------------------------------------------------------------------------


def test_blocks_cache_key_forms_and_repr() -> None:
    key = BlocksCacheKey(1)
    assert (key.cluster_id, key.prompt_cluster_id, key.model_id) == (1, 1, 0)
    assert repr(key) == "BlocksCacheKey(cluster_id=1, model_id=0)"
    key = BlocksCacheKey(prompt_cluster_id=2, model_id=3)
    assert repr(key) == "BlocksCacheKey(prompt_cluster_id=2, model_id=3)"
    assert (key.cluster_id, key.model_id) == (2, 3)


def test_blocks_cache_key_checks_only_the_type() -> None:
    assert BlocksCacheKey(-1, 2**70).model_id == 2**70
    assert BlocksCacheKey(None).cluster_id is None  # type: ignore[comparison-overlap]
    with pytest.raises(TypeError, match=r"^The first param cluster_id only support \['int'\]"):
        BlocksCacheKey("1")
    with pytest.raises(TypeError, match=r"^The second param model_id only support \['int'\]"):
        BlocksCacheKey(1, 1.0)


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((1, 2, 3), {}, "Param num is over limit"),
        ((), {"model_id": 1}, "Param prompt_cluster_id or cluster_id is required"),
        ((), {"cluster_id": 1, "req_id": 1}, "Unsupported param:req_id"),
    ],
)
def test_blocks_cache_key_argument_errors(args: Any, kwargs: Any, message: str) -> None:
    assert str(_param_invalid(BlocksCacheKey, *args, **kwargs)) == message


# -- Cache -----------------------------------------------------------------------------------------------


def _host_desc(num: int = 2) -> CacheDesc:
    return CacheDesc(num, [4, 8], DataType.DT_FLOAT16, Placement.HOST)


def test_cache_properties_and_str() -> None:
    desc = CacheDesc(2, [4, 8], DataType.DT_FLOAT16)
    cache = Cache(3, desc, [100, 200], None, True, False)
    assert (cache.cache_id, cache.cache_desc, cache.tensor_addrs, cache.is_blocks_cache) == (
        3,
        desc,
        [100, 200],
        False,
    )
    assert cache._is_registered is True
    assert str(cache) == "Cache(cache_id = 3, device_tensor_addrs = 2, is_blocks_cache = False)"
    assert repr(cache) == str(cache)
    assert not hasattr(Cache, "__del__")


def test_cache_invalidate_clears_addresses() -> None:
    cache = Cache(1, _host_desc(), [1, 2], None, False, False)
    cache._invalidate()
    assert cache.tensor_addrs == []
    assert cache._valid is False


def test_cache_id_must_be_int64() -> None:
    with pytest.raises(ValueError, match="cache_id's value is out of range"):
        Cache(2**63, _host_desc(), [], None, False, False)


def test_cache_create_cpu_cache() -> None:
    addrs = [10, 20]
    cache = Cache.create_cpu_cache(_host_desc(), addrs)
    assert (cache.cache_id, cache.is_blocks_cache, cache._is_registered) == (-1, True, False)
    assert cache.tensor_addrs is addrs
    _param_invalid(Cache.create_cpu_cache, CacheDesc(2, [1], DataType.DT_FLOAT), addrs)
    _param_invalid(Cache.create_cpu_cache, _host_desc(3), addrs)
    with pytest.raises(TypeError):
        Cache.create_cpu_cache(_host_desc(), (10, 20))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Cache.create_cpu_cache(_host_desc(), [10, "20"])  # type: ignore[list-item]


# -- KvCache ---------------------------------------------------------------------------------------------


class FakeManager:
    def __init__(self, initialized: bool = True, fail: bool = False) -> None:
        self.initialized = initialized
        self.fail = fail
        self.freed: List[int] = []

    def is_initialized(self) -> bool:
        return self.initialized

    def deallocate_cache(self, cache: KvCache) -> None:
        if self.fail:
            raise LLMException("boom", status_code=S.LLM_FAILED)
        self.freed.append(cache.cache_id)
        cache._invalidate()


def test_kv_cache_properties_and_str() -> None:
    desc = CacheDesc(2, [4, 8], DataType.DT_FLOAT16)
    cache = KvCache(5, desc, [[1, 2], [3, 4]], None)
    assert (cache.cache_id, cache.cache_desc, cache.per_device_tensor_addrs) == (5, desc, [[1, 2], [3, 4]])
    assert str(cache) == "KvCache(cache_id = 5, num_devices = 2)"
    assert repr(cache) == str(cache)


def test_kv_cache_del_deallocates_a_live_cache() -> None:
    manager = FakeManager()
    cache = KvCache(7, _host_desc(), [[1, 2]], manager)
    del cache
    assert manager.freed == [7]


def test_kv_cache_del_skips_an_uninitialized_manager() -> None:
    manager = FakeManager(initialized=False)
    cache = KvCache(7, _host_desc(), [[1, 2]], manager)
    del cache
    assert manager.freed == []


def test_kv_cache_del_skips_an_invalidated_cache() -> None:
    manager = FakeManager()
    cache = KvCache(7, _host_desc(), [[1, 2]], manager)
    cache._invalidate()
    assert cache.per_device_tensor_addrs == []
    del cache
    assert manager.freed == []


def test_kv_cache_del_never_raises() -> None:
    # filterwarnings=error turns an unraisable exception in __del__ into a test failure.
    cache = KvCache(7, _host_desc(), [[1, 2]], FakeManager(fail=True))
    del cache
    with pytest.raises(ValueError, match="not a int64 value"):
        KvCache(2**63, _host_desc(), [[1]], FakeManager())  # half-built object is then collected


def test_kv_cache_create_cpu_cache_flat_and_nested() -> None:
    flat = [1, 2]
    cache = KvCache.create_cpu_cache(_host_desc(), flat)
    assert cache.cache_id == -1
    assert cache.per_device_tensor_addrs == [flat]
    assert cache.per_device_tensor_addrs[0] is flat
    nested = [[1, 2], [3, 4]]
    assert KvCache.create_cpu_cache(_host_desc(), nested).per_device_tensor_addrs is nested


@pytest.mark.parametrize(
    ("desc", "addrs"),
    [
        (CacheDesc(2, [1], DataType.DT_FLOAT), [1, 2]),
        (_host_desc(), []),
        (_host_desc(), [1, 2, 3]),
        (_host_desc(), [[1, 2], [3]]),
        (_host_desc(), [[1, 2], 3]),
        (_host_desc(), [1, [2, 3]]),
    ],
)
def test_kv_cache_create_cpu_cache_param_errors(desc: CacheDesc, addrs: Any) -> None:
    _param_invalid(KvCache.create_cpu_cache, desc, addrs)


def test_kv_cache_create_cpu_cache_type_errors() -> None:
    with pytest.raises(TypeError):
        KvCache.create_cpu_cache(_host_desc(), (1, 2))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        KvCache.create_cpu_cache(_host_desc(), ["1", "2"])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        KvCache.create_cpu_cache(_host_desc(), [[1, "2"]])  # type: ignore[list-item]


# -- layer ranges and transfer configs -------------------------------------------------------------------


def test_check_layer_range() -> None:
    check_layer_range("r", None)
    check_layer_range("r", range(0, 1))
    with pytest.raises(TypeError):
        check_layer_range("r", None, allow_none=False)
    with pytest.raises(TypeError):
        check_layer_range("r", [0, 1])  # type: ignore[arg-type]
    assert str(_param_invalid(check_layer_range, "r", range(0, 4, 2))) == "check r.step == 1 failed"
    message = str(_param_invalid(check_layer_range, "r", range(2, 2)))
    assert message == "check 0 <= range.start < range.stop failed, r = range(2, 2)"
    _param_invalid(check_layer_range, "r", range(-1, 2))


def test_transfer_config() -> None:
    cfg = TransferConfig(1, [10, 20], range(0, 1), 2)
    assert (cfg.dst_cluster_id, cfg.dst_addrs, cfg.src_layer_range, cfg.src_batch_index) == (
        1,
        [10, 20],
        range(0, 1),
        2,
    )
    assert cfg.dst_layer_range is None
    assert (
        repr(cfg) == "TransferConfig(dst_cluster_id=1, dst_addrs=[10, 20],"
        " src_layer_range=range(0, 1), src_batch_index=2)"
    )
    assert str(cfg) == repr(cfg)
    assert TransferConfig(1, (1, 2)).src_layer_range is None
    cfg.dst_cluster_id = 9
    cfg.dst_addrs = (5, 6)
    cfg.src_layer_range = None
    cfg.src_batch_index = 0
    assert (cfg.dst_cluster_id, cfg.dst_addrs, cfg.src_layer_range, cfg.src_batch_index) == (
        9,
        (5, 6),
        None,
        0,
    )


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ((-1, [1]), ValueError),
        ((None, [1]), TypeError),
        ((1, None), TypeError),
        ((1, [1.0]), TypeError),
        ((1, [-1]), ValueError),
        ((1, [1], [0, 1]), TypeError),
        ((1, [1], None, -1), ValueError),
    ],
)
def test_transfer_config_errors(args: Any, error: Type[BaseException]) -> None:
    with pytest.raises(error):
        TransferConfig(*args)


def test_transfer_config_bad_range_is_param_invalid_and_setters_validate() -> None:
    _param_invalid(TransferConfig, 1, [1], range(1, 1))
    cfg = TransferConfig(1, [1])
    with pytest.raises(ValueError, match="not a uint64 value"):
        cfg.dst_cluster_id = U64 + 1
    with pytest.raises(TypeError):
        cfg.dst_addrs = None  # type: ignore[assignment]
    with pytest.raises(ValueError, match="not a uint32 value"):
        cfg.src_batch_index = 2**32
    with pytest.raises(LLMException):
        cfg.src_layer_range = range(0, 3, 2)


def test_transfer_with_cache_key_config() -> None:
    key = CacheKeyByIdAndIndex(4, 1, 0)
    cfg = TransferWithCacheKeyConfig(key, range(0, 2), range(2, 4), 1)
    assert (cfg.cache_key, cfg.src_layer_range, cfg.dst_layer_range, cfg.src_batch_index) == (
        key,
        range(0, 2),
        range(2, 4),
        1,
    )
    assert cfg.dst_cluster_id == 4
    assert repr(cfg) == (
        "TransferWithCacheKeyConfig(cache_key=CacheKeyByIdAndIndex(cluster_id=4, cache_id=1, batch_index=0),"
        " src_layer_range=range(0, 2), dst_layer_range=range(2, 4), src_batch_index=1)"
    )
    cfg.cache_key = None
    cfg.src_layer_range = None
    cfg.dst_layer_range = None
    assert (cfg.cache_key, cfg.src_layer_range, cfg.dst_layer_range) == (None, None, None)


def test_transfer_with_cache_key_config_errors() -> None:
    blocks = BlocksCacheKey(3)
    with pytest.raises(TypeError):
        TransferWithCacheKeyConfig(CacheKey(1, 1), range(0, 1), range(0, 1))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        TransferWithCacheKeyConfig(None, range(0, 1), range(0, 1))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        TransferWithCacheKeyConfig(blocks, None, range(0, 1))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        TransferWithCacheKeyConfig(blocks, range(0, 1), None)  # type: ignore[arg-type]
    _param_invalid(TransferWithCacheKeyConfig, blocks, range(0, 2), range(0, 1))
    _param_invalid(TransferWithCacheKeyConfig, blocks, range(0, 1), range(0, 1), 1)
    with pytest.raises(ValueError, match="src_batch_index's value is out of range"):
        TransferWithCacheKeyConfig(blocks, range(0, 1), range(0, 1), -1)  # uint32 check runs first here
    cfg = TransferWithCacheKeyConfig(blocks, range(0, 1), range(0, 1))
    _param_invalid(setattr, cfg, "src_batch_index", -1)  # the setter checks the blocks rule first
    with pytest.raises(TypeError):
        cfg.cache_key = CacheKey(1, 1)  # type: ignore[assignment]


def test_layer_synchronizer_is_abstract() -> None:
    with pytest.raises(TypeError):
        LayerSynchronizer()  # type: ignore[abstract]

    class Always(LayerSynchronizer):
        def synchronize_layer(self, layer_index: int, timeout_in_millis: Optional[int]) -> bool:
            return True

    assert Always().synchronize_layer(0, None) is True


# -- CacheTask -------------------------------------------------------------------------------------------


def _blocked_task(
    results: List[Optional[LLMStatusCode]], final: List[Optional[LLMStatusCode]], **kw: Any
) -> Any:
    release = threading.Event()

    def work() -> None:
        release.wait(10)
        results[:] = final

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    return CacheTask(worker, results, **kw), release, worker


def test_cache_task_times_out_with_the_default_code_then_reports() -> None:
    results: List[Optional[LLMStatusCode]] = [None, None]
    task, release, worker = _blocked_task(results, [S.LLM_SUCCESS, S.LLM_NOT_YET_LINK])
    assert task.synchronize(timeout_in_millis=1) is S.LLM_TIMEOUT
    assert task.get_results(timeout_in_millis=0) == [S.LLM_TIMEOUT, S.LLM_TIMEOUT]
    release.set()
    worker.join()
    assert task.synchronize() is S.LLM_NOT_YET_LINK
    assert task.get_results() == [S.LLM_SUCCESS, S.LLM_NOT_YET_LINK]


def test_cache_task_v1_default_code() -> None:
    task, release, _ = _blocked_task([None], [S.LLM_SUCCESS], default_error_code=S.LLM_WAIT_PROCESS_TIMEOUT)
    assert task.synchronize(0) is S.LLM_WAIT_PROCESS_TIMEOUT
    assert task.get_results(0) == [S.LLM_WAIT_PROCESS_TIMEOUT]
    release.set()
    assert task.synchronize() is S.LLM_SUCCESS


def test_cache_task_unstarted_entries_are_none_and_not_failures() -> None:
    task = CacheTask(None, [S.LLM_SUCCESS, None])
    assert task.synchronize() is S.LLM_SUCCESS
    assert task.get_results() == [S.LLM_SUCCESS, None]


def test_cache_task_results_are_a_copy() -> None:
    results: List[Optional[LLMStatusCode]] = [S.LLM_SUCCESS]
    task = CacheTask(None, results)
    task.get_results().append(S.LLM_FAILED)
    assert task.get_results() == [S.LLM_SUCCESS]


@pytest.mark.parametrize(
    ("timeout", "error"), [(-1, ValueError), (2**32, ValueError), ("1", TypeError), (1.0, TypeError)]
)
def test_cache_task_timeout_must_be_uint32(timeout: Any, error: Type[BaseException]) -> None:
    task = CacheTask(None, [])
    with pytest.raises(error):
        task.synchronize(timeout)
    with pytest.raises(error):
        task.get_results(timeout)
