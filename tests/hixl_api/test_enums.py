"""The five enums behave as pybind11's ``py::enum_`` makes them (docs/hixl_engine_facts.md, section 2).
Members and values: hicann/hixl 9ed283b ``include/hixl/hixl_types.h``; bindings ``hixl_py.cc:249-277``;
behaviour: pybind11 v2.13.6 ``pybind11.h`` (``enum_base::init``, ``class enum_``)."""

from __future__ import annotations

import operator
import pickle

import pytest

import datadist_sim.hixl as hixl

CONVERTIBLE = (hixl.MemType, hixl.TransferOp, hixl.FeatureType)
SCOPED = (hixl.TransferStatus, hixl.AsyncConnectStatus)


def test_members_and_values() -> None:
    """``hixl_types.h:49-52, 59, 61, 74, 99-107``."""
    assert {n: m.value for n, m in hixl.MemType.__members__.items()} == {"MEM_DEVICE": 0, "MEM_HOST": 1}
    assert {n: m.value for n, m in hixl.TransferOp.__members__.items()} == {"READ": 0, "WRITE": 1}
    assert {n: m.value for n, m in hixl.TransferStatus.__members__.items()} == {
        "WAITING": 0,
        "COMPLETED": 1,
        "TIMEOUT": 2,
        "FAILED": 3,
    }
    assert {n: m.value for n, m in hixl.AsyncConnectStatus.__members__.items()} == {
        "NOT_CONNECT": 0,
        "CONNECT_PENDING": 1,
        "CONNECTING": 2,
        "CONNECTED": 3,
        "CONNECT_FAILED": 4,
        "DISCONNECT_PENDING": 5,
        "DISCONNECTING": 6,
    }
    assert {n: m.value for n, m in hixl.FeatureType.__members__.items()} == {
        "AUTO_CONNECT": 0,
        "CLIENT_SERVER_COMM": 1,
    }


def test_repr_str_name_int_index_hash() -> None:
    """``enum_base::init``: ``<Type.NAME: value>``, ``Type.NAME``; ``class enum_``: ``__int__``,
    ``__index__``, ``value``; ``__hash__`` is the integer."""
    member = hixl.AsyncConnectStatus.CONNECT_FAILED
    assert repr(member) == "<AsyncConnectStatus.CONNECT_FAILED: 4>"
    assert str(member) == "AsyncConnectStatus.CONNECT_FAILED"
    assert member.name == "CONNECT_FAILED"
    assert (int(member), operator.index(member), member.value, hash(member)) == (4, 4, 4, 4)
    assert ["a", "b"][hixl.MEM_HOST] == "b"


def test_unscoped_enums_compare_by_value_with_anything_but_none() -> None:
    """``is_convertible`` (an unscoped C++ enum converts to its integer): ``__eq__`` compares the integer
    with the other operand, ``None`` excepted (``PYBIND11_ENUM_OP_CONV_LHS``)."""
    assert hixl.MemType.MEM_DEVICE == 0
    assert hixl.MEM_HOST != 0
    assert hixl.MemType.MEM_DEVICE == hixl.TransferOp.READ
    assert hixl.FeatureType.CLIENT_SERVER_COMM == 1
    assert hixl.MEM_DEVICE != None  # noqa: E711 - the comparison itself is what is tested
    assert (hixl.MEM_DEVICE == None) is False  # noqa: E711


def test_scoped_enums_equal_only_their_own_members() -> None:
    """``enum class`` (``hixl_types.h:74, 99``) is not convertible: ``__eq__`` is strict
    (``PYBIND11_ENUM_OP_STRICT``), so a scoped member never equals an integer."""
    assert hixl.TransferStatus.WAITING != 0
    assert (hixl.TransferStatus.FAILED == 3) is False
    assert hixl.TransferStatus(3) == hixl.TransferStatus.FAILED
    assert hixl.AsyncConnectStatus.NOT_CONNECT != hixl.TransferStatus.WAITING
    assert hixl.MemType.MEM_DEVICE != hixl.TransferStatus.WAITING


@pytest.mark.parametrize("kind", CONVERTIBLE + SCOPED)
def test_no_ordering_no_arithmetic_not_an_int(kind: type) -> None:
    """None of the five is bound ``py::arithmetic()`` (``hixl_py.cc:250-276``): no ``<`` and no ``+``."""
    first, second = list(kind.__members__.values())[:2]  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        _ = first < second
    with pytest.raises(TypeError):
        _ = first + 1
    assert not isinstance(first, int)


def test_construction_from_an_integer_checks_the_type_not_membership() -> None:
    """``class enum_`` binds ``__init__(value: Scalar)`` with ``static_cast``: any integer of the underlying
    type makes a value, an unknown one named ``"???"``; a float or a negative for an unsigned underlying
    type is refused by the caster (``MemType`` has no negative member, so GCC makes it ``unsigned int``;
    ``FeatureType`` is ``int32_t``, ``hixl_types.h:49``)."""
    assert hixl.MemType(1) == hixl.MEM_HOST
    assert hixl.MemType(value=0).name == "MEM_DEVICE"
    assert hixl.MemType(7).name == "???"
    assert hixl.FeatureType(-1).value == -1
    with pytest.raises(TypeError, match=r"hixl\.hixl\.MemType\(value: int\)"):
        hixl.MemType(-1)
    with pytest.raises(TypeError, match="incompatible constructor arguments"):
        hixl.TransferOp(1.0)
    with pytest.raises(TypeError):
        hixl.TransferStatus()


def test_members_mapping_is_on_the_type_and_its_members_and_a_fresh_copy() -> None:
    """``__members__`` is a static property (``enum_base::init``) built on each read."""
    members = hixl.FeatureType.__members__
    assert hixl.AUTO_CONNECT.__members__ == members
    members.clear()
    assert len(hixl.FeatureType.__members__) == 2


def test_members_pickle_by_value() -> None:
    """``__getstate__`` returns the integer and ``__setstate__`` restores it (``enum_base::init``,
    ``class enum_``)."""
    for member in (hixl.WRITE, hixl.TransferStatus.COMPLETED, hixl.CONNECT_PENDING):
        assert pickle.loads(pickle.dumps(member)) == member
