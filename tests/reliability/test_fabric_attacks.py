"""Attacks on a running fabric by a client that passed the handshake: none may crash it, make it read
memory the client chose, allocate far more than the client sent, or leave it deaf to everyone else.
Each attack is followed by an honest client's call, which must be answered."""

from __future__ import annotations

import contextlib
import io
import pickle
import struct
from typing import Any, Iterator

import numpy as np
import pytest
from tests.crossproc.conftest import Fabric
from tests.reliability._attacker import Attacker


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


def _frame(head: Any, payload: Any) -> bytes:
    """A message as the protocol frames it (two pickles by one pickler, sharing its memo), with numpy's
    own pickling of whatever ``payload`` holds."""
    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer, protocol=5)
    pickler.dump(head)
    pickler.dump(payload)
    return buffer.getvalue()


def test_an_array_whose_dtype_state_hides_an_object_field_is_refused_and_nothing_reads_it(
    fabric: Fabric,
) -> None:
    with Attacker(fabric.address) as attacker:
        rid = attacker.next_id()
        # the fabric's "str" request formats its argument: an admitted array would be dereferenced there
        attacker.send(_frame(("req", rid, "str"), (_PointerArray(),)))
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
        np.zeros(2, dtype=[("a", "<i4")]),  # structured: its fields are a state the sender writes
        np.array([None, 1], dtype=object),
        np.dtype([("a", "O")]),
        np.zeros(2, dtype="V8"),
    ],
    ids=["structured", "object", "object-dtype", "void"],
)
def test_numpy_values_of_other_than_plain_numeric_dtypes_are_a_type_error(fabric: Fabric, value: Any) -> None:
    with Attacker(fabric.address) as attacker:
        ok, error = attacker.call("str", value)
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
    from datadist_sim.fabric.arrays import build_array
    from datadist_sim.fabric.wire import TypeRefused

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
    from datadist_sim.fabric.wire import make_loads, plain_dumps

    out = make_loads(_no_handles)(plain_dumps(("rep", 1, True, value)))[3]
    assert type(out) is type(value)
    if isinstance(value, np.ndarray):
        assert (out.dtype, out.shape, out.tobytes()) == (value.dtype, value.shape, value.tobytes())
        assert out.flags.writeable
    else:
        assert out == value


def _no_handles(pid: Any) -> Any:
    raise AssertionError(pid)


def _peak_rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise AssertionError("no VmHWM")


@pytest.mark.parametrize(
    "frame",
    [
        b"(" + struct.pack("<i", 1 << 25),  # a tuple of 32 Mi items: 256 MiB of slots, from 5 bytes
        b"\x80\x05N" + b"r" + struct.pack("<I", 1 << 24) + b".",  # a pickle's memo index: 256 MiB
    ],
    ids=["compact-tuple", "pickle-memo"],
)
def test_a_frame_cannot_make_the_fabric_allocate_more_than_a_small_multiple_of_its_length(
    fabric: Fabric, frame: bytes
) -> None:
    """Peak resident memory: a tuple's slots are zeroed one by one, a memo's by hand (a list's come from
    ``calloc``, untouched: the in-process test below counts those)."""
    _answers(fabric)  # warm: what serving a call takes is already counted
    before = _peak_rss_kib(fabric.server.pid)
    with Attacker(fabric.address) as attacker:
        attacker.send(frame)
        with pytest.raises((ConnectionError, EOFError, OSError)):  # not our protocol: dropped
            attacker.call("str", 1)
    _answers(fabric)
    grown_mib = (_peak_rss_kib(fabric.server.pid) - before) / 1024
    assert grown_mib < 64, f"the fabric's peak memory grew {grown_mib:.0f} MiB for a {len(frame)} B frame"


def _long_digits_reserved(frame: bytes) -> int:
    """The bytes ``marshal.loads`` reserves ahead, untouched, for the long integers (two a declared
    digit) and bytes objects (their declared length) it meets in ``frame``, found by reading the frame
    as marshal does, token after token, as far as marshal would get: a mutated frame's longs are
    wherever its mutated lengths put them."""
    fixed = {ord(c): n for c, n in (("N", 1), ("T", 1), ("F", 1), ("0", 1), ("{", 1), ("i", 5), ("g", 9))}
    pos, reserved = 0, 0
    while pos < len(frame):
        code = frame[pos] & 0x7F  # FLAG_REF (0x80) marks a token kept for back-references, same layout
        if code in fixed:
            pos += fixed[code]
            continue
        if len(frame) - pos < 5:
            break
        count = struct.unpack_from("<i", frame, pos + 1)[0]
        pos += 5
        if code in b"us":
            if count < 0:
                break
            if code == ord("s"):
                reserved += count + 64  # a bytes object is made at its declared size, then filled
            pos += count
        elif code == ord("l"):
            reserved += 2 * abs(count) + 64
            pos += 2 * abs(count)
        elif code not in b"([":
            break  # a code the form never writes: marshal stops here too
    return reserved


def _compact_frames() -> Any:
    from hypothesis import strategies as st

    scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8)
    values = st.recursive(
        scalars | st.binary(max_size=8),
        lambda inner: (
            st.lists(inner, max_size=4)
            | st.tuples(inner, inner)
            | st.dictionaries(st.text(max_size=4), inner, max_size=3)
        ),
        max_leaves=12,
    )
    return st.tuples(st.just("req"), st.integers(0, 1 << 40), st.just("call"), st.lists(values, max_size=4))


def test_the_compact_check_admits_the_encoders_frames_and_bounds_what_any_other_allocates() -> None:
    """Every frame of the form's values passes; any frame made from one by overwriting four bytes with a
    chosen count either is refused, or is decoded by marshal within a small multiple of its length (and
    the digits a long integer declares, which marshal reserves without writing)."""
    import marshal
    import tracemalloc

    from hypothesis import given, settings
    from hypothesis import strategies as st

    from datadist_sim.fabric.bounds import FrameRefused, check_compact

    @settings(max_examples=300, deadline=None)
    @given(_compact_frames(), st.integers(0, 1 << 10), st.integers(-(1 << 31), (1 << 31) - 1))
    def check(message: Any, where: int, count: int) -> None:
        frame = marshal.dumps(message, 2)
        check_compact(frame)  # the encoder's own frames always pass
        at = where % len(frame)
        mutated = frame[:at] + struct.pack("<i", count) + frame[at + 4 :]
        try:
            check_compact(mutated)
        except FrameRefused:
            return
        tracemalloc.start()
        with contextlib.suppress(Exception):  # most mutated frames do not decode: only the memory counts
            marshal.loads(mutated)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        # a long integer's declared digits are reserved, never written (address space, not memory: the
        # module docstring of fabric/bounds.py); nothing else may exceed the bound. The fixed 64 KiB is
        # the interpreter's own (the failed decode's exception, first-use caches); the attacks this
        # guards against ask for megabytes to gigabytes
        reserved = _long_digits_reserved(mutated)
        assert peak <= 256 * len(mutated) + (64 << 10) + reserved, (peak, len(mutated), reserved)

    check()
