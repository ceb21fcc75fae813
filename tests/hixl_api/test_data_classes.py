"""The six data classes: constructors, defaults, fields and what their casters take, as pybind11 binds
them (docs/hixl_engine_facts.md, section 2). Bindings: hicann/hixl 9ed283b ``hixl_py.cc:279-326``;
defaults ``include/hixl/hixl_types.h:63-97``; casters and error texts: pybind11 v2.13.6 ``cast.h`` and
``pybind11.h:1044-1115``."""

from __future__ import annotations

import ctypes
import decimal
import re
from typing import Any, Callable

import numpy as np
import pytest

import datadist_sim.hixl as hixl

U64_MAX = (1 << 64) - 1


def test_constructors_take_the_bound_arguments_by_position_or_keyword() -> None:
    """``hixl_py.cc:281, 286, 313-319``: ``MemDesc(addr, len)``, ``TransferOpDesc(local_addr, remote_addr,
    len)``, ``NotifyDesc(name, notify_msg)``, all required."""
    desc = hixl.MemDesc(0x1000, len=8192)
    assert (desc.addr, desc.len) == (0x1000, 8192)
    op = hixl.TransferOpDesc(local_addr=1, remote_addr=2, len=3)
    assert (op.local_addr, op.remote_addr, op.len) == (1, 2, 3)
    notify = hixl.NotifyDesc("signal", notify_msg="hello")
    assert (notify.name, notify.notify_msg) == ("signal", "hello")


@pytest.mark.parametrize(
    ("make", "signature"),
    [
        (lambda: hixl.MemDesc(1), "hixl.hixl.MemDesc(addr: int, len: int)"),
        (lambda: hixl.MemDesc(1, 2, 3), "hixl.hixl.MemDesc(addr: int, len: int)"),
        (lambda: hixl.MemDesc(1, 2, addr=3), "hixl.hixl.MemDesc(addr: int, len: int)"),
        (lambda: hixl.MemDesc(addr=1, size=2), "hixl.hixl.MemDesc(addr: int, len: int)"),
        (
            lambda: hixl.TransferOpDesc(1, 2),
            "hixl.hixl.TransferOpDesc(local_addr: int, remote_addr: int, len: int)",
        ),
        (lambda: hixl.NotifyDesc("a"), "hixl.hixl.NotifyDesc(name: str, notify_msg: str)"),
        (lambda: hixl.TransferArgs(0), "hixl.hixl.TransferArgs()"),
        (lambda: hixl.TransferResult(req=1), "hixl.hixl.TransferResult()"),
        (
            lambda: hixl.GetTransferStatusArgs(1, True, 2),
            "hixl.hixl.GetTransferStatusArgs(max_query_count: int = 4294967295, skip_waiting: bool = False)",
        ),
    ],
)
def test_a_call_that_does_not_match_the_signature_is_pybinds_type_error(
    make: Callable[[], object], signature: str
) -> None:
    """A missing, surplus, repeated or unknown argument: ``incompatible constructor arguments`` with the
    one supported signature (``pybind11.h:1044-1078``)."""
    with pytest.raises(TypeError) as raised:
        make()
    lines = str(raised.value).split("\n")
    assert lines[0] == (
        "__init__(): incompatible constructor arguments. The following argument types are supported:"
    )
    assert lines[1] == "    1. " + signature
    assert lines[3].startswith("Invoked with: ")


def test_invoked_with_lists_positional_reprs_then_keywords() -> None:
    """``pybind11.h:1080-1116``: ``Invoked with: 'a', 2; kwargs: x=3``."""
    with pytest.raises(TypeError) as raised:
        hixl.MemDesc("a", 2, x=3)
    assert str(raised.value).endswith("Invoked with: 'a', 2; kwargs: x=3")


def test_defaults() -> None:
    """``hixl_types.h:76-92``: ``user_data`` null, ``max_query_count`` ``UINT32_MAX``, ``skip_waiting``
    false, ``req`` null, ``status`` ``WAITING``; bound at ``hixl_py.cc:292-310``."""
    assert hixl.TransferArgs().user_data == 0
    args = hixl.GetTransferStatusArgs()
    assert (args.max_query_count, args.skip_waiting) == (4294967295, False)
    assert args.skip_waiting is False
    result = hixl.TransferResult()
    assert (result.req, result.user_data) == (0, 0)
    assert result.status is hixl.TransferStatus.WAITING


class _Index:
    def __index__(self) -> int:
        return 7


@pytest.mark.parametrize(
    ("value", "read"),
    [
        (0, 0),
        (U64_MAX, U64_MAX),
        (True, 1),
        (np.uint64(U64_MAX), U64_MAX),
        (np.int32(5), 5),
        (_Index(), 7),
        (decimal.Decimal("3.7"), 3),
    ],
)
def test_64_bit_fields_take_what_pybinds_unsigned_caster_takes(value: object, read: int) -> None:
    """``uintptr_t``/``size_t`` through ``type_caster`` for unsigned integers: ints and ``bool``, objects
    with ``__index__``, and in conversion mode any number ``int()`` takes."""
    desc = hixl.MemDesc(value, value)
    assert (desc.addr, desc.len) == (read, read)
    desc.addr = value
    assert desc.addr == read
    assert type(desc.addr) is int


@pytest.mark.parametrize("value", [-1, U64_MAX + 1, 1.0, np.float64(2.0), "5", None, b"1", 1j])
def test_64_bit_fields_refuse_what_pybind_refuses(value: object) -> None:
    """A float (even integral), a negative or too large integer, text, ``None`` or a complex is refused
    with ``TypeError``; a refused assignment leaves the field as it was."""
    with pytest.raises(TypeError, match=re.escape("hixl.hixl.TransferOpDesc(local_addr: int")):
        hixl.TransferOpDesc(1, value, 3)
    op = hixl.TransferOpDesc(1, 2, 3)
    with pytest.raises(TypeError) as raised:
        op.remote_addr = value
    assert str(raised.value).split("\n")[:2] == [
        "(): incompatible function arguments. The following argument types are supported:",
        "    1. (self: hixl.hixl.TransferOpDesc, arg0: int) -> None",
    ]
    assert op.remote_addr == 2


def test_max_query_count_is_32_bits() -> None:
    """``uint32_t max_query_count`` (``hixl_types.h:82``): 2**32 does not fit."""
    assert hixl.GetTransferStatusArgs(max_query_count=0).max_query_count == 0
    with pytest.raises(TypeError):
        hixl.GetTransferStatusArgs(max_query_count=1 << 32)
    args = hixl.GetTransferStatusArgs(100, True)
    with pytest.raises(TypeError, match=r"arg0: int"):
        args.max_query_count = -1
    assert args.max_query_count == 100


@pytest.mark.parametrize(("value", "read"), [(True, True), (0, False), (2, True), (0.5, True), (None, False)])
def test_skip_waiting_takes_what_pybinds_bool_caster_takes(value: object, read: bool) -> None:
    """``type_caster<bool>`` in conversion mode: ``None`` is false, numbers by their truth."""
    args = hixl.GetTransferStatusArgs(skip_waiting=value)
    assert args.skip_waiting is read
    args.skip_waiting = value
    assert args.skip_waiting is read


@pytest.mark.parametrize("value", ["yes", [], [1], object()])
def test_skip_waiting_refuses_what_has_no_numeric_truth(value: object) -> None:
    """``type_caster<bool>`` reads only ``nb_bool``: text, lists and plain objects are refused."""
    with pytest.raises(TypeError):
        hixl.GetTransferStatusArgs(skip_waiting=value)
    args = hixl.GetTransferStatusArgs()
    with pytest.raises(TypeError, match=r"arg0: bool"):
        args.skip_waiting = value


def test_transfer_result_status_is_read_only_and_req_user_data_are_fields() -> None:
    """``def_readonly("status", ...)`` (``hixl_py.cc:310``): Python's property without a setter;
    ``req`` and ``user_data`` are read-write (``:304-309``)."""
    result = hixl.TransferResult()
    with pytest.raises(AttributeError):
        result.status = hixl.TransferStatus.FAILED  # type: ignore[misc]
    result.req = 5
    result.user_data = U64_MAX
    assert (result.req, result.user_data) == (5, U64_MAX)
    assert result.status is hixl.TransferStatus.WAITING


def test_user_data_of_transfer_args_is_a_64_bit_field() -> None:
    """``hixl_py.cc:293-295``: the ``const void *`` as ``uintptr_t``."""
    args = hixl.TransferArgs()
    args.user_data = 123
    assert args.user_data == 123
    with pytest.raises(TypeError, match=r"hixl\.hixl\.TransferArgs, arg0: int"):
        args.user_data = -1
    assert args.user_data == 123


def test_notify_text_is_utf8_and_bytes_and_stops_at_a_nul() -> None:
    """``std::string`` caster: ``str`` as UTF-8, ``bytes``/``bytearray`` raw; the binding keeps
    ``AscendString(s.c_str())`` (``hixl_py.cc:315-316, 322, 325``), so text after a NUL is gone."""
    notify = hixl.NotifyDesc("na\0me", bytearray(b"msg"))
    assert (notify.name, notify.notify_msg) == ("na", "msg")
    notify.name = "\u00e9t\u00e9"
    assert notify.name == "\u00e9t\u00e9"
    notify.notify_msg = b"a\0b"
    assert notify.notify_msg == "a"


@pytest.mark.parametrize("value", [1, None, ["a"], "\ud800"])
def test_notify_text_refuses_what_is_not_text(value: object) -> None:
    """A non-text value or a lone surrogate (not UTF-8 encodable) is refused."""
    with pytest.raises(TypeError, match=re.escape("hixl.hixl.NotifyDesc(name: str, notify_msg: str)")):
        hixl.NotifyDesc(value, "m")
    notify = hixl.NotifyDesc("n", "m")
    with pytest.raises(TypeError, match=r"arg0: str"):
        notify.notify_msg = value
    assert notify.notify_msg == "m"


def test_notify_bytes_that_are_not_utf8_fail_when_read() -> None:
    """The getter casts ``std::string`` back to ``str``, decoding UTF-8 (pybind's ``string_caster::cast``)."""
    notify = hixl.NotifyDesc(b"\xff", "m")
    with pytest.raises(UnicodeDecodeError):
        _ = notify.name


@pytest.mark.parametrize(
    "make",
    [
        lambda: hixl.MemDesc(1, 2),
        lambda: hixl.TransferOpDesc(1, 2, 3),
        hixl.TransferArgs,
        hixl.GetTransferStatusArgs,
        hixl.TransferResult,
        lambda: hixl.NotifyDesc("a", "b"),
    ],
)
def test_bound_objects_compare_by_identity_hold_no_other_attribute_and_repr_by_address(
    make: Callable[[], Any],
) -> None:
    """A pybind class with no ``__eq__``, ``__dict__`` or ``__repr__`` bound (``hixl_py.cc:279-326``)."""
    first, second = make(), make()
    assert first != second
    assert first == first
    with pytest.raises(AttributeError):
        first.not_a_field = 1
    assert repr(first) == f"<hixl.hixl.{type(first).__name__} object at 0x{id(first):x}>"


def test_a_ctypes_buffer_address_is_a_valid_addr() -> None:
    """The vendor test builds ``MemDesc(ctypes.addressof(buf), size)`` (``test_hixl_engine_api.py:27-30``)."""
    buf = ctypes.create_string_buffer(4096)
    desc = hixl.MemDesc(ctypes.addressof(buf), 4096)
    assert desc.addr == ctypes.addressof(buf)
