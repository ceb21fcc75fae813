"""Deprecated host tensor types of the v1 package (real module: ``llm_datadist_v1.tensor``).

The real ``Tensor`` wraps an engine tensor id; here the engine buffer is a numpy array owned by the object.
Built from an ndarray, the data is copied, as the real ``build_tensor`` copies it into engine memory.
A manager can wrap simulated memory without a copy through ``Tensor._from_buffer``.
"""

from __future__ import annotations

import itertools
from typing import Any, List, Optional, Tuple, Union

import numpy as np
import numpy.typing as npt

from datadist_sim._status_v1 import LLMStatusCode, handle_llm_status
from datadist_sim.llm_datadist import data_type
from datadist_sim.llm_datadist.data_type import DataType
from datadist_sim.llm_datadist.utils.utils import check_isinstance

_ids = itertools.count(1)
_BY_VALUE = {dtype.value: dtype for dtype in DataType}


class TensorDesc:
    def __init__(self, dtype: DataType, shape: Union[List[int], Tuple[int, ...]]) -> None:
        check_isinstance("dtype", dtype, DataType)
        check_isinstance("shape", shape, [list, tuple], int)
        self._dtype = dtype
        self._shape = list(shape)

    @property
    def dtype(self) -> DataType:
        return self._dtype

    @property
    def shape(self) -> List[int]:
        return self._shape

    def __str__(self) -> str:
        return f"TensorDesc(dtype={self._dtype}, shape={self._shape})"


def _is_str_dtype(dtype: Any) -> bool:
    return bool(np.issubdtype(dtype, np.str_) or np.issubdtype(dtype, np.bytes_))


class Tensor:
    """A host tensor: from an ndarray (copied), another ``Tensor`` (cloned) or an engine id plus desc."""

    def __init__(
        self, data: Union[npt.NDArray[Any], Tensor, int], tensor_desc: Optional[TensorDesc] = None
    ) -> None:
        check_isinstance("data", data, [np.ndarray, Tensor, int])
        check_isinstance("tensor_desc", tensor_desc, TensorDesc)
        self._tensor_id = 0
        self._buffer: Optional[npt.NDArray[Any]] = None
        self._tensor_desc: Optional[TensorDesc]
        if isinstance(data, Tensor):
            self._tensor_desc = data._tensor_desc
            self._buffer = None if data._buffer is None else data._buffer.copy()
            self._tensor_id = next(_ids)
        elif isinstance(data, int):
            # A bare engine id: nothing backs it in the simulator, so numpy() reports the buffer missing.
            self._tensor_desc = tensor_desc
            self._tensor_id = data
        else:
            self._init_by_ndarray(data, tensor_desc)

    @classmethod
    def _from_buffer(cls, raw: npt.NDArray[Any], tensor_desc: TensorDesc) -> Tensor:
        """Wrap contiguous bytes (e.g. simulated device memory) without copying; writes show through."""
        np_dtype = data_type.dtype_to_np_dtype[tensor_desc.dtype]
        tensor = cls(0, tensor_desc)
        tensor._buffer = raw.view(np_dtype).reshape(tensor_desc.shape)
        tensor._tensor_id = next(_ids)
        return tensor

    @staticmethod
    def from_tensor_tuple(tensor_tuple: Tuple[int, int, List[int]]) -> Tensor:
        return Tensor(tensor_tuple[0], TensorDesc(_BY_VALUE[tensor_tuple[1]], tensor_tuple[2]))

    def _init_by_ndarray(self, data: npt.NDArray[Any], tensor_desc: Optional[TensorDesc]) -> None:
        if tensor_desc:
            if list(data.shape) != tensor_desc.shape:
                raise RuntimeError(
                    f"The shape of data:{data.shape} is not same as tensor_desc shape:{tensor_desc.shape}"
                )
            if data.dtype != data_type.dtype_to_np_dtype.get(tensor_desc.dtype):
                raise RuntimeError(
                    f"The dtype of data:{data.dtype} is not same as tensor_desc dtype:{tensor_desc.dtype}"
                )
        elif data.dtype not in data_type.valid_np_dtypes and not _is_str_dtype(data.dtype):
            raise RuntimeError(
                f"The dtype of data:{data.dtype} is not valid, only support {data_type.valid_np_dtypes}"
            )
        if tensor_desc:
            self._tensor_desc = tensor_desc
        elif _is_str_dtype(data.dtype):
            self._tensor_desc = TensorDesc(DataType.DT_STRING, list(data.shape))
        else:
            self._tensor_desc = TensorDesc(data_type.np_dtype_to_dtype[data.dtype], list(data.shape))
        if _is_str_dtype(data.dtype):
            # The real code appends a NUL for the C string layout; we keep plain bytes, which numpy() returns.
            data = data.astype(np.bytes_)
        if not data.flags.c_contiguous:
            raise RuntimeError("The data is not c_contiguous")
        self._buffer = np.array(data, copy=True)
        self._tensor_id = next(_ids)

    def _is_inner_dtype_str(self) -> bool:
        return self._tensor_desc is not None and self._tensor_desc.dtype == DataType.DT_STRING

    def numpy(self, copy: bool = False) -> npt.NDArray[Any]:
        """The data as numpy, with the real quirks: FLOAT16 and BF16 come back flattened, and BF16 as float32.

        ``copy=False`` shares memory with the tensor; string tensors require ``copy=True``.
        """
        check_isinstance("copy", copy, bool)
        if self._is_inner_dtype_str() and not copy:
            raise RuntimeError("String tensor only support when param copy is True.")
        buffer = self._buffer
        if buffer is None or self._tensor_desc is None:
            handle_llm_status(LLMStatusCode.LLM_FAILED, "Tensor.numpy", "Failed to get tensor buffer")
            raise AssertionError("unreachable")  # pragma: no cover
        if self._is_inner_dtype_str():
            return np.array(buffer, copy=True).reshape(self._tensor_desc.shape)
        if self._tensor_desc.dtype == DataType.DT_BF16:
            halves = np.frombuffer(buffer, dtype=np.uint16)
            return (halves.astype(np.uint32) << 16).view(np.float32)
        if self._tensor_desc.dtype == DataType.DT_FLOAT16:
            return np.frombuffer(buffer, dtype=np.uint16).view(np.float16)
        return np.array(buffer, copy=True) if copy else np.asarray(buffer)

    def __str__(self) -> str:
        return f"Tensor({self.numpy(self._is_inner_dtype_str())},tensor_desc={self._tensor_desc})"
