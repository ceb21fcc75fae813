"""The data classes of ``hixl`` (hixl ``hixl_py.cc:279-326``), as pybind11 binds them.

Each is a bound class: its constructor and field setters take only what pybind's casters take
(``_cast``), it has no ``__eq__`` (objects compare by identity) and no ``__dict__`` (an attribute it does
not bind cannot be set), and its ``repr`` is Python's default form under the module ``hixl.hixl``.
Fields are properties (pybind makes them with Python's ``property``), so assigning the read-only
``TransferResult.status`` fails as the real one does. Field widths: ``uintptr_t`` and ``size_t`` are 64
bits on the vendor's Linux targets, ``max_query_count`` is ``uint32_t`` (``hixl_types.h:63-97``).
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Tuple

from datadist_sim.hixl._cast import Param, bind, boolean, bound_repr, setter_error, text, unsigned
from datadist_sim.hixl._enum import TransferStatus

_U64 = unsigned(64)
_U32 = unsigned(32)
UINT32_MAX = (1 << 32) - 1


def _field(type_name: str, slot: str, arg_type: str, load: Callable[[object], Optional[object]]) -> Any:
    """A read-write field: the setter converts as pybind does and refuses with pybind's text."""

    def get(self: Any) -> Any:
        return getattr(self, slot)

    def set_(self: Any, value: object) -> None:
        converted = load(value)
        if converted is None:
            raise setter_error(type_name, arg_type, self, value)
        setattr(self, slot, converted)

    return property(get, set_)


def _text_field(type_name: str, slot: str) -> Any:
    """A ``str`` field held as an ``AscendString``: built from ``s.c_str()``, so what follows a NUL byte
    is dropped (``hixl_py.cc:315-316, 322, 325``); read back by decoding the bytes as UTF-8, which
    raises ``UnicodeDecodeError`` for bytes that are not, as pybind's ``std::string`` cast does."""

    def get(self: Any) -> str:
        return bytes(getattr(self, slot)).decode("utf-8")

    def set_(self: Any, value: object) -> None:
        converted = text(value)
        if converted is None:
            raise setter_error(type_name, "str", self, value)
        setattr(self, slot, converted.split(b"\0", 1)[0])

    return property(get, set_)


class _Bound:
    """What every bound class shares: slots and the default ``repr`` under ``hixl.hixl``."""

    __slots__ = ()
    _params: Tuple[Param, ...] = ()

    def _bind(self, args: Tuple[object, ...], kwargs: dict[str, object]) -> list[Any]:
        return bind(type(self).__name__, self._params, args, kwargs)

    def __repr__(self) -> str:
        return bound_repr(self)


class MemDesc(_Bound):
    """``MemDesc(addr, len)``, both required (``hixl_py.cc:280-283``)."""

    __slots__ = ("_addr", "_len")
    _params = (Param("addr", "int", _U64), Param("len", "int", _U64))

    def __init__(self, *args: object, **kwargs: object) -> None:
        self._addr, self._len = self._bind(args, kwargs)

    addr = _field("MemDesc", "_addr", "int", _U64)
    len = _field("MemDesc", "_len", "int", _U64)


class TransferOpDesc(_Bound):
    """``TransferOpDesc(local_addr, remote_addr, len)``, all required (``hixl_py.cc:285-289``)."""

    __slots__ = ("_len", "_local_addr", "_remote_addr")
    _params = (Param("local_addr", "int", _U64), Param("remote_addr", "int", _U64), Param("len", "int", _U64))

    def __init__(self, *args: object, **kwargs: object) -> None:
        self._local_addr, self._remote_addr, self._len = self._bind(args, kwargs)

    local_addr = _field("TransferOpDesc", "_local_addr", "int", _U64)
    remote_addr = _field("TransferOpDesc", "_remote_addr", "int", _U64)
    len = _field("TransferOpDesc", "_len", "int", _U64)


class TransferArgs(_Bound):
    """``TransferArgs()``, no arguments; ``user_data`` is the C++ ``const void *`` as an integer,
    default 0 (``hixl_py.cc:291-295``, ``hixl_types.h:76-79``). It holds no timeout."""

    __slots__ = ("_user_data",)

    def __init__(self, *args: object, **kwargs: object) -> None:
        self._bind(args, kwargs)
        self._user_data = 0

    user_data = _field("TransferArgs", "_user_data", "int", _U64)


class GetTransferStatusArgs(_Bound):
    """``GetTransferStatusArgs(max_query_count=4294967295, skip_waiting=False)`` (``hixl_py.cc:297-300``,
    defaults ``hixl_types.h:81-85``)."""

    __slots__ = ("_max_query_count", "_skip_waiting")
    _params = (
        Param("max_query_count", "int", _U32, UINT32_MAX, str(UINT32_MAX)),
        Param("skip_waiting", "bool", boolean, False, "False"),
    )

    def __init__(self, *args: object, **kwargs: object) -> None:
        self._max_query_count, self._skip_waiting = self._bind(args, kwargs)

    max_query_count = _field("GetTransferStatusArgs", "_max_query_count", "int", _U32)
    skip_waiting = _field("GetTransferStatusArgs", "_skip_waiting", "bool", boolean)


class TransferResult(_Bound):
    """``TransferResult()``, no arguments: ``req`` and ``user_data`` read-write integers (default 0),
    ``status`` read-only, default ``TransferStatus.WAITING`` (``hixl_py.cc:302-310``,
    ``hixl_types.h:87-92``). The engine fills them; ``_make`` is how the face will."""

    __slots__ = ("_req", "_status", "_user_data")

    def __init__(self, *args: object, **kwargs: object) -> None:
        self._bind(args, kwargs)
        self._req = 0
        self._user_data = 0
        self._status = TransferStatus.WAITING

    @classmethod
    def _make(cls, req: int, user_data: int, status: TransferStatus) -> TransferResult:
        result = cls()
        result._req, result._user_data, result._status = req, user_data, status
        return result

    req = _field("TransferResult", "_req", "int", _U64)
    user_data = _field("TransferResult", "_user_data", "int", _U64)

    @property
    def status(self) -> TransferStatus:
        return self._status


class NotifyDesc(_Bound):
    """``NotifyDesc(name, notify_msg)``, both required (``hixl_py.cc:312-325``)."""

    __slots__ = ("_name", "_notify_msg")
    _params = (Param("name", "str", text), Param("notify_msg", "str", text))

    def __init__(self, *args: object, **kwargs: object) -> None:
        name, notify_msg = self._bind(args, kwargs)
        self._name = name.split(b"\0", 1)[0]
        self._notify_msg = notify_msg.split(b"\0", 1)[0]

    name = _text_field("NotifyDesc", "_name")
    notify_msg = _text_field("NotifyDesc", "_notify_msg")
