"""The compact form of the commonest messages (``fabric/compact.py``): what it carries, what it leaves to
pickle, and what it refuses."""

from __future__ import annotations

import marshal
import pickle
from typing import Any, Dict, List, Optional

import numpy as np
import pytest

from datadist_sim.fabric import compact
from datadist_sim.fabric.compact import DATA, HANDLE, TUPLE, NotOurs
from datadist_sim.fabric.wire import PayloadRefused, make_dumps, make_loads
from datadist_sim.llm_datadist import BlocksCacheKey, CacheKeyByIdAndIndex, DataType


class Handle:
    """Stands for a client's proxy: an object that travels as its handle."""

    def __init__(self, number: int) -> None:
        self.number = number


def _handle_of(obj: Any) -> Optional[int]:
    return obj.number if isinstance(obj, Handle) else None


def _persistent_id(obj: Any) -> Any:  # what the pickled form sends a Handle as
    return ("ref", obj.number) if isinstance(obj, Handle) else None


held: Dict[int, str] = {3: "the cache manager", 5: "a cache"}


def _persistent_load(pid: Any) -> Any:
    return held[pid[1]]


def _client_dumps() -> compact.Encode:
    return compact.make_dumps(make_dumps(_persistent_id), _handle_of)


def _fabric_loads() -> compact.Decode:
    return compact.make_loads(make_loads(_persistent_load), held.__getitem__)


def _compact_frame(message: Any) -> bytes:
    return marshal.dumps(message, compact.MARSHAL_VERSION)


COMPACT = bytes([compact.FIRST])


def test_a_small_pull_travels_compact_and_arrives_as_the_pickled_form_would_bring_it() -> None:
    key = CacheKeyByIdAndIndex(1, 2, 0)
    message = ("req", 9, "call", (Handle(3), "pull_cache", (key, Handle(5), 0), {}))
    frame = _client_dumps()(message)
    assert frame[:1] == COMPACT
    for decoded in (
        _fabric_loads()(frame),
        make_loads(_persistent_load)(make_dumps(_persistent_id)(message)),
    ):
        head, rid, kind, (target, name, args, kwargs) = decoded
        assert (head, rid, kind, target, name, kwargs) == (
            "req",
            9,
            "call",
            "the cache manager",
            "pull_cache",
            {},
        )
        sent_key, cache, size = args
        assert type(args) is tuple
        assert type(sent_key) is CacheKeyByIdAndIndex
        assert vars(sent_key) == vars(key)
        assert (cache, size) == ("a cache", 0)


def test_lists_dicts_tuples_and_data_objects_nest_and_keep_their_types() -> None:
    key = BlocksCacheKey(4, 1)
    body = ("x", [1, [2.5, None]], {"a": (True, b"raw"), "b": [key]}, ())
    frame = _client_dumps()(("req", 1, "fn", body))
    assert frame[:1] == COMPACT
    rebuilt = _fabric_loads()(frame)[3]
    assert rebuilt[:2] == ("x", [1, [2.5, None]])
    assert rebuilt[2]["a"] == (True, b"raw")
    assert type(rebuilt[2]["b"][0]) is BlocksCacheKey
    assert vars(rebuilt[2]["b"][0]) == vars(key)
    assert rebuilt[3] == ()


@pytest.mark.parametrize(
    "value",
    [
        np.zeros(2),  # an array: by value through pickle, or as shared memory
        DataType.DT_FLOAT16,  # an enum
        {1: "a key that is not a string"},
        range(3),
        b"x" * (compact.MOST_BYTES + 1),  # large bytes: one copy fewer pickled
        object(),
    ],
    ids=["array", "enum", "int-keyed dict", "range", "large bytes", "other object"],
)
def test_a_value_without_a_compact_form_sends_the_whole_message_pickled(value: Any) -> None:
    encoded: List[Any] = []

    def pickled(message: Any) -> bytes:
        encoded.append(message)
        return b"\x80pickled"

    frame = compact.make_dumps(pickled, _handle_of)(("req", 1, "call", (Handle(3), "f", (value,), {})))
    assert frame == b"\x80pickled"
    assert encoded[0][3][2] == (value,)


def test_an_end_without_handles_sends_only_plain_values_compact() -> None:
    dumps = compact.make_dumps(lambda message: b"\x80pickled")
    assert dumps(("req", 1, "attach", ("a-session-key",)))[:1] == COMPACT
    assert dumps(("req", 1, "call", (CacheKeyByIdAndIndex(1, 2, 0),))) == b"\x80pickled"
    assert dumps(("req", 1, "call", (Handle(3),))) == b"\x80pickled"


def test_a_successful_plain_reply_travels_compact_and_everything_else_pickled() -> None:
    dumps = compact.make_dumps(lambda message: b"\x80pickled")
    loads = compact.make_loads(lambda frame: "unpickled")
    for value in (None, 7, 1.5, "text", True):
        frame = dumps(("rep", 4, True, value))
        assert frame[:1] == COMPACT
        assert loads(frame) == ("rep", 4, True, value)
    assert dumps(("rep", 4, False, ("ValueError", "builtins", ("x",), {}))) == b"\x80pickled"
    assert dumps(("rep", 4, True, [1, 2])) == b"\x80pickled"
    assert loads(b"\x80pickled") == "unpickled"


def test_a_data_class_the_protocol_does_not_carry_refuses_its_request_only() -> None:
    frame = _compact_frame(("req", 6, "fn", ["f", (TUPLE, [(DATA, "posix.system", {"cmd": "x"})]), {}]))
    with pytest.raises(PayloadRefused) as refused:
        _fabric_loads()(frame)
    assert refused.value.head == ("req", 6, "fn")
    call = _compact_frame(("req", 7, "call", 3, "f", [(DATA, "posix.system", {})], {}))
    with pytest.raises(PayloadRefused) as refused:
        _fabric_loads()(call)
    assert refused.value.head == ("req", 7, "call")
    assert refused.value.type_name == "posix.system"
    assert isinstance(refused.value.error(), TypeError)


@pytest.mark.parametrize(
    "message",
    [
        ("req", 1, "fn", [compile("1", "x", "eval")]),  # code: never run, and not ours
        ("req", 1, "fn", [{1, 2}]),
        ("req", 1, "fn", [("untagged", "tuple")]),
        ("req", 1, "fn", [{1: "int key"}]),
        ("req", 1, "fn", [("t", ("a tuple", "not a list"))]),
        ("req", 1, "fn", [("h", "not a number")]),
        ("req", 1, "fn", ("not", "a list")),
        ("req", 1, "call", 3, "f", [frozenset()], {}),
        ("req", 1, "call", 3, "f", ("not", "a list"), {}),
        ("req", 1, "call", 3, 4, [], {}),  # a name that is not a string
        ("req", 1, "fn", 3, "f", [], {}),  # the flat layout is a call's only
        ("req", 1, "call", "not a handle", "f", [], {}),
        ("rep", 1, True, ("t", [])),  # a reply is a plain value
        ("rep", 1, False, "a failure is pickled"),
        ("req", "not a number", "call", []),
        ("req", 1, "call"),
    ],
)
def test_a_compact_frame_off_the_form_is_not_ours(message: Any) -> None:
    with pytest.raises(NotOurs):
        _fabric_loads()(_compact_frame(message))


def test_a_handle_is_refused_by_an_end_that_holds_no_objects() -> None:
    loads = compact.make_loads(lambda frame: None)
    with pytest.raises(NotOurs):
        loads(_compact_frame(("req", 1, "fn", [(HANDLE, 3)])))


def test_the_data_classes_are_the_protocols_and_each_rebuilds_as_pickle_rebuilds_it() -> None:
    by_class, by_name = compact.data_classes()
    assert CacheKeyByIdAndIndex in by_class
    assert BlocksCacheKey in by_class
    for cls, name in by_class.items():
        assert by_name[name] is cls
        obj = cls.__new__(cls)
        reduced = obj.__reduce_ex__(pickle.HIGHEST_PROTOCOL)
        assert reduced[1] == (cls,)  # __newobj__(cls), then the state in __dict__
        assert not hasattr(cls, "__setstate__")


@pytest.mark.crossproc
def test_a_client_processs_small_pull_and_its_reply_travel_compact(fabric: Any) -> None:
    """The form is worth having only if the hot call takes it: a Decode process's ``pull_cache`` by id
    goes out compact, its reply comes back compact, and the bytes arrive."""
    prompt = fabric.start("pull_loop.py", "prompt")
    decode = fabric.start("pull_loop.py", "decode", "3", "frames")
    decode.tell(prompt.expect("ready"))
    assert decode.expect("pulled") == "3"
    assert decode.expect("frames").split() == [COMPACT.hex(), COMPACT.hex(), "1"]
    decode.expect("done")
    assert decode.finish() == 0
    prompt.tell()
    prompt.expect("done")
    assert prompt.finish() == 0


def test_a_calls_keywords_and_a_data_object_with_nested_attributes_arrive_whole() -> None:
    key = BlocksCacheKey(4, 1)
    key.extra = [1, (2, Handle(5))]  # type: ignore[attr-defined]  # an attribute that is not plain
    message = ("req", 2, "call", (Handle(3), "pull_blocks", ([0, 1],), {"key": key, "cache": Handle(5)}))
    frame = _client_dumps()(message)
    assert frame[:1] == COMPACT
    _, _, _, (target, name, args, kwargs) = _fabric_loads()(frame)
    assert (target, name, args) == ("the cache manager", "pull_blocks", ([0, 1],))
    assert kwargs["cache"] == "a cache"
    assert type(kwargs["key"]) is BlocksCacheKey
    assert vars(kwargs["key"]) == {**vars(BlocksCacheKey(4, 1)), "extra": [1, (2, "a cache")]}


@pytest.mark.parametrize(
    "frame", [b"(", b"(\x00\x00\x00\x05", b"(\x02\x00\x00\x00\xff\xfe", b"(" + b"\x00" * 64]
)
def test_a_broken_compact_frame_fails_to_decode_as_a_bad_frame_not_as_a_refused_request(frame: bytes) -> None:
    """The fabric drops a connection whose frame does not decode (``loop._read``); a refusal would
    instead answer it and go on."""
    with pytest.raises((EOFError, ValueError)) as failed:  # NotOurs is a ValueError
        _fabric_loads()(frame)
    assert not isinstance(failed.value, PayloadRefused)
