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

The form (a frame is ``marshal.dumps`` of the message, version 2: its first byte, ``(``, is never a
pickle's): a request is ``("req", id, kind, [values...])``, its payload's values in a list, or for a
method call on a proxy ``("req", id, "call", handle, name, [arguments...], {keyword: value})``, and a
reply ``("rep", id, True, value)`` with a plain value. A value is

- ``None``, a ``bool``, ``int``, ``float``, ``str`` or (up to ``MOST_BYTES``) ``bytes`` as itself; a list
  as a list of values; a dict with ``str`` keys as a dict of values;
- ``("t", [values...])`` for a tuple (every tuple is tagged, so a value is never mistaken for one),
  ``("h", number)`` for an object the fabric holds, and ``("d", "module.Class", {attribute: value})`` for
  a data object, rebuilt as pickle rebuilds it (``__new__``, then its ``__dict__``).
"""

from __future__ import annotations

import marshal
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from datadist_sim.fabric.bounds import check_compact
from datadist_sim.fabric.wire import _DATA_CLASSES, PayloadRefused, allowed_globals

MARSHAL_VERSION = 2
"""Read by every Python 3 (the two ends need not run the same one), and the quickest: it keeps no table
of references."""
FIRST = b"("[0]
"""A compact frame's first byte: ``marshal``'s code for a tuple (a pickle's is ``PROTO``, 0x80)."""
TUPLE, HANDLE, DATA = "t", "h", "d"
SCALARS = frozenset({type(None), bool, int, float, str, bytes})
PLAIN = SCALARS - {bytes}
"""Scalars taken as they are (bytes are counted first)."""
MOST_BYTES = 65536
"""A message holding more bytes than this is pickled (one copy fewer of large bytes)."""

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
    """An encoder that sends a request (``call``, ``fn``, ``attach`` ...) or a successful reply in the
    compact form when every value has one, else as ``pickled`` does. ``handle_of`` names the objects that
    travel as handles (a client's proxies), and must agree with the end's ``persistent_id``; an end
    without it sends no objects compactly (the fabric's handles carry a type name, and its arrays may lie
    in shared memory), only plain values. Loops, not comprehensions: this runs on every call."""
    by_class = data_classes()[0]

    def encode_all(values: Iterable[Any]) -> List[Any]:
        out: List[Any] = []
        for value in values:
            kind = type(value)
            out.append(value if kind in PLAIN else encode_one(value, kind))
        return out

    def encode_one(value: Any, kind: type) -> Any:
        if kind is bytes:
            if len(value) > MOST_BYTES:
                raise NotCompact
            return value
        if kind is tuple:
            return (TUPLE, encode_all(value))
        if kind is list:
            return encode_all(value)
        if kind is dict:
            out: Dict[str, Any] = {}
            for key, item in value.items():
                if type(key) is not str:
                    raise NotCompact
                out[key] = item if type(item) in PLAIN else encode_one(item, type(item))
            return out
        handle = None if handle_of is None else handle_of(value)
        if handle is not None:
            return (HANDLE, handle)
        name = by_class.get(kind) if handle_of is not None else None
        if name is None:
            raise NotCompact
        state = vars(value)
        for key, item in state.items():  # plain attributes (a key's): the dict itself is sent
            if type(key) is not str or type(item) not in PLAIN:
                return (DATA, name, encode_one(state, dict))
        return (DATA, name, state)

    def dumps(message: Tuple[Any, ...]) -> bytes:
        head, number, third, body = message
        try:
            if head == "req":
                if third == "call" and handle_of is not None:  # a method call on a proxy: laid out flat
                    target, name, args, kwargs = body
                    handle = handle_of(target)
                    if handle is not None and type(name) is str and type(args) is tuple:
                        rest = encode_one(kwargs, dict) if kwargs else {}
                        call = (head, number, third, handle, name, encode_all(args), rest)
                        return marshal.dumps(call, MARSHAL_VERSION)
                return marshal.dumps((head, number, third, encode_all(body)), MARSHAL_VERSION)
            small = type(body) is not bytes or len(body) <= MOST_BYTES
            if third is True and type(body) in SCALARS and small:
                return marshal.dumps(message, MARSHAL_VERSION)
        except (NotCompact, RecursionError):
            pass
        return pickled(message)

    return dumps


def make_loads(unpickled: Decode, resolve: Optional[Resolve] = None, *, bounded: bool = False) -> Decode:
    """A decoder for both forms: a compact frame checked against the form (``NotOurs``), handles given
    to ``resolve`` (an end without it refuses them), anything else to ``unpickled``. ``bounded`` (the
    fabric's ends): a compact frame's sizes are checked before ``marshal`` allocates by them
    (``bounds.check_compact``)."""
    by_name: Dict[str, Any] = data_classes()[1]

    def decode_all(values: List[Any], head: Tuple[Any, ...]) -> List[Any]:
        out: List[Any] = []
        for value in values:
            kind = type(value)
            out.append(value if kind in PLAIN else decode_one(value, kind, head))
        return out

    def decode_one(value: Any, kind: type, head: Tuple[Any, ...]) -> Any:
        if kind is bytes:
            return value
        if kind is list:
            return decode_all(value, head)
        if kind is dict:
            out: Dict[str, Any] = {}
            for key, item in value.items():
                if type(key) is not str:
                    raise NotOurs("a dict with a key that is not a string")
                out[key] = item if type(item) in PLAIN else decode_one(item, type(item), head)
            return out
        if kind is not tuple or len(value) < 2:
            raise NotOurs(f"a value of type {kind.__name__}")
        tag = value[0]
        if tag == TUPLE and len(value) == 2 and type(value[1]) is list:
            return tuple(decode_all(value[1], head))
        if tag == HANDLE and len(value) == 2 and type(value[1]) is int and resolve is not None:
            return resolve(value[1])
        if tag == DATA and len(value) == 3 and type(value[1]) is str and type(value[2]) is dict:
            cls = by_name.get(value[1])
            if cls is None:
                raise PayloadRefused(head, value[1][:96])
            state = value[2]
            for key, item in state.items():  # plain attributes (a key's): the dict read is used
                if type(key) is not str or type(item) not in PLAIN:
                    state = decode_one(state, dict, head)
                    break
            obj = cls.__new__(cls)
            obj.__dict__.update(state)
            return obj
        raise NotOurs(f"a tuple tagged {tag!r}")

    def loads(frame: bytes) -> Any:
        if not frame or frame[0] != FIRST:
            return unpickled(frame)
        if bounded:
            check_compact(frame)
        message = marshal.loads(frame)
        if type(message) is not tuple or len(message) not in (4, 7) or type(message[1]) is not int:
            raise NotOurs("not a message")
        head, body = message[:3], message[3]
        if len(message) == 7:  # a method call on an object the fabric holds, laid out flat
            name, args, kwargs = message[4:]
            if head[0] != "req" or head[2] != "call" or type(body) is not int or resolve is None:
                raise NotOurs("not a call")
            if type(name) is not str or type(args) is not list or type(kwargs) is not dict:
                raise NotOurs("not a call")
            rest = decode_one(kwargs, dict, head) if kwargs else {}
            return (*head, (resolve(body), name, tuple(decode_all(args, head)), rest))
        if head[0] == "req" and type(head[2]) is str and type(body) is list:
            return (*head, tuple(decode_all(body, head)))
        if head[0] == "rep" and head[2] is True and type(body) in SCALARS:
            return message
        raise NotOurs("not a request or a reply")

    return loads
