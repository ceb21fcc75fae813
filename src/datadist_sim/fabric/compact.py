"""The commonest messages in a compact form; every other message as ``wire`` pickles it.

A small pull's request is plain values, two object handles and a key. Pickled, its encoder asks this
end's ``persistent_id`` about each of its ~30 objects and names the key's class by its import path, and
its decoder builds an unpickler, resolves that class and asks ``persistent_load`` about each handle:
6-7 us a side on a warm core, four to six times that once the other process has run on the same core in
between (issue 15). So a request whose arguments are plain values, handles and the faces' small data
classes, and a reply whose value is a plain value, travel as ``marshal`` data instead: one C call each
way and a walk over the arguments that tags each handle and each data object.

``marshal`` reads only plain values (no globals, nothing that runs), and every value read is checked
against the form below before anything uses it: a frame holding anything else is not ours and drops its
connection, as a pickle naming code does. A data object names its class, which must be one of the
protocol's data classes (``wire.allowed_globals``); another name refuses that one request with a
``TypeError``, as a pickle naming a type the protocol does not carry does (``wire.PayloadRefused``).

The form (a frame is ``MARK`` then ``marshal.dumps`` of the message with each value encoded):

- ``None``, ``bool``, ``int``, ``float``, ``str`` and ``bytes`` as themselves; a list as a list of
  encoded values; a dict with ``str`` keys as a dict of encoded values;
- every tuple tagged, so a value is never mistaken for one: ``(TUPLE, (values...))``,
  ``(HANDLE, number)`` for an object the fabric holds, ``(DATA, "module.Class", {attribute: value})``
  for a data object, rebuilt as pickle rebuilds it (``__new__``, then its ``__dict__``).
"""

from __future__ import annotations

import marshal
from typing import Any, Callable, Dict, Optional, Tuple

from datadist_sim.fabric.wire import _DATA_CLASSES, PayloadRefused, allowed_globals

MARK = b"\x01"
"""A compact frame's first byte (a pickle's is ``PROTO``, 0x80)."""
MARSHAL_VERSION = 4
"""Read by every Python the package supports (3.4 on), so the two ends need not run the same one."""
TUPLE, HANDLE, DATA = 0, 1, 2
SCALARS = frozenset({type(None), bool, int, float, str, bytes})
MOST_BYTES = 65536
"""A message holding more bytes than this is pickled: the compact frame is built by concatenation, one
copy more than a pickle of large bytes costs."""

Encode = Callable[[Tuple[Any, ...]], bytes]
Decode = Callable[[bytes], Any]
HandleOf = Callable[[Any], Optional[int]]
Resolve = Callable[[int], Any]

_OWN_PICKLING = ("__reduce_ex__", "__reduce__", "__getstate__", "__setstate__", "__slots__")
_classes: Optional[Tuple[Dict[type, str], Dict[str, type]]] = None


class NotCompact(Exception):
    """A value the compact form does not carry: the message is pickled instead."""


class NotOurs(ValueError):
    """A compact frame that does not follow the form: its connection is dropped."""


def data_classes() -> Tuple[Dict[type, str], Dict[str, type]]:
    """The protocol's data classes by class and by name. Each pickles as ``__new__`` and its
    ``__dict__`` (no ``__reduce__``, ``__getstate__``, ``__setstate__`` or ``__slots__`` of its own, all
    checked here), which is the one rebuilding the compact form does too."""
    global _classes
    if _classes is None:
        by_class: Dict[type, str] = {}
        for (module, name), cls in allowed_globals().items():
            if (
                name in _DATA_CLASSES
                and isinstance(cls, type)
                and not any(own in vars(base) for base in cls.__mro__[:-1] for own in _OWN_PICKLING)
            ):
                by_class[cls] = f"{module}.{name}"
        _classes = (by_class, {name: cls for cls, name in by_class.items()})
    return _classes


def make_dumps(pickled: Encode, handle_of: Optional[HandleOf] = None) -> Encode:
    """An encoder that sends a request's call (``call``, ``fn``, ``attach`` ...) or a successful reply in
    the compact form when every value has one, else as ``pickled`` does. ``handle_of`` names the objects
    that travel as handles (a client's proxies), and must agree with the end's ``persistent_id``; an
    end without it sends no objects compactly (the fabric's handles carry a type name, and its arrays
    may lie in shared memory), only plain values."""
    by_class = data_classes()[0]

    def encode(value: Any) -> Any:
        kind = type(value)
        if kind in SCALARS:
            if kind is bytes and len(value) > MOST_BYTES:
                raise NotCompact
            return value
        if kind is tuple:
            return (TUPLE, tuple([encode(item) for item in value]))
        if kind is list:
            return [encode(item) for item in value]
        if kind is dict:
            if not all(type(key) is str for key in value):
                raise NotCompact
            return {key: encode(item) for key, item in value.items()}
        if handle_of is None:
            raise NotCompact
        handle = handle_of(value)
        if handle is not None:
            return (HANDLE, handle)
        name = by_class.get(kind)
        if name is None:
            raise NotCompact
        return (DATA, name, encode(vars(value)))

    def dumps(message: Tuple[Any, ...]) -> bytes:
        head, number, third, body = message
        try:
            if head == "req":
                return MARK + marshal.dumps((head, number, third, encode(body)), MARSHAL_VERSION)
            if third is True and type(body) in SCALARS:
                return MARK + marshal.dumps((head, number, third, encode(body)), MARSHAL_VERSION)
        except (NotCompact, RecursionError, ValueError):
            pass
        return pickled(message)

    return dumps


def make_loads(unpickled: Decode, resolve: Optional[Resolve] = None) -> Decode:
    """A decoder for both forms: a compact frame checked against the form (``NotOurs``), handles given
    to ``resolve`` (an end without it refuses them), anything else to ``unpickled``."""
    by_name: Dict[str, Any] = data_classes()[1]

    def decode(value: Any, head: Tuple[Any, ...]) -> Any:
        kind = type(value)
        if kind in SCALARS:
            return value
        if kind is list:
            return [decode(item, head) for item in value]
        if kind is dict:
            if not all(type(key) is str for key in value):
                raise NotOurs("a dict with a key that is not a string")
            return {key: decode(item, head) for key, item in value.items()}
        if kind is not tuple or not value or type(value[0]) is not int:
            raise NotOurs(f"a value of type {kind.__name__}")
        tag = value[0]
        if tag == TUPLE and len(value) == 2 and type(value[1]) is tuple:
            return tuple([decode(item, head) for item in value[1]])
        if tag == HANDLE and len(value) == 2 and type(value[1]) is int and resolve is not None:
            return resolve(value[1])
        if tag == DATA and len(value) == 3 and type(value[1]) is str and type(value[2]) is dict:
            cls = by_name.get(value[1])
            if cls is None:
                raise PayloadRefused(head, value[1][:96])
            obj = cls.__new__(cls)
            obj.__dict__.update(decode(value[2], head))
            return obj
        raise NotOurs(f"a tuple tagged {tag!r}")

    def loads(frame: bytes) -> Any:
        if frame[:1] != MARK:
            return unpickled(frame)
        message = marshal.loads(memoryview(frame)[1:])
        if type(message) is not tuple or len(message) != 4 or type(message[1]) is not int:
            raise NotOurs("not a message")
        head = message[:3]
        if head[0] == "req" and type(head[2]) is str:
            return (*head, decode(message[3], head))
        if head[0] == "rep" and head[2] is True and type(message[3]) in SCALARS:
            return message
        raise NotOurs("not a request or a reply")

    return loads
