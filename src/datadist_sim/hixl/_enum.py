"""The five enums of ``hixl``, as pybind11's ``py::enum_`` makes them (hixl ``hixl_py.cc:249-277``).

A pybind11 enum is not a Python ``enum.Enum``: it is a bound class whose members are instances
(pybind11 v2.13.6 ``include/pybind11/pybind11.h``, ``enum_base::init`` and ``class enum_``):

- ``repr`` ``<MemType.MEM_HOST: 1>``, ``str`` ``MemType.MEM_HOST``; ``name``, ``value``, ``int()``,
  ``operator.index()`` and ``hash()`` give what the names say; ``__members__`` maps names to members;
- equality: an enum whose C++ type converts to its integer (the unscoped ``MemType``, ``TransferOp``,
  ``FeatureType``) compares by value with anything but ``None``; a scoped ``enum class``
  (``TransferStatus``, ``AsyncConnectStatus``) equals only a member of its own type with the same value;
- no ordering or arithmetic (none is bound ``py::arithmetic()``), and a member is not an ``int``;
- ``MemType(1)`` builds a value from an integer of the underlying type without checking it is a
  member: ``MemType(7).name`` is ``"???"``.
"""

from __future__ import annotations

from typing import Any, ClassVar, Dict, Optional, Tuple

from datadist_sim.hixl._cast import Param, bind, signed, unsigned


class _Members:
    """``__members__``: pybind binds it as a static property, read on the type or on a member."""

    def __get__(self, obj: object, owner: Optional[type] = None) -> Dict[str, PybindEnum]:
        kind = owner if owner is not None else type(obj)
        return dict(kind._entries)  # type: ignore[attr-defined]


class PybindEnum:
    """The behaviour ``enum_base`` gives every bound enum; a subclass names its members with ``_define``."""

    __slots__ = ("_value",)
    _entries: ClassVar[Dict[str, PybindEnum]]
    _convertible: ClassVar[bool]
    """The C++ enum converts implicitly to its integer type (unscoped ``enum``): compare by value."""
    _params: ClassVar[Tuple[Param, ...]]
    __members__ = _Members()

    def __init__(self, *args: object, **kwargs: object) -> None:
        (self._value,) = bind(type(self).__name__, self._params, args, kwargs)

    @classmethod
    def _define(cls, convertible: bool, underlying_signed: bool, **members: int) -> None:
        cls._convertible = convertible
        # The constructor takes the enum's underlying scalar: ``int`` for an ``enum class`` and for
        # ``FeatureType : int32_t``; GCC gives an unscoped enum with no negative value ``unsigned int``.
        load = signed(32) if underlying_signed else unsigned(32)
        cls._params = (Param("value", "int", load),)
        cls._entries = {}
        for name, value in members.items():
            member = cls(value)
            cls._entries[name] = member
            setattr(cls, name, member)

    @property
    def name(self) -> str:
        for name, member in type(self)._entries.items():
            if member._value == self._value:
                return name
        return "???"

    @property
    def value(self) -> int:
        return int(self._value)

    def __int__(self) -> int:
        return int(self._value)

    def __index__(self) -> int:
        return int(self._value)

    def __hash__(self) -> int:
        return int(self._value)

    def __repr__(self) -> str:
        return f"<{type(self).__name__}.{self.name}: {self._value}>"

    def __str__(self) -> str:
        return f"{type(self).__name__}.{self.name}"

    def __eq__(self, other: object) -> bool:
        if type(self)._convertible:
            return other is not None and bool(int(self._value) == other)
        return type(other) is type(self) and int(self._value) == int(other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __getstate__(self) -> int:
        return int(self._value)

    def __setstate__(self, state: Any) -> None:
        self._value = int(state)


class MemType(PybindEnum):
    """``hixl_types.h:59``: unscoped."""

    __slots__ = ()
    MEM_DEVICE: ClassVar[MemType]
    MEM_HOST: ClassVar[MemType]


class TransferOp(PybindEnum):
    """``hixl_types.h:61``: unscoped."""

    __slots__ = ()
    READ: ClassVar[TransferOp]
    WRITE: ClassVar[TransferOp]


class TransferStatus(PybindEnum):
    """``hixl_types.h:74``: ``enum class``; its members are not exported to the module
    (``hixl_py.cc:257-261`` has no ``export_values``)."""

    __slots__ = ()
    WAITING: ClassVar[TransferStatus]
    COMPLETED: ClassVar[TransferStatus]
    TIMEOUT: ClassVar[TransferStatus]
    FAILED: ClassVar[TransferStatus]


class AsyncConnectStatus(PybindEnum):
    """``hixl_types.h:99-107``: ``enum class``."""

    __slots__ = ()
    NOT_CONNECT: ClassVar[AsyncConnectStatus]
    CONNECT_PENDING: ClassVar[AsyncConnectStatus]
    CONNECTING: ClassVar[AsyncConnectStatus]
    CONNECTED: ClassVar[AsyncConnectStatus]
    CONNECT_FAILED: ClassVar[AsyncConnectStatus]
    DISCONNECT_PENDING: ClassVar[AsyncConnectStatus]
    DISCONNECTING: ClassVar[AsyncConnectStatus]


class FeatureType(PybindEnum):
    """``hixl_types.h:49-52``: unscoped, ``int32_t``."""

    __slots__ = ()
    AUTO_CONNECT: ClassVar[FeatureType]
    CLIENT_SERVER_COMM: ClassVar[FeatureType]


MemType._define(True, False, MEM_DEVICE=0, MEM_HOST=1)
TransferOp._define(True, False, READ=0, WRITE=1)
TransferStatus._define(False, True, WAITING=0, COMPLETED=1, TIMEOUT=2, FAILED=3)
AsyncConnectStatus._define(
    False,
    True,
    NOT_CONNECT=0,
    CONNECT_PENDING=1,
    CONNECTING=2,
    CONNECTED=3,
    CONNECT_FAILED=4,
    DISCONNECT_PENDING=5,
    DISCONNECTING=6,
)
FeatureType._define(True, True, AUTO_CONNECT=0, CLIENT_SERVER_COMM=1)
