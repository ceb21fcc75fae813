"""What the wire's decoder admits and refuses, in one process: a frame naming code is refused before
anything of it runs; the protocol's own types and the values the vendor samples send are admitted; a
request whose payload is refused is answered with a ``TypeError`` naming the type, and the connection
goes on serving."""

from __future__ import annotations

import builtins
import os
import pickle
import socket
from pathlib import Path
from typing import Any, Iterator, Tuple

import numpy as np
import pytest

from datadist_sim._status import LLMException, LLMStatusCode
from datadist_sim.fabric.channel import Channel
from datadist_sim.fabric.wire import PayloadRefused, TypeRefused, make_loads, plain_dumps


def _no_refs(pid: Any) -> Any:
    raise AssertionError(pid)


class _Payload:
    """Pickles to a call of ``os.system``: whoever decodes it runs ``command``."""

    def __init__(self, command: str = "true") -> None:
        self.command = command

    def __reduce__(self) -> Any:
        return (os.system, (self.command,))


class NotCarried:
    """A type of the client's own that no face takes: it pickles by reference to this module."""


def test_the_wire_decoder_refuses_a_frame_that_names_code_and_admits_the_protocols_types() -> None:
    from datadist_sim.llm_datadist import CacheDesc, CacheKey, DataType, LLMRole

    loads = make_loads(_no_refs)
    with pytest.raises(pickle.UnpicklingError, match=r"does not carry posix\.system"):
        loads(pickle.dumps(_Payload()))
    with pytest.raises(pickle.UnpicklingError, match=r"does not carry builtins\.eval"):
        loads(pickle.dumps(eval))
    message = ("req", 1, "call", (CacheKey(1, 2), CacheDesc(1, [2], DataType.DT_FLOAT16), LLMRole.PROMPT))
    decoded = loads(plain_dumps(message))
    assert (decoded[3][0].req_id, decoded[3][1].shape, decoded[3][2]) == (2, [2], LLMRole.PROMPT)
    array = loads(plain_dumps(("rep", 1, True, np.arange(6, dtype=np.float16).reshape(2, 3))))[3]
    assert array.tolist() == [[0, 1, 2], [3, 4, 5]]


def test_decoding_a_frame_imports_nothing() -> None:
    """The names a frame may use are resolved once, beforehand: decoding one never runs the import
    machinery, whatever module the frame names (an allowed one included)."""
    from datadist_sim.llm_datadist import CacheKeyByIdAndIndex, DataType

    loads = make_loads(_no_refs)
    frame = plain_dumps(("req", 1, "call", (CacheKeyByIdAndIndex(1, 2, 3), DataType.DT_FLOAT16, np.int64(7))))
    loads(frame)  # whatever is resolved once, is resolved now
    code = pickle.dumps(_Payload())

    def no_import(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"decoding imported {args[0]!r}")

    real_import = builtins.__import__
    builtins.__import__ = no_import
    try:
        key, dtype, number = loads(frame)[3]
        refused = pytest.raises(pickle.UnpicklingError, match=r"does not carry posix\.system")
        with refused:
            loads(code)
    finally:
        builtins.__import__ = real_import
    assert (key.cluster_id, key.cache_id, key.batch_index, dtype, number) == (1, 2, 3, DataType.DT_FLOAT16, 7)


def test_the_wire_admits_a_clients_own_cpu_caches_and_ranges_as_the_vendor_samples_send_them() -> None:
    """The vendor's pull_blocks sample swaps into ``Cache.create_cpu_cache`` (a cache the client builds
    itself, so it travels by value) and switch_role / transfer_cache_async pass ``range(n)`` lists."""
    from datadist_sim.llm_datadist import Cache, CacheDesc, DataType, KvCache, Placement

    loads = make_loads(_no_refs)
    desc = CacheDesc(1, [2, 4], DataType.DT_FLOAT, Placement.HOST)
    host = np.zeros((2, 4), np.float32)
    cache = Cache.create_cpu_cache(desc, [host.ctypes.data])
    kv = KvCache.create_cpu_cache(desc, [host.ctypes.data])
    decoded = loads(plain_dumps(("req", 1, "call", (cache, kv, range(2)))))
    sent_cache, sent_kv, layers = decoded[3]
    assert (type(sent_cache), sent_cache.tensor_addrs) == (Cache, [host.ctypes.data])
    assert type(sent_kv) is KvCache
    assert layers == range(2)


def test_an_exception_of_a_class_outside_the_project_comes_back_as_text_and_imports_nothing() -> None:
    import sys

    from datadist_sim.fabric.wire import RemoteError, pack_exception, unpack_exception

    assert "this" not in sys.modules
    rebuilt = unpack_exception(("this", "Zen", ("hello",), {}))
    assert isinstance(rebuilt, RemoteError)
    assert "this" not in sys.modules  # nothing was imported, so nothing ran
    assert isinstance(unpack_exception(("os", "system", ("x",), {})), RemoteError)
    same = unpack_exception(pack_exception(LLMException("x", status_code=LLMStatusCode.LLM_TIMEOUT)))
    assert isinstance(same, LLMException)
    assert same.status_code is LLMStatusCode.LLM_TIMEOUT


# -- a refused payload fails its own request only ---------------------------------------------------


def test_a_refused_payload_keeps_its_envelope_so_its_request_can_be_answered(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    loads = make_loads(_no_refs)
    with pytest.raises(PayloadRefused) as refused:
        loads(plain_dumps(("req", 7, "call", (1, _Payload(f"touch {marker}")))))
    assert refused.value.head == ("req", 7, "call")
    assert refused.value.type_name == "posix.system"
    assert isinstance(refused.value.error(), TypeError)
    assert not marker.exists()  # refused before anything of it ran


def test_an_envelope_that_names_a_type_is_not_our_protocol_and_is_refused_whole() -> None:
    loads = make_loads(_no_refs)
    frame = pickle.dumps(("req", NotCarried(), "call")) + pickle.dumps(())
    with pytest.raises(TypeRefused) as refused:
        loads(frame)
    assert not isinstance(refused.value, PayloadRefused)


def test_a_refused_name_is_cut_short_and_stripped_to_identifier_characters() -> None:
    refused = TypeRefused("evil\nmodule" + "x" * 500, "Name\x1b[2J")
    assert "\n" not in refused.type_name
    assert "\x1b" not in refused.type_name
    assert refused.type_name.startswith("evil?module")
    assert len(refused.type_name) <= 96


@pytest.fixture
def wire_pair() -> Iterator[Tuple[Channel, Channel]]:
    """Two channel ends speaking the fabric's own framing and decoder; the right one echoes."""
    a, b = socket.socketpair()
    loads = make_loads(_no_refs)
    left = Channel(a, _unexpected, dumps=plain_dumps, loads=loads, spawn=False, name="left")
    right = Channel(b, _echo, dumps=plain_dumps, loads=loads, spawn=True, name="right")
    left.start()
    right.start()
    yield left, right
    left.close()
    right.close()


def _echo(kind: str, payload: Tuple[Any, ...]) -> Any:
    return (kind, payload)


def _unexpected(kind: str, payload: Tuple[Any, ...]) -> Any:
    raise AssertionError(f"unexpected request {kind}")


def test_a_request_of_a_type_the_wire_refuses_gets_a_type_error_naming_it_and_the_next_call_succeeds(
    wire_pair: Tuple[Channel, Channel],
) -> None:
    left, right = wire_pair
    with pytest.raises(TypeError, match=r"names .*test_wire\.NotCarried: refused"):
        left.request("call", NotCarried(), timeout=10)
    assert left.request("call", 21, timeout=10) == ("call", (21,))
    assert not left.closed.is_set()
    assert not right.closed.is_set()


def test_a_reply_of_a_type_the_wire_refuses_fails_its_waiter_and_the_channel_goes_on() -> None:
    a, b = socket.socketpair()
    loads = make_loads(_no_refs)

    def answer(kind: str, payload: Tuple[Any, ...]) -> Any:
        return NotCarried() if kind == "odd" else kind

    left = Channel(a, _unexpected, dumps=plain_dumps, loads=loads, spawn=False, name="left")
    right = Channel(b, answer, dumps=plain_dumps, loads=loads, spawn=True, name="right")
    left.start()
    right.start()
    try:
        with pytest.raises(TypeError, match=r"a reply names .*NotCarried"):
            left.request("odd", timeout=10)
        assert left.request("plain", timeout=10) == "plain"
    finally:
        left.close()
        right.close()
