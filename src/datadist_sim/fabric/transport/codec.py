"""The fabric's messages as msgpack, through msgspec: a decoder that cannot name a type.

A frame is one msgpack value, decoded against a typed schema: a request ``[0, id, kind, [values...]]``,
a method call ``[2, id, target, name, [arguments...], {keyword: value}]`` or a reply
``[1, id, ok, value]`` (``Request``, ``Call``, ``Reply``: tagged ``msgspec.Struct`` s). A value is
what msgpack holds by itself (``None``, booleans, integers, floats, ``str``, ``bytes``, lists, maps),
and everything else the protocol carries is an extension value (a code and bytes) of ours:

======  =====================================================================================
code    value
======  =====================================================================================
1       a tuple: a list of values
2       a data object: ``["module.Class", {attribute: value}]``, rebuilt as pickle rebuilds it
        (``__new__``, then its ``__dict__``) and only for the faces' data classes (``_DATA_CLASSES``)
3       an enum member: ``["module.Enum", value]``, only of the faces' enums
4       a numpy array of a plain numeric dtype: a 2-byte length, ``[dtype name, shape]``, the bytes
        (``fabric/transport/arrays.py`` builds it over bytes of its own)
5-7     a numpy scalar, a numpy dtype, an integer past 64 bits (its bytes)
8-10    ``range``, ``slice``, ``complex``
11      a map whose keys are not all strings: its keys and values, flat
20-29   an end's object handles (``FabricClient``, ``Session``: a proxy, a callback, a view of shared
        memory)
======  =====================================================================================

Why this is safe by construction: msgspec's decoder builds only the schema's types and msgpack's own
(and ``datetime`` for msgpack's timestamp), never a type the frame names, and it checks each size a
frame declares (a string's, a list's, a map's, an extension's) against the bytes the frame still
holds before it allocates by it ("Input data was truncated"), so what a frame can make it allocate is
a small multiple of the frame's own length (tested in ``tests/reliability/test_fabric_attacks.py``).
Each extension value is decoded here, from a fixed table, by the same rules. A value the tables do not
hold is a ``TypeRefused``: sending one fails that call at the sender with a ``TypeError``; a frame that
holds one gets its request answered with that ``TypeError`` (``PayloadRefused``), and a frame off the
schema drops its connection.
"""

from __future__ import annotations

import enum
import struct
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import msgspec
import numpy as np

from datadist_sim.fabric.transport.arrays import DTYPES, build_array, build_dtype, build_scalar
from datadist_sim.fabric.transport.exceptions import PayloadRefused, TypeRefused, refused_error

Ext = msgspec.msgpack.Ext
TUPLE, DATA, ENUM, ARRAY, SCALAR, DTYPE, BIGINT, RANGE, SLICE, COMPLEX, PAIRS = range(1, 12)
HANDLE, CALLBACK, REF, SHM = range(20, 24)
"""The ends' own codes: a client's proxy (its handle) and layer synchronizer (a callback number), and
the fabric's object (``[handle, type name]``) and view of shared memory (``memfile.ViewRef``)."""
PLAIN = frozenset({type(None), bool, int, float, str, bytes})
"""Values msgpack holds as they are (an ``int`` within 64 bits: a larger one is retried as ``BIGINT``)."""
_SMALL = frozenset({type(None), bool, float, str, bytes})
_LENGTH = struct.Struct("<H")

_DATA_CLASSES = frozenset(
    {
        "BlocksCacheKey",
        "Cache",  # a client's own ``Cache.create_cpu_cache`` (host memory it owns) travels by value
        "CacheDesc",
        "CacheKey",
        "CacheKeyByIdAndIndex",
        "KvCache",  # likewise ``KvCache.create_cpu_cache``
        "LLMClusterInfo",
        "LlmConfig",
        "MemInfo",
        "Status",
        "Tensor",
        "TensorDesc",
        "TransferConfig",
        "TransferWithCacheKeyConfig",
    }
)
_OWN_PICKLING = ("__reduce_ex__", "__reduce__", "__getstate__", "__setstate__", "__slots__")


REQUEST, REPLY, CALL = 0, 1, 2
"""The messages' tags. The encoder writes each message as the array its struct reads (the tag, then the
fields in order: the same bytes, without building the struct)."""


class Request(msgspec.Struct, array_like=True, forbid_unknown_fields=True, tag=REQUEST):
    id: int
    kind: str
    payload: Tuple[Any, ...]


class Reply(msgspec.Struct, array_like=True, forbid_unknown_fields=True, tag=REPLY):
    id: int
    ok: bool
    value: Any


class Call(msgspec.Struct, array_like=True, forbid_unknown_fields=True, tag=CALL):
    """A method call on an object the other end holds (``("req", id, "call", (target, name, args,
    kwargs))``), laid out flat: the commonest request, so its arguments need no tuple of their own."""

    id: int
    target: Any
    name: str
    args: Tuple[Any, ...]
    kwargs: Dict[str, Any]


class _RequestHead(msgspec.Struct, array_like=True, forbid_unknown_fields=True, tag=REQUEST):
    id: int
    kind: str
    payload: msgspec.Raw


class _ReplyHead(msgspec.Struct, array_like=True, forbid_unknown_fields=True, tag=REPLY):
    id: int
    ok: bool
    value: msgspec.Raw


class _CallHead(msgspec.Struct, array_like=True, forbid_unknown_fields=True, tag=CALL):
    id: int
    target: msgspec.Raw
    name: msgspec.Raw
    args: msgspec.Raw
    kwargs: msgspec.Raw


class NotOurs(ValueError):
    """A frame off the protocol's schema: its connection is dropped."""


Own = Callable[[Any], Optional[Ext]]
"""An end's own forms: the extension value an object travels as (a handle), or None."""
Builders = Dict[int, Callable[[Any], Any]]
"""An end's own extension codes, each with what makes an object of its decoded value."""
Encode = Callable[[Tuple[Any, ...]], bytes]
Decode = Callable[[bytes], Tuple[Any, ...]]

_tables: Optional[Tuple[Dict[type, str], Dict[str, type], Dict[type, str], Dict[str, type]]] = None


def tables() -> Tuple[Dict[type, str], Dict[str, type], Dict[type, str], Dict[str, type]]:
    """The faces' data classes and enums, by class and by ``module.Name``; resolved once, so decoding a
    frame never imports anything. A data class rebuilds from its ``__dict__`` only (none has pickling of
    its own, checked here)."""
    global _tables
    if _tables is None:
        from datadist_sim import llm_datadist, llm_datadist_v1

        data: Dict[type, str] = {}
        enums: Dict[type, str] = {}
        for face in (llm_datadist, llm_datadist_v1):
            for name in getattr(face, "__all__", dir(face)):
                value = getattr(face, name, None)
                if not isinstance(value, type):
                    continue
                full = f"{value.__module__}.{value.__qualname__}"
                if issubclass(value, enum.Enum):
                    enums[value] = full
                elif name in _DATA_CLASSES and not any(
                    own in vars(base) for base in value.__mro__[:-1] for own in _OWN_PICKLING
                ):
                    data[value] = full
        _tables = (data, {n: c for c, n in data.items()}, enums, {n: c for c, n in enums.items()})
    return _tables


def own_form(code: int, value: Any) -> Ext:
    """An end's own extension value (``HANDLE`` ... ``SHM``) holding ``value`` (plain values only)."""
    return Ext(code, _pack(value))


_pack = msgspec.msgpack.Encoder().encode


def type_name(value: Any) -> str:
    kind = type(value)
    return f"{kind.__module__}.{kind.__qualname__}"


def make_dumps(own: Optional[Own] = None, handled: Tuple[type, ...] = ()) -> Encode:
    """A message encoder; ``own`` gives this end's handles. It is asked about a value of a type the
    tables do not hold, and about a data object only of a class in ``handled`` (the fabric's caches go
    by handle while they have an id, by value after): a data object of any other class is sent by value
    without asking. A value of a type the protocol does not carry raises ``TypeError`` (naming it) and
    nothing is sent. Loops, not comprehensions: this runs on every call."""
    tabled, _, enums, _ = tables()
    data = {cls: name for cls, name in tabled.items() if not issubclass(cls, handled)}
    asked = {cls: name for cls, name in tabled.items() if issubclass(cls, handled)}
    pack = msgspec.msgpack.Encoder().encode

    def walk_all(values: Any, plain: frozenset) -> List[Any]:  # type: ignore[type-arg]
        out: List[Any] = []
        for value in values:
            out.append(value if type(value) in plain else walk(value, plain))
        return out

    def walk(value: Any, plain: frozenset) -> Any:  # type: ignore[type-arg]
        kind = type(value)
        if kind is tuple:
            return Ext(TUPLE, pack(walk_all(value, plain)))
        if kind is list:
            return walk_all(value, plain)
        if kind is dict:
            out: Dict[str, Any] = {}
            for key, item in value.items():
                if type(key) is not str:
                    flat: List[Any] = []
                    for pair in value.items():
                        flat.extend(walk_all(pair, plain))
                    return Ext(PAIRS, pack(flat))
                out[key] = item if type(item) in plain else walk(item, plain)
            return out
        if kind is int:  # only when retrying a message that holds one past 64 bits
            if -(1 << 63) <= value < (1 << 64):
                return value
            return Ext(BIGINT, pack(value.to_bytes((value.bit_length() + 8) // 8, "little", signed=True)))
        name = data.get(kind)
        if name is None:
            name = enums.get(kind)
            if name is not None:
                return Ext(ENUM, pack((name, value.value)))
            if own is not None:
                found = own(value)
                if found is not None:
                    return found
            name = asked.get(kind)
        if name is not None:
            state = vars(value)
            for item in state.values():  # plain attributes (a key's): the dict itself is sent
                if type(item) not in plain:
                    state = walk(state, plain)
                    break
            return Ext(DATA, pack((name, state)))
        if kind is np.ndarray and value.dtype.str in DTYPES:
            head = pack([value.dtype.str, list(value.shape)])
            return Ext(ARRAY, b"".join((_LENGTH.pack(len(head)), head, np.ascontiguousarray(value).data)))
        if isinstance(value, np.generic) and value.dtype.str in DTYPES:
            return Ext(SCALAR, pack([value.dtype.str, value.tobytes()]))
        if isinstance(value, np.dtype) and value.str in DTYPES and value.fields is None:
            return Ext(DTYPE, pack(value.str))
        if kind is range:
            return Ext(RANGE, pack(walk_all((value.start, value.stop, value.step), plain)))
        if kind is slice:
            return Ext(SLICE, pack(walk_all((value.start, value.stop, value.step), plain)))
        if kind is complex:
            return Ext(COMPLEX, pack([value.real, value.imag]))
        raise TypeRefused(type_name(value))

    def encode(message: Tuple[Any, ...], plain: frozenset) -> bytes:  # type: ignore[type-arg]
        head, number, third, body = message
        if head == "req":
            if third == "call" and len(body) == 4 and type(body[1]) is str and type(body[2]) is tuple:
                target, name, args, kwargs = body
                if type(kwargs) is dict and (not kwargs or _text_keys(kwargs)):
                    target = target if type(target) in plain else walk(target, plain)
                    keywords = walk(kwargs, plain) if kwargs else kwargs
                    return pack((CALL, number, target, name, walk_all(args, plain), keywords))
            return pack((REQUEST, number, third, walk_all(body, plain)))
        return pack((REPLY, number, bool(third), body if type(body) in plain else walk(body, plain)))

    def dumps(message: Tuple[Any, ...]) -> bytes:
        try:
            try:
                return encode(message, PLAIN)
            except OverflowError:  # an integer past 64 bits: walk again, sizing each integer
                return encode(message, _SMALL)
        except TypeRefused as refused:
            what = "an argument" if message[0] == "req" else "a reply"
            raise refused_error(what, refused.type_name, "sent") from None

    return dumps


def _text_keys(mapping: Dict[Any, Any]) -> bool:
    return all(type(key) is str for key in mapping)


def make_loads(builders: Optional[Builders] = None) -> Decode:
    """A message decoder: ``("req", id, kind, payload)`` or ``("rep", id, ok, value)``; ``PayloadRefused``
    for a value the protocol does not carry, ``NotOurs`` (or msgspec's ``DecodeError``) for a frame off
    its schema. ``builders`` are this end's own extension codes (an end without them refuses them)."""
    _, data_by_name, _, enums_by_name = tables()
    own = builders or {}

    def hook(code: int, raw: memoryview) -> Any:
        if code == TUPLE:
            return tuples(raw)
        if code == DATA:
            name, state = named(raw)
            cls = data_by_name.get(name)
            if cls is None:
                raise TypeRefused(name)
            obj: Any = cls.__new__(cls)  # type: ignore[call-overload]
            obj.__dict__.update(state)
            return obj
        if code == ENUM:
            name, number = tagged(raw)
            found = enums_by_name.get(name)
            if found is None:
                raise TypeRefused(name)
            try:
                return found(number)
            except ValueError:
                raise TypeRefused(f"{name}({number!r})") from None
        if code == ARRAY:
            size = _LENGTH.unpack_from(raw)[0] if len(raw) >= 2 else len(raw)
            dtype, shape = array_heads(raw[2 : 2 + size])
            return build_array(dtype, shape, bytearray(raw[2 + size :]))
        build = own.get(code)
        if build is not None:
            return build(values(raw))
        value = values(raw)
        if code == SCALAR and type(value) is list and len(value) == 2:
            return build_scalar(value[0], value[1])
        if code == DTYPE:
            return build_dtype(value)
        if code == BIGINT and type(value) is bytes:
            return int.from_bytes(value, "little", signed=True)
        if code in (RANGE, SLICE, COMPLEX) and type(value) is list and len(value) in (2, 3):
            try:
                if code == RANGE:
                    return range(*value)
                if code == SLICE:
                    return slice(*value)
                return complex(*value)
            except TypeError:
                raise NotOurs("a malformed range, slice or complex") from None
        if code == PAIRS and type(value) is list and len(value) % 2 == 0:
            try:
                return dict(zip(value[::2], value[1::2]))
            except TypeError:  # an unhashable key
                raise NotOurs("a map with an unhashable key") from None
        raise NotOurs(f"an extension value of code {code}")

    # each form decoded against its own schema (msgspec checks the shapes and key types)
    tuples = msgspec.msgpack.Decoder(Tuple[Any, ...], ext_hook=hook).decode
    named = msgspec.msgpack.Decoder(Tuple[str, Dict[str, Any]], ext_hook=hook).decode
    tagged = msgspec.msgpack.Decoder(Tuple[str, Union[int, str]]).decode
    array_heads = msgspec.msgpack.Decoder(Tuple[str, Tuple[int, ...]]).decode
    values = msgspec.msgpack.Decoder(ext_hook=hook).decode
    messages = msgspec.msgpack.Decoder(Union[Call, Request, Reply], ext_hook=hook).decode
    heads = msgspec.msgpack.Decoder(Union[_CallHead, _RequestHead, _ReplyHead]).decode

    def loads(frame: bytes) -> Tuple[Any, ...]:
        try:
            message = messages(frame)
        except TypeRefused as refused:
            try:
                head = heads(frame)
            except msgspec.DecodeError:
                raise NotOurs("a frame off the protocol's schema") from None
            if isinstance(head, _CallHead):
                raise PayloadRefused(("req", head.id, "call"), refused.type_name) from None
            if isinstance(head, _RequestHead):
                raise PayloadRefused(("req", head.id, head.kind), refused.type_name) from None
            raise PayloadRefused(("rep", head.id, head.ok), refused.type_name) from None
        kind = type(message)
        if kind is Call:
            call: Call = message  # type: ignore[assignment]
            return ("req", call.id, "call", (call.target, call.name, call.args, call.kwargs))
        if kind is Request:
            return ("req", message.id, message.kind, message.payload)  # type: ignore[union-attr]
        return ("rep", message.id, message.ok, message.value)  # type: ignore[union-attr]

    return loads
