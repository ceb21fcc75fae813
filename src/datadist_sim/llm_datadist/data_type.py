"""Tensor element types (real module: ``llm_datadist.data_type``).

``DataType`` is a plain ``Enum`` (not ``IntEnum``) whose values are the engine's ``ge::DataType`` numbers, so
``DataType.DT_FLOAT16 == 1`` is False exactly as with the real package. The numpy tables are built on first
access through the module ``__getattr__``, as the real module defers its numpy import.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Dict


class DataType(Enum):
    # Declaration order follows the real enum, so iteration order (``list(DataType)``) matches too.
    DT_FLOAT = 0
    DT_FLOAT16 = 1
    DT_BF16 = 27
    DT_INT8 = 2
    DT_INT16 = 6
    DT_UINT16 = 7
    DT_UINT8 = 4
    DT_INT32 = 3
    DT_INT64 = 9
    DT_UINT32 = 8
    DT_UINT64 = 10
    DT_BOOL = 12
    DT_DOUBLE = 11
    DT_STRING = 13


_ELEMENT_SIZES: Dict[DataType, int] = {
    DataType.DT_FLOAT: 4,
    DataType.DT_FLOAT16: 2,
    DataType.DT_BF16: 2,
    DataType.DT_INT8: 1,
    DataType.DT_INT16: 2,
    DataType.DT_UINT16: 2,
    DataType.DT_UINT8: 1,
    DataType.DT_INT32: 4,
    DataType.DT_INT64: 8,
    DataType.DT_UINT32: 4,
    DataType.DT_UINT64: 8,
    DataType.DT_BOOL: 1,
    DataType.DT_DOUBLE: 8,
    # Strings have no fixed width in the engine; one byte per element keeps CacheDesc.size a plain product
    # and lets string caches be allocated at all. Nothing in the KV paths uses DT_STRING.
    DataType.DT_STRING: 1,
}


def element_size(dtype: DataType) -> int:
    """Bytes per element of ``dtype``, the factor the engine's ``calc_tensor_size`` multiplies by."""
    return _ELEMENT_SIZES[dtype]


_NUMPY_TABLES = ("dtype_to_np_dtype", "valid_np_dtypes", "np_dtype_to_dtype")


def __getattr__(name: str) -> Any:
    if name not in _NUMPY_TABLES:
        raise AttributeError(f"module {__name__} has no attribute {name}")
    import numpy as np

    to_np: Dict[DataType, Any] = {
        DataType.DT_FLOAT: np.float32,
        DataType.DT_FLOAT16: np.float16,
        DataType.DT_BF16: np.float16,  # numpy has no bfloat16; the real table maps it to float16 too
        DataType.DT_INT8: np.int8,
        DataType.DT_INT16: np.int16,
        DataType.DT_UINT16: np.uint16,
        DataType.DT_UINT8: np.uint8,
        DataType.DT_INT32: np.int32,
        DataType.DT_INT64: np.int64,
        DataType.DT_UINT32: np.uint32,
        DataType.DT_UINT64: np.uint64,
        DataType.DT_BOOL: np.bool_,
        DataType.DT_DOUBLE: np.double,
        DataType.DT_STRING: np.bytes_,
    }
    # The reverse table skips DT_BF16, so a float16 array always maps back to DT_FLOAT16.
    from_np = {np.dtype(np_type): dtype for dtype, np_type in to_np.items() if dtype is not DataType.DT_BF16}
    tables = {
        "dtype_to_np_dtype": to_np,
        "valid_np_dtypes": list(to_np.values()),
        "np_dtype_to_dtype": from_np,
    }
    globals().update(tables)
    return tables[name]
