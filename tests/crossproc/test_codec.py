"""The fabric's codec (``fabric/transport/codec.py``): what it carries and how it comes back, what it
refuses at the sender, what a hostile frame gets (its request refused, or its connection dropped), and
that decoding names no type and imports nothing."""

from __future__ import annotations

import builtins
import socket
import sys
from typing import Any, Iterator, Tuple

import msgspec
import numpy as np
import pytest

from datadist_sim._status import LLMException, LLMStatusCode
from datadist_sim.fabric.transport import codec
from datadist_sim.fabric.transport.channel import Channel
from datadist_sim.fabric.transport.exceptions import (
    PayloadRefused,
    RemoteError,
    TypeRefused,
    pack_exception,
    unpack_exception,
)
from datadist_sim.fabric.transport.wire import send_frame
from datadist_sim.llm_datadist import (
    BlocksCacheKey,
    CacheDesc,
    CacheKey,
    CacheKeyByIdAndIndex,
    DataType,
    LLMRole,
)

Ext = msgspec.msgpack.Ext
pack = msgspec.msgpack.encode


class Handle:
    """Stands for a client's proxy: it travels as the client's ``HANDLE`` form."""

    def __init__(self, number: int) -> None:
        self.number = number


class NotCarried:
    """A type of the client's own that no face takes."""


class Payload:
    """Would run ``os.system`` if anyone unpickled it."""

    def __reduce__(self) -> Any:
        import os

        return (os.system, ("true",))


held = {3: "the cache manager", 5: "a cache"}


def _own(value: Any) -> Any:
    return codec.own_form(codec.HANDLE, value.number) if type(value) is Handle else None


def _client_dumps() -> codec.Encode:
    return codec.make_dumps(_own)


def _fabric_loads() -> codec.Decode:
    return codec.make_loads({codec.HANDLE: held.__getitem__})


def _array(dtype: str, shape: Any, data: bytes) -> Ext:
    head = pack([dtype, shape])
    return Ext(codec.ARRAY, len(head).to_bytes(2, "little") + head + data)


def _request(*values: Any, rid: int = 7) -> bytes:
    """A request frame as a hostile peer may write it: any values, extension values included."""
    return pack([0, rid, "call", list(values)])


def test_the_protocols_values_cross_whole_and_keep_their_types() -> None:
    sent = (
        CacheKey(1, 2),
        CacheDesc(1, [2, 4], DataType.DT_FLOAT16),
        LLMRole.PROMPT,
        (1, (2, [3, (4,)]), {"a": (5,)}),
        {1: "one", (2, 3): [4]},
        [2**80, -(2**90), 2**64 - 1, -(2**63)],
        range(1, 9, 2),
        slice(1, None),
        1 - 2j,
        np.arange(6, dtype=np.float16).reshape(2, 3),
        np.float32(2.5),
        np.dtype(">i4"),
        b"\x00bytes",
        None,
        True,
        0.5,
    )
    _, _, _, got = codec.make_loads()(codec.make_dumps()(("req", 1, "call", sent)))
    assert [type(value) for value in got] == [type(value) for value in sent]
    assert (vars(got[0]), vars(got[1])) == (vars(sent[0]), vars(sent[1]))
    assert got[2] is LLMRole.PROMPT
    assert vars(got[1])["_data_type"] is DataType.DT_FLOAT16
    assert got[3:9] == sent[3:9]
    assert type(got[3][1][1][1]) is tuple
    assert type(got[3][2]["a"]) is tuple
    assert (got[9].dtype, got[9].tolist()) == (np.float16, sent[9].tolist())
    assert got[9].flags.writeable
    assert (got[10], got[10].dtype, got[11]) == (np.float32(2.5), np.float32, np.dtype(">i4"))
    assert got[12:] == sent[12:]


def test_a_clients_own_cpu_caches_and_ranges_cross_as_the_vendor_samples_send_them() -> None:
    """The vendor's pull_blocks sample swaps into ``Cache.create_cpu_cache`` (a cache the client builds
    itself, so it travels by value) and switch_role / transfer_cache_async pass ``range(n)`` lists."""
    from datadist_sim.llm_datadist import Cache, KvCache, Placement

    desc = CacheDesc(1, [2, 4], DataType.DT_FLOAT, Placement.HOST)
    host = np.zeros((2, 4), np.float32)
    cache = Cache.create_cpu_cache(desc, [host.ctypes.data])
    kv = KvCache.create_cpu_cache(desc, [host.ctypes.data])
    sent_cache, sent_kv, layers = codec.make_loads()(
        codec.make_dumps()(("req", 1, "call", (cache, kv, range(2))))
    )[3]
    assert (type(sent_cache), sent_cache.tensor_addrs) == (Cache, [host.ctypes.data])
    assert type(sent_kv) is KvCache
    assert layers == range(2)


def test_a_calls_keywords_handles_and_a_data_object_with_nested_attributes_arrive_whole() -> None:
    key = BlocksCacheKey(4, 1)
    key.extra = [1, (2, Handle(5))]  # type: ignore[attr-defined]  # an attribute that is not plain
    message = ("req", 2, "call", (Handle(3), "pull_blocks", ([0, 1],), {"key": key, "cache": Handle(5)}))
    _, _, _, (target, name, args, kwargs) = _fabric_loads()(_client_dumps()(message))
    assert (target, name, args) == ("the cache manager", "pull_blocks", ([0, 1],))
    assert kwargs["cache"] == "a cache"
    assert type(kwargs["key"]) is BlocksCacheKey
    assert vars(kwargs["key"]) == {**vars(BlocksCacheKey(4, 1)), "extra": [1, (2, "a cache")]}


@pytest.mark.parametrize(
    ("value", "named"),
    [
        (NotCarried(), "test_codec.NotCarried"),
        (Payload(), "test_codec.Payload"),
        (print, "builtins.builtin_function_or_method"),
        (np.array([object()]), "numpy.ndarray"),
        (np.zeros(2, dtype=[("a", "<i4")]), "numpy.ndarray"),
        (np.zeros(2).view(np.matrix), "numpy.matrix"),
        ({1, 2}, "builtins.set"),
    ],
    ids=["own-class", "reduce-to-code", "function", "object-array", "structured-array", "subclass", "set"],
)
def test_a_value_the_protocol_does_not_carry_is_a_type_error_at_the_sender_naming_it(
    value: Any, named: str
) -> None:
    with pytest.raises(TypeError, match=rf"an argument names \S*{named}: refused, nothing of it sent"):
        codec.make_dumps()(("req", 1, "call", (1, [value])))


@pytest.mark.parametrize(
    ("value", "named"),
    [
        (Ext(codec.DATA, pack(["posix.system", {"command": "true"}])), "posix.system"),
        (
            Ext(codec.DATA, pack(["datadist_sim.fabric.host.session.Session", {}])),
            "datadist_sim.fabric.host.session.Session",
        ),
        (Ext(codec.ENUM, pack(["os.PathLike", 1])), "os.PathLike"),
        (Ext(codec.ENUM, pack(["datadist_sim.llm_datadist.configs.LLMRole", 99])), "LLMRole"),
        (_array("|O", [1], b"\x00" * 8), "numpy.ndarray?of?dtype"),
        (_array("<f4", [3], b"\x00" * 8), "numpy.ndarray?whose?bytes"),
        (Ext(codec.DTYPE, pack("|V8")), "numpy.dtype"),
    ],
    ids=["code", "fabric-class", "enum-outside", "enum-value", "object-array", "short-array", "void-dtype"],
)
def test_a_frame_naming_what_the_tables_do_not_hold_refuses_its_request_only_and_keeps_its_envelope(
    value: Any, named: str
) -> None:
    with pytest.raises(PayloadRefused) as refused:
        _fabric_loads()(_request(1, [value]))
    assert refused.value.head == ("req", 7, "call")
    assert named in refused.value.type_name
    assert isinstance(refused.value.error(), TypeError)


@pytest.mark.parametrize(
    "frame",
    [
        b"",
        b"\x80\x05N.",  # a pickle
        pack([2, 1, "call", []]),  # no such message
        pack([0, "1", "call", []]),  # an id that is not an int
        pack([0, 1, "call", {}]),  # a payload that is not a list
        pack([0, 1, "call", [], 5]),  # one field too many
        pack([0, 1, "call", []]) + b"\xc0",  # trailing bytes
        _request(Ext(99, b"")),  # a code nobody defines
        _request(Ext(codec.REF, pack([1, "Cache"]))),  # the fabric's own code, sent to the fabric
        _request(Ext(codec.TUPLE, pack({"a": 1}))),  # a malformed tuple
        _request(
            Ext(codec.DATA, pack([codec.tables()[0][CacheKey], {1: 2}]))
        ),  # a data object whose state has a non-str key
        _request(Ext(codec.SLICE, pack([1, 2, 3, 4]))),
        _request(Ext(codec.PAIRS, pack([[1], 2]))),  # an unhashable key
        _request(Ext(codec.TUPLE, b"\x91" * 10000 + b"\xc0")),  # nesting past the decoder's depth
    ],
)
def test_a_frame_off_the_schema_fails_as_a_bad_frame_not_as_a_refused_request(frame: bytes) -> None:
    """The fabric drops a connection whose frame does not decode (``loop._take``); a refusal would
    instead answer it and go on."""
    with pytest.raises((ValueError, RecursionError)) as failed:  # NotOurs and DecodeError are ValueErrors
        _fabric_loads()(frame)
    assert not isinstance(failed.value, PayloadRefused)


def test_a_method_call_travels_flat_and_a_refused_argument_in_it_keeps_its_envelope() -> None:
    message = ("req", 4, "call", (Handle(3), "pull_cache", (CacheKey(1, 2), Handle(5), 0), {"x": (1,)}))
    frame = _client_dumps()(message)
    assert frame[:2] == b"\x96\x02"  # an array of six, tagged 2: ``codec.Call``
    _, rid, kind, (target, name, args, kwargs) = _fabric_loads()(frame)
    assert (rid, kind, target, name, args[1:], kwargs) == (
        4,
        "call",
        "the cache manager",
        "pull_cache",
        ("a cache", 0),
        {"x": (1,)},
    )
    hostile = pack(
        [2, 8, Ext(codec.HANDLE, pack(3)), "pull_cache", [Ext(codec.DATA, pack(["posix.system", {}]))], {}]
    )
    with pytest.raises(PayloadRefused) as refused:
        _fabric_loads()(hostile)
    assert refused.value.head == ("req", 8, "call")
    with pytest.raises(msgspec.ValidationError, match="at `key`"):  # keywords are text: off the schema
        _fabric_loads()(pack([2, 8, 1, "f", [], {1: 2}]))


def test_an_end_without_handles_refuses_a_handle_as_a_bad_frame() -> None:
    with pytest.raises(codec.NotOurs):
        codec.make_loads()(_request(Ext(codec.HANDLE, pack(3))))


def test_decoding_a_frame_imports_nothing() -> None:
    """The names a frame may use are resolved once, beforehand: decoding one never runs the import
    machinery, whatever it names (a class of the tables included)."""
    loads = codec.make_loads()
    frame = codec.make_dumps()(
        ("req", 1, "call", (CacheKeyByIdAndIndex(1, 2, 3), DataType.DT_FLOAT16, np.int64(7)))
    )
    hostile = _request(Ext(codec.DATA, pack(["posix.system", {}])))
    loads(frame)  # whatever is resolved once, is resolved now

    def no_import(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"decoding imported {args[0]!r}")

    real_import = builtins.__import__
    builtins.__import__ = no_import
    try:
        key, dtype, number = loads(frame)[3]
        with pytest.raises(PayloadRefused, match=r"posix\.system"):
            loads(hostile)
    finally:
        builtins.__import__ = real_import
    assert (key.cluster_id, key.cache_id, key.batch_index, dtype, number) == (1, 2, 3, DataType.DT_FLOAT16, 7)


def test_an_exception_comes_back_as_its_own_class_only_from_the_project_or_builtins() -> None:
    assert "this" not in sys.modules
    rebuilt = unpack_exception(("this", "Zen", ("hello",), {}))
    assert isinstance(rebuilt, RemoteError)
    assert "this" not in sys.modules  # nothing was imported, so nothing ran
    assert isinstance(unpack_exception(("os", "system", ("x",), {})), RemoteError)
    packed = pack_exception(LLMException("x", status_code=LLMStatusCode.LLM_TIMEOUT))
    travelled = codec.make_loads()(codec.make_dumps()(("rep", 1, False, packed)))[3]
    same = unpack_exception(travelled)
    assert isinstance(same, LLMException)
    assert same.status_code is LLMStatusCode.LLM_TIMEOUT


def test_a_refused_name_is_cut_short_and_stripped_to_identifier_characters() -> None:
    refused = TypeRefused("evil\nmodule" + "x" * 500 + "Name\x1b[2J")
    assert "\n" not in refused.type_name
    assert "\x1b" not in refused.type_name
    assert refused.type_name.startswith("evil?module")
    assert len(refused.type_name) <= 96


# -- over a channel ---------------------------------------------------------------------------------


def _unexpected(kind: str, payload: Tuple[Any, ...]) -> Any:
    raise AssertionError(f"unexpected request {kind}")


def _answer(kind: str, payload: Tuple[Any, ...]) -> Any:
    return NotCarried() if kind == "odd" else (kind, payload)


@pytest.fixture
def pair() -> Iterator[Tuple[Channel, Channel, socket.socket]]:
    """Two channel ends speaking the fabric's codec (the right one echoes), and a raw third socket
    into the left end, for hand-written frames."""
    a, b = socket.socketpair()
    left = Channel(
        a, _unexpected, dumps=codec.make_dumps(), loads=codec.make_loads(), spawn=False, name="left"
    )
    right = Channel(b, _answer, dumps=codec.make_dumps(), loads=codec.make_loads(), spawn=True, name="right")
    left.start()
    right.start()
    yield left, right, b
    left.close()
    right.close()


def test_a_request_the_codec_refuses_fails_at_the_sender_and_the_next_call_succeeds(
    pair: Tuple[Channel, Channel, socket.socket],
) -> None:
    left, right, _ = pair
    with pytest.raises(TypeError, match=r"names \S*test_codec\.NotCarried: refused"):
        left.request("call", NotCarried(), timeout=10)
    assert left.request("call", 21, timeout=10) == ("call", (21,))
    assert not left.closed.is_set()
    assert not right.closed.is_set()


def test_a_reply_the_codec_cannot_send_fails_its_waiter_and_the_channel_goes_on(
    pair: Tuple[Channel, Channel, socket.socket],
) -> None:
    left, _, _ = pair
    with pytest.raises(RemoteError, match=r"NotCarried"):
        left.request("odd", timeout=10)
    assert left.request("plain", timeout=10) == ("plain", ())


def test_a_hand_written_frame_naming_a_type_gets_a_type_error_and_the_channel_goes_on() -> None:
    a, b = socket.socketpair()
    left = Channel(a, _answer, dumps=codec.make_dumps(), loads=codec.make_loads(), spawn=False, name="left")
    left.start()
    try:
        send_frame(b, _request(Ext(codec.DATA, pack(["posix.system", {}])), rid=9))
        send_frame(b, codec.make_dumps()(("req", 10, "plain", ())))
        loads = codec.make_loads()
        _, rid, ok, value = loads(_recv(b))
        assert (rid, ok) == (9, False)
        assert isinstance(unpack_exception(value), TypeError)
        assert "an argument names posix.system: refused, nothing of it decoded" in str(
            unpack_exception(value)
        )
        assert loads(_recv(b))[1:] == (10, True, ("plain", ()))
    finally:
        left.close()
        b.close()


def _recv(sock: socket.socket) -> bytes:
    from datadist_sim.fabric.transport.wire import recv_frame

    sock.settimeout(10)
    return recv_frame(sock)


@pytest.mark.crossproc
def test_a_client_processs_small_pull_travels_as_a_flat_call_and_its_reply_as_a_reply(fabric: Any) -> None:
    """A Decode process's ``pull_cache`` goes out as a flat method call (a msgpack array of six,
    ``0x96``) and comes back as a reply (an array of four, ``0x94``), and the bytes arrive."""
    prompt = fabric.start("pull_loop.py", "prompt")
    decode = fabric.start("pull_loop.py", "decode", "3", "frames")
    decode.tell(prompt.expect("ready"))
    assert decode.expect("pulled") == "3"
    assert decode.expect("frames").split() == ["96", "94", "1"]
    decode.expect("done")
    assert decode.finish() == 0
    prompt.tell()
    prompt.expect("done")
    assert prompt.finish() == 0
