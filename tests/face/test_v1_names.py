"""The ``llm_datadist_v1`` names: the deprecated tensor types, the shared data classes and the v1 package's
own status names (reference 1.1; GE ``api/python/llm_datadist_v1/status.py``)."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import datadist_sim.llm_datadist_v1 as v1
from datadist_sim.llm_datadist import configs, data_type, status
from datadist_sim.llm_datadist.data_type import DataType
from datadist_sim.llm_datadist.status import LLMStatusCode
from datadist_sim.llm_datadist.v2 import llm_types
from datadist_sim.llm_datadist_v1.tensor import Tensor, TensorDesc

REAL_V1_ALL = [
    "LLMClusterInfo",
    "LLMStatusCode",
    "LLMException",
    "LLMRole",
    "LlmConfig",
    "LLMConfig",
    "TensorDesc",
    "Tensor",
    "DataType",
    "Status",
    "KvCacheManager",
    "CacheDesc",
    "CacheKey",
    "CacheKeyByIdAndIndex",
    "KvCache",
    "BlocksCacheKey",
    "LLMDataDist",
    "Placement",
    "RegisterMemStatus",
    "LayerSynchronizer",
    "TransferConfig",
    "CacheTask",
    "TransferWithCacheKeyConfig",
    "Memtype",
    "MemInfo",
]


def test_all_is_the_real_v1_list() -> None:
    assert v1.__all__ == REAL_V1_ALL


def test_v1_exception_is_a_class_of_its_own_as_in_the_split_packaging() -> None:
    assert v1.LLMException is not status.LLMException
    assert importlib.import_module("datadist_sim.llm_datadist_v1.status").LLMException is v1.LLMException
    assert not issubclass(v1.LLMException, status.LLMException)
    assert not issubclass(status.LLMException, v1.LLMException)
    assert issubclass(v1.LLMException, RuntimeError)


def test_v1_status_code_is_a_plain_enum_with_the_same_names_and_integers() -> None:
    assert [(c.name, c.value) for c in v1.LLMStatusCode] == [(c.name, int(c)) for c in LLMStatusCode]
    assert v1.LLMStatusCode.LLM_SUCCESS != 0
    assert v1.LLMStatusCode.LLM_KV_CACHE_NOT_EXIST != LLMStatusCode.LLM_KV_CACHE_NOT_EXIST
    assert str(v1.LLMStatusCode.LLM_TIMEOUT) == str(LLMStatusCode.LLM_TIMEOUT) == "LLMStatusCode.LLM_TIMEOUT"
    assert v1.Status(v1.LLMStatusCode.LLM_SUCCESS).is_ok()
    assert v1.Status is not status.Status


@pytest.mark.parametrize(
    "name",
    [
        "CacheDesc",
        "CacheKey",
        "CacheKeyByIdAndIndex",
        "KvCache",
        "BlocksCacheKey",
        "Placement",
        "RegisterMemStatus",
        "LayerSynchronizer",
        "TransferConfig",
        "CacheTask",
        "TransferWithCacheKeyConfig",
        "Memtype",
        "MemInfo",
    ],
)
def test_data_classes_are_shared(name: str) -> None:
    assert getattr(v1, name) is getattr(llm_types, name)
    assert getattr(importlib.import_module("datadist_sim.llm_datadist_v1.llm_types"), name) is getattr(
        llm_types, name
    )


def test_config_and_dtype_names_are_shared() -> None:
    assert v1.LLMClusterInfo is configs.LLMClusterInfo
    assert v1.LlmConfig is configs.LlmConfig
    assert v1.LLMConfig is configs.LlmConfig
    assert v1.LLMRole is configs.LLMRole
    assert v1.DataType is data_type.DataType
    v1_dtype = importlib.import_module("datadist_sim.llm_datadist_v1.data_type")
    assert v1_dtype.DataType is DataType
    assert v1_dtype.dtype_to_np_dtype is data_type.dtype_to_np_dtype


def test_lazy_engine_names_resolve() -> None:
    kv_module = importlib.import_module("datadist_sim.llm_datadist_v1.kv_cache_manager")
    assert v1.KvCacheManager is kv_module.KvCacheManager
    dd_module = importlib.import_module("datadist_sim.llm_datadist.v2.llm_datadist")
    assert v1.LLMDataDist is dd_module.LLMDataDist


def test_unknown_name_is_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = v1.Nope


# -- TensorDesc ------------------------------------------------------------------------------------------


def test_tensor_desc() -> None:
    shape = (2, 3)
    desc = TensorDesc(DataType.DT_INT32, shape)
    assert desc.dtype is DataType.DT_INT32
    assert desc.shape == [2, 3]
    assert isinstance(desc.shape, list)
    assert str(desc) == "TensorDesc(dtype=DataType.DT_INT32, shape=[2, 3])"
    with pytest.raises(TypeError):
        TensorDesc(3, [1])  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        TensorDesc(DataType.DT_INT32, [1.0])  # type: ignore[list-item]


# -- Tensor ----------------------------------------------------------------------------------------------


def test_tensor_from_ndarray_copies_and_infers_the_desc() -> None:
    data = np.arange(6, dtype=np.int32).reshape(2, 3)
    tensor = Tensor(data)
    assert str(tensor._tensor_desc) == "TensorDesc(dtype=DataType.DT_INT32, shape=[2, 3])"
    data[0, 0] = 99  # the tensor took a copy
    view = tensor.numpy()
    assert view.tolist() == [[0, 1, 2], [3, 4, 5]]
    view[0, 0] = 7  # copy=False shares the tensor's memory
    assert tensor.numpy()[0, 0] == 7
    copied = tensor.numpy(copy=True)
    copied[0, 0] = 8
    assert tensor.numpy()[0, 0] == 7


def test_tensor_with_matching_desc() -> None:
    desc = TensorDesc(DataType.DT_FLOAT, [2])
    tensor = Tensor(np.array([1.5, 2.5], dtype=np.float32), desc)
    assert tensor._tensor_desc is desc
    assert tensor.numpy().tolist() == [1.5, 2.5]


def test_tensor_desc_mismatches_are_runtime_errors() -> None:
    data = np.zeros((2, 2), dtype=np.float32)
    with pytest.raises(RuntimeError, match="The shape of data"):
        Tensor(data, TensorDesc(DataType.DT_FLOAT, [4]))
    with pytest.raises(RuntimeError, match="The dtype of data"):
        Tensor(data, TensorDesc(DataType.DT_INT32, [2, 2]))


def test_tensor_rejects_unsupported_and_non_contiguous_data() -> None:
    with pytest.raises(RuntimeError, match="is not valid, only support"):
        Tensor(np.zeros(2, dtype=np.complex64))
    with pytest.raises(RuntimeError, match="The data is not c_contiguous"):
        Tensor(np.zeros((4, 4), dtype=np.float32)[:, ::2])


def test_tensor_argument_types() -> None:
    with pytest.raises(TypeError):
        Tensor("data")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Tensor(np.zeros(1, dtype=np.float32), "desc")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Tensor(np.zeros(1, dtype=np.float32)).numpy(copy=1)  # type: ignore[arg-type]


def test_string_tensor_needs_copy() -> None:
    tensor = Tensor(np.array(["ab", "c"]))
    assert tensor._tensor_desc is not None
    assert tensor._tensor_desc.dtype is DataType.DT_STRING
    with pytest.raises(RuntimeError, match=r"String tensor only support when param copy is True\."):
        tensor.numpy()
    assert tensor.numpy(copy=True).tolist() == [b"ab", b"c"]


def test_float16_comes_back_flat() -> None:
    data = np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float16)
    out = Tensor(data).numpy()
    assert out.dtype == np.float16
    assert out.shape == (4,)
    assert out.tolist() == [1.0, 2.0, 3.0, 4.0]


def test_bf16_is_widened_to_float32_from_the_raw_halves() -> None:
    data = np.array([1.0, -2.0], dtype=np.float16)
    out = Tensor(data, TensorDesc(DataType.DT_BF16, [2])).numpy()
    expected = (data.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    assert out.dtype == np.float32
    assert out.tolist() == expected.tolist()


def test_clone_is_independent() -> None:
    original = Tensor(np.array([1, 2], dtype=np.int64))
    clone = Tensor(original)
    clone.numpy()[0] = 5
    assert original.numpy().tolist() == [1, 2]
    assert clone._tensor_desc is original._tensor_desc


def test_engine_id_without_buffer_fails_on_numpy() -> None:
    tensor = Tensor.from_tensor_tuple((42, DataType.DT_FLOAT.value, [2]))
    assert tensor._tensor_id == 42
    assert tensor._tensor_desc is not None
    assert tensor._tensor_desc.dtype is DataType.DT_FLOAT
    with pytest.raises(v1.LLMException, match="Failed to get tensor buffer") as info:
        tensor.numpy()
    assert info.value.status_code is v1.LLMStatusCode.LLM_FAILED


def test_from_buffer_shares_memory() -> None:
    raw = np.zeros(8, dtype=np.uint8)
    tensor = Tensor._from_buffer(raw, TensorDesc(DataType.DT_INT16, [2, 2]))
    raw[0] = 1
    assert tensor.numpy()[0, 0] == 1
    tensor.numpy()[1, 1] = 0x0102
    assert raw[6:].tolist() == [2, 1]


def test_tensor_str() -> None:
    tensor = Tensor(np.array([1, 2], dtype=np.int8))
    assert str(tensor) == "Tensor([1 2],tensor_desc=TensorDesc(dtype=DataType.DT_INT8, shape=[2]))"
