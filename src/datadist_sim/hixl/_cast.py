"""What pybind11 accepts for an argument of the vendor's binding, and the ``TypeError`` it raises otherwise.

hixl binds its API with pybind11 (hixl ``src/python/hixl_py/hixl_py.cc``); every function and constructor
there has a single overload, so pybind loads each argument once, in conversion mode. The rules below are
pybind11 v2.13.6's (``include/pybind11/cast.h``: the arithmetic ``type_caster``, ``type_caster<bool>``,
``string_caster``; ``include/pybind11/pybind11.h:1044-1115``: the text of the error). Which pybind11
release CANN bundles is not in the hixl source (``cmake/find_3rd_party_packages.cmake:19``), so the
text follows v2.13.6; docs/hixl_engine_facts.md, section 2.
"""

from __future__ import annotations

import collections.abc
import operator
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

MODULE = "hixl.hixl"
"""The compiled module's name as Python imports it (``PYBIND11_MODULE(hixl, m)`` loaded as the
submodule ``hixl.hixl`` of the package, ``hixl/__init__.py:13``): pybind names bound types after it."""

_MISSING: Any = object()


def _integer(value: object) -> Optional[int]:
    """The integer pybind's caster reads from ``value``, or None if it refuses the value.

    A ``float`` is refused outright; an ``int`` (``bool`` included) or an object with ``__index__`` is
    read as is; in conversion mode any other number Python's ``int()`` takes is converted the way
    ``PyNumber_Long`` does (``Decimal("3.7")`` -> 3); text is not a number and is refused.
    """
    if isinstance(value, float):
        return None
    if isinstance(value, int):
        return int(value)
    kind = type(value)
    if hasattr(kind, "__index__"):
        try:
            return operator.index(value)  # type: ignore[arg-type]
        except (TypeError, ValueError, OverflowError):
            return None
    if isinstance(value, complex) or any(hasattr(kind, n) for n in ("__int__", "__float__", "__trunc__")):
        try:
            number: int = int(value)  # type: ignore[call-overload]
            return number
        except (TypeError, ValueError, OverflowError):
            return None
    return None


def unsigned(bits: int) -> Callable[[object], Optional[int]]:
    """The caster of an unsigned C++ integer of ``bits`` bits (``uintptr_t``, ``size_t``: 64 on the
    vendor's Linux targets; ``uint32_t``): negative or too large values are refused."""
    top = 1 << bits

    def load(value: object) -> Optional[int]:
        number = _integer(value)
        return number if number is not None and 0 <= number < top else None

    return load


def signed(bits: int) -> Callable[[object], Optional[int]]:
    """The caster of a signed C++ integer of ``bits`` bits (``int32_t``)."""
    low, top = -(1 << (bits - 1)), 1 << (bits - 1)

    def load(value: object) -> Optional[int]:
        number = _integer(value)
        return number if number is not None and low <= number < top else None

    return load


def boolean(value: object) -> Optional[bool]:
    """``type_caster<bool>`` in conversion mode: ``True``/``False``, ``None`` as ``False``, and any object
    whose type defines ``__bool__`` (numbers) by what it says; nothing else (text, lists)."""
    if value is True or value is False:
        return value
    if value is None:
        return False
    if hasattr(type(value), "__bool__"):
        try:
            return bool(value)
        except Exception:  # pybind clears the error and refuses the value
            return None
    return None


def text(value: object) -> Optional[bytes]:
    """``std::string``'s caster: ``str`` as UTF-8 (a lone surrogate is refused), ``bytes`` and
    ``bytearray`` as they are. The C++ side holds bytes, so bytes are what is kept."""
    if isinstance(value, str):
        try:
            return value.encode("utf-8")
        except UnicodeEncodeError:
            return None
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    return None


def instance_of(kind: type) -> Callable[[object], Optional[object]]:
    """The caster of a bound class or enum: only an instance of it (no implicit conversion is registered
    in ``hixl_py.cc``)."""

    def load(value: object) -> Optional[object]:
        return value if isinstance(value, kind) else None

    return load


@dataclass(frozen=True)
class Param:
    """One C++ parameter as pybind shows it: its name, its Python type in signatures, its caster and its
    default (``default_text`` is how the signature prints the default)."""

    name: str
    type_name: str
    load: Callable[[object], object]
    default: Any = _MISSING
    default_text: str = ""


def _invoked_with(args: Sequence[object], kwargs: Mapping[str, object]) -> str:
    """The ``Invoked with:`` part of pybind's text: the positional reprs, then ``kwargs: name=repr``."""
    text_ = ", ".join(repr(a) for a in args)
    if kwargs:
        if args:
            text_ += "; "
        text_ += "kwargs: " + ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
    return text_


def _signature(params: Sequence[Param]) -> str:
    return ", ".join(
        f"{p.name}: {p.type_name}" + (f" = {p.default_text}" if p.default is not _MISSING else "")
        for p in params
    )


def constructor_error(
    type_name: str, params: Sequence[Param], args: Sequence[object], kwargs: Mapping[str, object]
) -> TypeError:
    """pybind's refusal of a constructor call (``pybind11.h:1044-1078``: ``(self: T, a: int) -> None``
    is shown as ``T(a: int)``)."""
    return TypeError(
        "__init__(): incompatible constructor arguments. The following argument types are supported:\n"
        f"    1. {MODULE}.{type_name}({_signature(params)})\n\n"
        f"Invoked with: {_invoked_with(args, kwargs)}"
    )


def setter_error(type_name: str, arg_type: str, owner: object, value: object) -> TypeError:
    """pybind's refusal of a field assignment: the setter ``def_readwrite``/``def_property`` builds has
    no name (``pybind11.h``, ``class_::def_readwrite``), so the text starts with ``()``."""
    return TypeError(
        "(): incompatible function arguments. The following argument types are supported:\n"
        f"    1. (self: {MODULE}.{type_name}, arg0: {arg_type}) -> None\n\n"
        f"Invoked with: {owner!r}, {value!r}"
    )


def _match(
    params: Sequence[Param], args: Tuple[object, ...], kwargs: Dict[str, object]
) -> Optional[List[Any]]:
    """The converted arguments as pybind matches them: positionally, then by keyword; None when a
    surplus, unknown, repeated or missing argument, or one a caster refuses, fails the call. A function
    bound without ``py::arg`` names (parameters ``arg0``...) takes no keyword at all."""
    if not kwargs:  # the common call: arguments by position, the rest their defaults
        if len(args) > len(params):
            return None
        direct: List[Any] = []
        for index, param in enumerate(params):
            value = args[index] if index < len(args) else param.default
            converted = None if value is _MISSING else param.load(value)
            if converted is None:  # by identity: ``None in direct`` would call each enum's ``__eq__``
                return None
            direct.append(converted)
        return direct
    if len(args) > len(params) or (kwargs and params and params[0].name == "arg0"):
        return None
    values: List[Any] = list(args)
    used = 0
    for param in params[len(args) :]:
        if param.name in kwargs:
            values.append(kwargs[param.name])
            used += 1
        elif param.default is not _MISSING:
            values.append(param.default)
        else:
            return None
    if used != len(kwargs):  # a keyword naming nothing, or one already given positionally
        return None
    loaded: List[Any] = []
    for param, value in zip(params, values):
        converted = param.load(value)
        if converted is None:
            return None
        loaded.append(converted)
    return loaded


def bind(
    type_name: str, params: Sequence[Param], args: Tuple[object, ...], kwargs: Dict[str, object]
) -> List[Any]:
    """The converted arguments of a constructor call; one ``TypeError`` naming the signature if pybind
    would refuse the call."""
    loaded = _match(params, args, kwargs)
    if loaded is None:
        raise constructor_error(type_name, params, args, kwargs)
    return loaded


@dataclass(frozen=True)
class Method:
    """A bound function: its name, parameters and return type as pybind prints them; ``owner`` is the
    class of a method (``self`` is shown first), empty for a module function."""

    name: str
    params: Tuple[Param, ...]
    returns: str
    owner: str = ""

    def load(self, this: object, args: Tuple[object, ...], kwargs: Dict[str, object]) -> List[Any]:
        """The converted arguments, or pybind's ``TypeError`` (``pybind11.h:1044-1115``)."""
        loaded = _match(self.params, args, kwargs)
        if loaded is None:
            shown = ([f"self: {MODULE}.{self.owner}"] if self.owner else []) + [_signature(self.params)]
            signature = ", ".join(part for part in shown if part)
            invoked = _invoked_with(((this,) if self.owner else ()) + args, kwargs)
            raise TypeError(
                f"{self.name}(): incompatible function arguments. The following argument types are "
                f"supported:\n    1. ({signature}) -> {self.returns}\n\nInvoked with: {invoked}"
            )
        return loaded


def sequence_of(kind: type) -> Callable[[object], Optional[List[Any]]]:
    """``std::vector<T>``'s caster: any sequence but ``str``/``bytes``, every item a ``kind``."""

    def load(value: object) -> Optional[List[Any]]:
        if type(value) is list:  # the common case, without the abstract-class check
            return list(value) if all(isinstance(item, kind) for item in value) else None
        if isinstance(value, (str, bytes, bytearray)) or not isinstance(value, collections.abc.Sequence):
            return None
        items = list(value)
        return items if all(isinstance(item, kind) for item in items) else None

    return load


def text_map(value: object) -> Optional[Dict[bytes, bytes]]:
    """``std::map<std::string, std::string>``'s caster: a ``dict`` only, every key and value text."""
    if not isinstance(value, dict):
        return None
    loaded: Dict[bytes, bytes] = {}
    for key, item in value.items():
        k, v = text(key), text(item)
        if k is None or v is None:
            return None
        loaded[k] = v
    return loaded


def bound_repr(obj: object) -> str:
    """A bound class without ``__repr__`` shows Python's default form under the module pybind gave it."""
    return f"<{MODULE}.{type(obj).__name__} object at 0x{id(obj):x}>"
