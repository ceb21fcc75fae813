"""Argument checks with the real error taxonomy: wrong type -> ``TypeError``, out of range -> ``ValueError``.

Messages follow the real ``check_*`` helpers so client code matching on them keeps working. ``bool`` is an
``int`` here as in the real package, so ``True`` passes an integer check.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from itertools import repeat
from typing import Any, Optional, Union

_ClassSpec = Union[type, "list[type]", "tuple[type, ...]"]

_RANGES = {
    "uint8": (0, 2**8 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint64": (0, 2**64 - 1),
}

UINT64_MAX = 2**64 - 1
_UINT8, _UINT16, _INT32 = _RANGES["uint8"], _RANGES["uint16"], _RANGES["int32"]
_UINT32, _INT64, _UINT64 = _RANGES["uint32"], _RANGES["int64"], _RANGES["uint64"]
"""Each check's range, bound once: the common case (an ``int`` in range) is one comparison and
the helpers below it only run to build the real message."""


def _as_list(classes: _ClassSpec) -> list[type]:
    return list(classes) if isinstance(classes, (list, tuple)) else [classes]


def check_inner(arg_name: str, arg_value: Any, inner_class: _ClassSpec) -> None:
    """Every element of a container must be of ``inner_class``."""
    allowed: Any = tuple(inner_class) if isinstance(inner_class, (list, tuple)) else inner_class
    if type(arg_value) in (list, tuple) and all(map(isinstance, arg_value, repeat(allowed))):
        return  # the common case in one pass without a Python-level loop (a 64-block list: ~2x faster)
    inner = _as_list(inner_class)
    for val in arg_value:
        if not isinstance(val, allowed):
            shown = inner[0] if len(inner) == 1 else inner
            raise TypeError(f"{arg_name} inner type only support {[shown]}, but got {type(val)}.")


def check_dict(
    arg_name: str,
    arg_value: Mapping[Any, Any],
    k_class: _ClassSpec,
    v_class: _ClassSpec,
    v_inner_class: Optional[_ClassSpec] = None,
) -> None:
    """Keys and values of a dict must be of the given classes."""
    keys, values = tuple(_as_list(k_class)), tuple(_as_list(v_class))
    for k, v in arg_value.items():
        if not isinstance(k, keys):
            raise TypeError(f"{arg_name} dict key only support {k_class}, but got {type(k)}.")
        if not isinstance(v, values):
            raise TypeError(f"{arg_name} dict value only support {v_class}, but got {type(v)}.")
        if v_inner_class is not None:
            check_inner("dict value", v, v_inner_class)


def check_isinstance(
    arg_name: str,
    arg_value: Any,
    classes: _ClassSpec,
    inner_class: Optional[_ClassSpec] = None,
    extra_fmt: str = "",
    allow_none: bool = True,
) -> Any:
    """Type check with the real message; ``None`` passes unless ``allow_none`` is False."""
    if allow_none and arg_value is None:
        return arg_value
    spec: Any = tuple(classes) if type(classes) is list else classes
    if isinstance(arg_value, spec):  # the common case, without building the message's list
        if inner_class is not None:
            check_inner(arg_name, arg_value, inner_class)
        return arg_value
    names = [clazz.__name__ for clazz in _as_list(classes)]
    raise TypeError(f"{extra_fmt}{arg_name} only support {names}, but got {type(arg_value)}.")


def check_int_range(kind: str, arg_name: str, arg_value: Any) -> None:
    """An int (else ``TypeError``) inside the range of the C type ``kind`` (else ``ValueError``)."""
    if not isinstance(arg_value, int):
        check_isinstance(arg_name, arg_value, [int], allow_none=False)
    low, high = _RANGES[kind]
    if arg_value < low or arg_value > high:
        raise ValueError(f"{arg_name}'s value is out of range,{arg_value} is not a {kind} value.")


def check_uint8(arg_name: str, arg_value: Any) -> None:
    if type(arg_value) is not int or not _UINT8[0] <= arg_value <= _UINT8[1]:
        check_int_range("uint8", arg_name, arg_value)


def check_uint16(arg_name: str, arg_value: Any) -> None:
    if type(arg_value) is not int or not _UINT16[0] <= arg_value <= _UINT16[1]:
        check_int_range("uint16", arg_name, arg_value)


def check_int32(arg_name: str, arg_value: Any) -> None:
    if type(arg_value) is not int or not _INT32[0] <= arg_value <= _INT32[1]:
        check_int_range("int32", arg_name, arg_value)


def check_uint32(arg_name: str, arg_value: Any) -> None:
    if type(arg_value) is not int or not _UINT32[0] <= arg_value <= _UINT32[1]:
        check_int_range("uint32", arg_name, arg_value)


def check_int64(arg_name: str, arg_value: Any) -> None:
    if type(arg_value) is not int or not _INT64[0] <= arg_value <= _INT64[1]:
        check_int_range("int64", arg_name, arg_value)


def check_uint64(arg_name: str, arg_value: Any) -> None:
    if type(arg_value) is not int or not _UINT64[0] <= arg_value <= _UINT64[1]:
        check_int_range("uint64", arg_name, arg_value)


def check_list_int32(arg_name: str, arg_value: Iterable[Any]) -> None:
    for value in arg_value:
        check_int32(arg_name, value)


def check_list_int64(arg_name: str, arg_value: Iterable[Any]) -> None:
    for value in arg_value:
        check_int64(arg_name, value)


def check_list_uint64(arg_name: str, arg_value: Iterable[Any]) -> None:
    for value in arg_value:
        check_uint64(arg_name, value)


def check_positive_or_set_default(arg_name: str, arg_value: Any, default: int = -1) -> int:
    """An optional non-negative int64 (``ValueError`` if negative), or ``default`` for None."""
    if arg_value is None:
        return default
    check_int64(arg_name, arg_value)
    if arg_value < 0:
        raise ValueError(f"{arg_name}'s value:{arg_value} is invalid, should be >= 0")
    return int(arg_value)
