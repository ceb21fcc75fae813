"""DataType, element sizes and the lazy numpy tables (reference section 2.5)."""

from __future__ import annotations

import subprocess
import sys
from enum import Enum, IntEnum

import numpy as np
import pytest

from datadist_sim.llm_datadist import data_type
from datadist_sim.llm_datadist.data_type import DataType, element_size

REAL_VALUES = {
    "DT_FLOAT": 0,
    "DT_FLOAT16": 1,
    "DT_INT8": 2,
    "DT_INT32": 3,
    "DT_UINT8": 4,
    "DT_INT16": 6,
    "DT_UINT16": 7,
    "DT_UINT32": 8,
    "DT_INT64": 9,
    "DT_UINT64": 10,
    "DT_DOUBLE": 11,
    "DT_BOOL": 12,
    "DT_STRING": 13,
    "DT_BF16": 27,
}


def test_every_member_has_the_engine_number() -> None:
    assert {m.name: m.value for m in DataType} == REAL_VALUES


def test_declaration_order_matches_the_real_enum() -> None:
    assert [m.name for m in DataType] == [
        "DT_FLOAT",
        "DT_FLOAT16",
        "DT_BF16",
        "DT_INT8",
        "DT_INT16",
        "DT_UINT16",
        "DT_UINT8",
        "DT_INT32",
        "DT_INT64",
        "DT_UINT32",
        "DT_UINT64",
        "DT_BOOL",
        "DT_DOUBLE",
        "DT_STRING",
    ]


def test_plain_enum_not_int_enum() -> None:
    assert issubclass(DataType, Enum)
    assert not issubclass(DataType, IntEnum)
    assert DataType.DT_FLOAT16 != 1
    assert DataType(1) is DataType.DT_FLOAT16
    assert str(DataType.DT_BF16) == "DataType.DT_BF16"


@pytest.mark.parametrize(
    ("dtype", "size"),
    [
        (DataType.DT_FLOAT, 4),
        (DataType.DT_INT32, 4),
        (DataType.DT_UINT32, 4),
        (DataType.DT_FLOAT16, 2),
        (DataType.DT_BF16, 2),
        (DataType.DT_INT16, 2),
        (DataType.DT_UINT16, 2),
        (DataType.DT_INT8, 1),
        (DataType.DT_UINT8, 1),
        (DataType.DT_BOOL, 1),
        (DataType.DT_INT64, 8),
        (DataType.DT_UINT64, 8),
        (DataType.DT_DOUBLE, 8),
        (DataType.DT_STRING, 1),  # our documented choice
    ],
)
def test_element_size(dtype: DataType, size: int) -> None:
    assert element_size(dtype) == size


def test_element_size_agrees_with_numpy_where_numpy_has_the_type() -> None:
    for dtype, np_type in data_type.dtype_to_np_dtype.items():
        if dtype not in (DataType.DT_STRING,):
            assert element_size(dtype) == np.dtype(np_type).itemsize, dtype


def test_numpy_tables_are_built_lazily_and_cached() -> None:
    # A fresh interpreter, so that no earlier access has built the tables (reloading here would mint a
    # second DataType class and break identity checks elsewhere).
    code = (
        "import datadist_sim.llm_datadist.data_type as m\n"
        "names = ('dtype_to_np_dtype', 'valid_np_dtypes', 'np_dtype_to_dtype')\n"
        "assert not any(n in vars(m) for n in names)\n"
        "table = m.dtype_to_np_dtype\n"
        "assert all(n in vars(m) for n in names)\n"
        "assert m.dtype_to_np_dtype is table\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_dtype_to_np_dtype_maps_bf16_to_float16() -> None:
    table = data_type.dtype_to_np_dtype
    assert set(table) == set(DataType)
    assert table[DataType.DT_BF16] is np.float16
    assert table[DataType.DT_FLOAT16] is np.float16
    assert table[DataType.DT_STRING] is np.bytes_
    assert table[DataType.DT_DOUBLE] is np.double


def test_np_dtype_to_dtype_is_the_inverse_without_bf16() -> None:
    table = data_type.np_dtype_to_dtype
    assert DataType.DT_BF16 not in table.values()
    assert table[np.dtype(np.float16)] is DataType.DT_FLOAT16
    assert table[np.dtype("int64")] is DataType.DT_INT64
    assert len(table) == len(DataType) - 1


def test_valid_np_dtypes_lists_every_mapped_type() -> None:
    assert data_type.valid_np_dtypes == list(data_type.dtype_to_np_dtype.values())
    assert np.dtype(np.float32) in data_type.valid_np_dtypes


def test_unknown_module_attribute_is_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute nope"):
        _ = data_type.nope
