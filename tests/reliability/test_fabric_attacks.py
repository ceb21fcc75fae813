"""Attacks on a running fabric by a client that passed the handshake: none may crash it, make it read
memory the client chose, allocate far more than the client sent, or leave it deaf to everyone else.
Each attack is followed by an honest client's call, which must be answered."""

from __future__ import annotations

import io
import pickle
import struct
from typing import Any, Iterator, Set

import msgspec
import numpy as np
import pytest
from tests.crossproc.conftest import Fabric
from tests.reliability._attacker import Attacker

from datadist_sim.fabric.transport import arrays, codec


@pytest.fixture
def fabric() -> Iterator[Fabric]:
    world = Fabric()
    try:
        yield world
    finally:
        world.close()


def _answers(fabric: Fabric) -> None:
    """The fabric is alive and answers a new client."""
    assert fabric.server.poll() is None, "the fabric process died"
    with Attacker(fabric.address) as honest:
        ok, status = honest.call("fn", "status", (), {})
    assert ok, status
    assert "clusters" in status


class _FlaglessDtype:
    """Pickles to numpy's dtype of a structured array with one object field, its state's flags cleared:
    numpy then takes the field's eight bytes for a pointer without treating them as one."""

    def __reduce__(self) -> Any:
        cls, args, state = np.dtype([("a", "O")]).__reduce__()  # type: ignore[misc]
        return cls, args, (*state[:-1], 0)


class _PointerArray:
    """Pickles to a one-element array of ``_FlaglessDtype`` whose object field holds a chosen address."""

    def __reduce__(self) -> Any:
        rebuild, args, _ = np.zeros(1, dtype=[("a", "O")]).__reduce__()  # type: ignore[misc]
        return rebuild, args, (1, (1,), _FlaglessDtype(), False, struct.pack("<Q", 0x4141414141))


Ext = msgspec.msgpack.Ext
pack = msgspec.msgpack.encode


def _array(dtype: str, shape: Any, data: bytes) -> Ext:
    """The protocol's array form (``fabric/transport/codec.py``), with whatever dtype name a peer writes."""
    head = pack([dtype, shape])
    return Ext(codec.ARRAY, len(head).to_bytes(2, "little") + head + data)


def _request(rid: int, kind: str, *values: Any) -> bytes:
    return pack([0, rid, kind, list(values)])


def _pickled(head: Any, payload: Any) -> bytes:
    """A message as the fabric's earlier protocol framed it (two pickles), with numpy's own pickling."""
    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer, protocol=5)
    pickler.dump(head)
    pickler.dump(payload)
    return buffer.getvalue()


def test_an_array_whose_dtype_state_hides_an_object_field_is_refused_and_nothing_reads_it(
    fabric: Fabric,
) -> None:
    """numpy's own pickle of the attack is not a frame of the protocol (the connection is dropped, nothing
    of it decoded); the protocol's own array form admits only plain numeric dtypes by name."""
    with Attacker(fabric.address) as attacker:
        attacker.send(_pickled(("req", 1, "str"), (_PointerArray(),)))
        with pytest.raises((ConnectionError, EOFError, OSError)):  # not our protocol: dropped
            attacker.call("str", 1)
    with Attacker(fabric.address) as attacker:
        rid = attacker.next_id()
        # the fabric's "str" request formats its argument: an admitted array would be dereferenced there
        attacker.send(_request(rid, "str", _array("|O", [1], struct.pack("<Q", 0x4141414141))))
        ok, error = attacker.reply(rid)
        assert not ok
        assert isinstance(error, TypeError)
        assert "numpy" in str(error)
        assert "refused" in str(error)
        assert attacker.call("str", 5) == (True, "5")  # the same connection goes on serving
    _answers(fabric)


@pytest.mark.parametrize(
    "value",
    [
        _array("[('a', '<i4')]", [1], b"\0" * 4),  # structured: its fields are a state the sender writes
        _array("|O", [2], b"\0" * 16),
        _array("|V8", [1], b"\0" * 8),
        Ext(codec.DTYPE, pack("|O")),
        Ext(codec.DTYPE, pack("[('a', 'O')]")),
        Ext(codec.SCALAR, pack(["|O", b"\0" * 8])),
    ],
    ids=["structured", "object", "void", "object-dtype", "structured-dtype", "object-scalar"],
)
def test_numpy_values_of_other_than_plain_numeric_dtypes_are_a_type_error(fabric: Fabric, value: Any) -> None:
    with Attacker(fabric.address) as attacker:
        rid = attacker.next_id()
        attacker.send(_request(rid, "str", value))
        ok, error = attacker.reply(rid)
    assert not ok
    assert isinstance(error, TypeError), error
    _answers(fabric)


@pytest.mark.parametrize(
    "args",
    [
        ("|O", (1,), b"\0" * 8),  # an object dtype by name
        ("|V8", (1,), b"\0" * 8),
        ("<f4", (2,), b"\0" * 4),  # fewer bytes than the shape says: nothing read past them
        ("<f4", (1 << 40,), b""),  # a shape that would allocate before the bytes are checked
        ("<f4", (-1,), b""),
        ("<f4", [1], b"\0" * 4),
        ("<f4", (1,), memoryview(b"\0" * 4)),
        ("<f4", (1,) * 65, b"\0" * 4),
    ],
)
def test_the_array_builder_refuses_anything_but_a_plain_dtype_a_shape_and_exactly_its_bytes(
    args: Any,
) -> None:
    from datadist_sim.fabric.transport.arrays import build_array
    from datadist_sim.fabric.transport.exceptions import TypeRefused

    with pytest.raises(TypeRefused):
        build_array(*args)


@pytest.mark.parametrize(
    "value",
    [
        np.arange(6, dtype=np.float16).reshape(2, 3),
        np.arange(12)[::3],  # not contiguous
        np.asfortranarray(np.arange(6, dtype=np.int32).reshape(2, 3)),
        np.array(2.5),
        np.zeros((0, 4), np.uint8),
        np.arange(3, dtype=">i4"),
        np.array([True, False]),
        np.array([1 + 2j], np.complex64),
        np.int64(7),
        np.float32(1.5),
        np.bool_(True),
        np.dtype("<f2"),
    ],
)
def test_plain_numpy_values_cross_the_wire_as_they_were(value: Any) -> None:
    out = codec.make_loads()(codec.make_dumps()(("rep", 1, True, value)))[3]
    assert type(out) is type(value)
    if isinstance(value, np.ndarray):
        assert (out.dtype, out.shape, out.tobytes()) == (value.dtype, value.shape, value.tobytes())
        assert out.flags.writeable
    else:
        assert out == value


def _peak_rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise AssertionError("no VmHWM")


@pytest.mark.parametrize(
    "frame",
    [
        b"\xdd\xff\xff\xff\xff",  # an array of 4 Gi items, from 5 bytes: 32 GiB of slots if believed
        b"\xdf\x7f\xff\xff\xff",  # a map of 2 Gi pairs
        b"\xdb\x7f\xff\xff\xff",  # a string of 2 GiB
        b"\xc6\x7f\xff\xff\xff",  # bytes of 2 GiB
        b"\xc9\x7f\xff\xff\xff\x01",  # an extension value of 2 GiB
        b"\x94\x00\x01\xa3str\x91\xdd\x7f\xff\xff\xff",  # a request whose argument is such an array
        b"\x80\x05N" + b"r" + struct.pack("<I", 1 << 24) + b".",  # a pickle's memo index: 256 MiB unpickled
    ],
    ids=["array", "map", "str", "bin", "ext", "nested-array", "pickle-memo"],
)
def test_a_frame_cannot_make_the_fabric_allocate_more_than_a_small_multiple_of_its_length(
    fabric: Fabric, frame: bytes
) -> None:
    """Peak resident memory of the fabric process, around a frame that declares far more than it holds."""
    _answers(fabric)  # warm: what serving a call takes is already counted
    before = _peak_rss_kib(fabric.server.pid)
    with Attacker(fabric.address) as attacker:
        attacker.send(frame)
        with pytest.raises((ConnectionError, EOFError, OSError)):  # not our protocol: dropped
            attacker.call("str", 1)
    _answers(fabric)
    grown_mib = (_peak_rss_kib(fabric.server.pid) - before) / 1024
    assert grown_mib < 64, f"the fabric's peak memory grew {grown_mib:.0f} MiB for a {len(frame)} B frame"


@pytest.mark.parametrize(
    "claim",
    [
        b"\xdd\xff\xff\xff\xff",  # an array of 2**32 - 1 items
        b"\xdd\x80\x00\x00\x00",  # an array of 2**31 items
        b"\xdf\x80\x00\x00\x00",  # a map of 2**31 pairs
        b"\xdb\x80\x00\x00\x00",  # a string of 2 GiB
        b"\xc6\x80\x00\x00\x00",  # bytes of 2 GiB
        b"\xc9\x80\x00\x00\x00\x01",  # an extension value of 2 GiB
    ],
    ids=["array-4Gi", "array-2Gi", "map", "str", "bin", "ext"],
)
@pytest.mark.parametrize("where", ["frame", "argument", "tuple", "data-object"])
def test_a_declared_size_past_the_frames_end_is_refused_before_anything_is_allocated_by_it(
    claim: bytes, where: str
) -> None:
    """msgspec checks each size a header declares against the bytes left before it allocates by it (and
    a header of a type the schema does not take there before that): the decode fails having traced no
    more than the interpreter's own small change, wherever the header sits (the frame itself, an
    argument, inside one of our extension values)."""
    import tracemalloc

    from datadist_sim.llm_datadist import CacheKey

    name = codec.tables()[0][CacheKey]
    frames = {
        "frame": claim,
        "argument": _request(1, "str")[:-1] + b"\x91" + claim,  # the payload: a list of one, cut short
        "tuple": _request(1, "str", Ext(codec.TUPLE, claim + b"\x00" * 8)),
        "data-object": _request(1, "str", Ext(codec.DATA, b"\x92" + pack(name) + claim)),
    }
    frame = frames[where]
    decode = codec.make_loads()
    decode(codec.make_dumps()(("req", 1, "str", (CacheKey(1, 2), (1,)))))  # warm: first-use caches
    tracemalloc.start()
    try:
        # truncated, or (where the schema takes no such value) of the wrong type: either way, refused
        with pytest.raises(msgspec.DecodeError, match=r"truncated|Expected"):
            decode(frame)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 << 10, f"{peak} B traced decoding a {len(frame)} B frame"


def _values() -> Any:
    from hypothesis import strategies as st

    from datadist_sim.llm_datadist import BlocksCacheKey, CacheKey, DataType

    scalars = (
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=False)
        | st.text(max_size=8)
        | st.binary(max_size=8)
        | st.sampled_from([DataType.DT_FLOAT16, CacheKey(1, 2), BlocksCacheKey(3, 4), range(3), 1j])
        | st.sampled_from([np.arange(3, dtype=np.int16), np.float32(1.5), np.dtype("<f8")])
    )
    return st.recursive(
        scalars,
        lambda inner: (
            st.lists(inner, max_size=4)
            | st.tuples(inner, inner)
            | st.dictionaries(st.text(max_size=4), inner, max_size=3)
            | st.dictionaries(st.integers(), inner, max_size=2)
        ),
        max_leaves=12,
    )


def _types_built(value: Any, found: Set[type]) -> None:
    """Every type in ``value``, through containers and the attributes of the faces' data objects."""
    found.add(type(value))
    if type(value) in (list, tuple):
        for item in value:
            _types_built(item, found)
    elif type(value) is dict:
        for key, item in value.items():
            _types_built(key, found)
            _types_built(item, found)
    elif type(value) in codec.tables()[0]:
        _types_built(vars(value), found)


def test_any_frame_decodes_within_a_small_multiple_of_its_length_and_builds_only_the_protocols_types() -> (
    None
):
    """Every frame the encoder writes, and any frame made from one by overwriting four bytes with a
    chosen value (a size header among them, or a type code), either fails to decode or decodes within a
    small multiple of its length into objects of the protocol's own types only: msgpack's, the faces'
    tables, plain numpy values, ``range``/``slice``/``complex``, and ``datetime`` (msgpack's timestamp,
    which msgspec builds by itself)."""
    import datetime
    import tracemalloc

    from hypothesis import given, settings
    from hypothesis import strategies as st

    data, _, enums, _ = codec.tables()
    allowed = {type(None), bool, int, float, str, bytes, list, tuple, dict, range, slice, complex}
    allowed |= {datetime.datetime, np.ndarray, np.dtype, *set(data), *set(enums)}
    allowed |= {type(np.dtype(name)) for name in arrays.DTYPES} | {
        np.dtype(name).type for name in arrays.DTYPES
    }
    encode, decode = codec.make_dumps(), codec.make_loads()

    @settings(max_examples=400, deadline=None)
    @given(st.lists(_values(), max_size=4), st.integers(0, 1 << 10), st.binary(min_size=4, max_size=4))
    def check(values: Any, where: int, chosen: bytes) -> None:
        frame = encode(("req", 1, "call", tuple(values)))
        at = where % len(frame)
        mutated = frame[:at] + chosen + frame[at + 4 :]
        tracemalloc.start()
        try:
            message = decode(mutated)
        except (ValueError, RecursionError):  # off the schema, or refused: dropped or answered
            message = None
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        # the fixed 64 KiB is the interpreter's own (a failed decode's exception, first-use caches); the
        # attacks this guards against ask for megabytes to gigabytes
        assert peak <= 64 * len(mutated) + (64 << 10), (peak, len(mutated))
        if message is not None:
            found: Set[type] = set()
            _types_built(message, found)
            assert found <= allowed, found - allowed

    check()
