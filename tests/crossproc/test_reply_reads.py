"""The parts of a small cross-process ``hixl`` READ that takes its bytes in the reply: the fabric reading a
process's memory itself (``transport/peer_memory.py``), the router keeping the caller's writes for its
reply (``host/carried.py``), and the caller writing them, all or nothing
(``client/hixl_proxy.py``)."""

from __future__ import annotations

import ctypes
import mmap
from typing import Any, Iterator, List, Tuple

import numpy as np
import pytest

from datadist_sim._world.ownership import enter_copy, leave_copy
from datadist_sim.fabric.host import session as host_session
from datadist_sim.fabric.host.carried import INLINE_BYTES, carrying
from datadist_sim.fabric.host.raw import RawRouter
from datadist_sim.fabric.transport import peer_memory

from .conftest import Child

PARAM_INVALID = 103900


needs_readv = pytest.mark.skipif(peer_memory._READV is None, reason="needs Linux process_vm_readv")


@needs_readv
def test_the_fabric_reads_ranges_of_a_process_whose_mark_comes_back(child: Child) -> None:
    pid, address, mark = child
    found = peer_memory.read_ranges(pid, mark, [(address + 1000, 4096), (address, 16)])
    if found is None:
        pytest.skip("the kernel does not let this process read its child's memory")
    assert found[0].tolist() == (np.arange(1000, 5096) % 251).tolist()
    assert found[1].tolist() == list(range(16))


@needs_readv
def test_another_mark_or_memory_the_process_lacks_reads_nothing(child: Child) -> None:
    pid, address, mark = child
    assert peer_memory.read_ranges(pid, (mark[0], bytes(16)), [(address, 64)]) is None
    assert peer_memory.read_ranges(pid, mark, [(address, 64), (0x10, 64)]) is None  # unmapped in it


# -- the router ---------------------------------------------------------------------------------------


class _Channel:
    def __init__(self, log: List[str], mark: Tuple[int, bytes] = (0, b"not a mark")) -> None:
        self.log = log
        self.mark = mark

    def request(self, kind: str, *payload: Any, timeout: float) -> Any:
        self.log.append(kind)
        if kind == "mem_check_read":
            return self.mark
        if kind == "mem_read":
            return [bytes([0xAB]) * n for _, n in payload[0]]
        return None


class _Session:
    def __init__(self, pid: int, channel: _Channel) -> None:
        self.pid = pid
        self.channel = channel


def _router(parties: dict) -> RawRouter:  # type: ignore[type-arg]
    return RawRouter(lambda *_: None, 1.0, parties.get, lambda _a, _n: [])


@pytest.fixture
def calling() -> Iterator[Any]:
    """Run as if serving a request of the returned (fake) session."""
    caller = _Session(1, _Channel([]))
    host_session._context.session = caller
    try:
        yield caller
    finally:
        host_session._context.session = None


def test_the_callers_vouched_ranges_are_neither_checked_nor_written_by_a_request(calling: Any) -> None:
    log = calling.channel.log
    router = _router({"me": calling})
    before = enter_copy("me", "me")
    try:
        with carrying([(0x9000, 4096)]) as delivery:
            router.check_writable([(0x9000, 4096)])
            router.write([(0x9000, np.full(4096, 7, np.uint8))], take=None)  # type: ignore[arg-type]
        assert log == []
        assert delivery.chunks == [(0x9000, b"\x07" * 4096)]
        # a range the caller did not vouch for is checked and written by requests, as ever
        with carrying([(0x9000, 4096)]) as delivery:
            router.check_writable([(0x9000, 4097)])
            router.write([(0x9000, np.zeros(4097, np.uint8))], take=None)  # type: ignore[arg-type]
        assert log == ["mem_check", "mem_write"]
        assert delivery.chunks == []
        # more than one reply carries is written by a request too
        log.clear()
        with carrying([(0x9000, INLINE_BYTES + 1)]) as delivery:
            router.write([(0x9000, np.zeros(INLINE_BYTES + 1, np.uint8))], take=_Take())  # type: ignore[arg-type]
        assert log == ["mem_write_from"]
        assert delivery.chunks == []
    finally:
        leave_copy(before)


class _Take:
    def __call__(self, nbytes: int) -> Any:
        class Scratch:
            path = "scratch"

            def fill(self, chunks: Any) -> Any:
                return [(0, c.nbytes) for c in chunks]

        return Scratch()


def test_a_source_the_fabric_cannot_read_itself_is_read_by_its_owner(calling: Any) -> None:
    log: List[str] = []
    owner = _Session(2, _Channel(log))  # its mark never reads back: the fabric asks it instead
    router = _router({"me": calling, "peer": owner})
    before = enter_copy("me", "peer")
    try:
        with carrying([(0x9000, 64)]):
            found = router.read([(0x1000, 64)], take=None)  # type: ignore[arg-type]
            again = router.read([(0x1000, 64)], take=None)  # type: ignore[arg-type]
    finally:
        leave_copy(before)
    assert [bytes(f) for f in found + again] == [b"\xab" * 64] * 2
    assert log == ["mem_check_read", "mem_read", "mem_read"]  # the mark is asked for once
    assert router.peeks == 0


@needs_readv
def test_a_source_the_fabric_can_read_is_read_without_a_request(calling: Any, child: Child) -> None:
    pid, address, mark = child
    if peer_memory.read_ranges(pid, mark, [(address, 1)]) is None:
        pytest.skip("the kernel does not let this process read its child's memory")
    log: List[str] = []
    owner = _Session(pid, _Channel(log, mark))
    router = _router({"me": calling, "peer": owner})
    before = enter_copy("me", "peer")
    try:
        with carrying([(0x9000, 64)]):
            found = router.read([(address, 64)], take=None)  # type: ignore[arg-type]
            found += router.read([(address + 64, 64)], take=None)  # type: ignore[arg-type]
        # outside a delivery the owner reads its own memory, as ever
        outside = router.read([(address, 64)], take=None)  # type: ignore[arg-type]
    finally:
        leave_copy(before)
    assert [f.tolist() for f in found] == [list(range(64)), list(range(64, 128))]
    assert log == ["mem_check_read", "mem_read"]  # the mark once; the read outside a delivery
    assert router.peeks == 2
    assert bytes(outside[0]) == b"\xab" * 64


# -- the caller's side --------------------------------------------------------------------------------


def _gone() -> int:
    """An address that was this process's memory and is no longer."""
    region = mmap.mmap(-1, mmap.PAGESIZE)
    address = ctypes.addressof(ctypes.c_char.from_buffer(region))
    region.close()
    return address


def test_the_caller_writes_every_chunk_or_none() -> None:
    from datadist_sim.fabric.client.hixl_proxy import _write_delivered

    first = np.full(64, 0x55, np.uint8)
    second_address = _gone()
    plain = [(first.ctypes.data, 0x1000, 64), (second_address, 0x2000, 64)]
    chunks: List[Tuple[int, bytes]] = [(first.ctypes.data, b"\xaa" * 64), (second_address, b"\xaa" * 64)]
    # the second range went away after the call was made: PARAM_INVALID, and the first keeps its bytes
    assert _write_delivered(0, chunks, plain) == PARAM_INVALID
    assert (first == 0x55).all()
    assert _write_delivered(0, chunks[:1], plain[:1]) == 0
    assert (first == 0xAA).all()


@pytest.mark.parametrize(
    "chunks",
    [
        [(0, b"x")],  # not in the call's local ranges
        [("1", b"x")],  # not a plain (address, bytes) pair
        "not a list",
    ],
)
def test_a_reply_naming_other_memory_is_refused(chunks: Any) -> None:
    from datadist_sim.fabric.client.hixl_proxy import _write_delivered

    local = np.zeros(8, np.uint8)
    with pytest.raises(TypeError):
        _write_delivered(0, chunks, [(local.ctypes.data, 0x1000, 8)])
    assert (local == 0).all()


def test_a_caller_vouches_only_for_its_own_writable_memory() -> None:
    from datadist_sim.fabric.client.hixl_proxy import REPLY_BYTES, _vouch

    mine = np.zeros(4096, np.uint8)
    assert _vouch([(mine.ctypes.data, 0x1000, 4096)])
    assert not _vouch([(mine.ctypes.data, 0x1000, 4096), (_gone(), 0x1000, 64)])
    assert not _vouch([])
    big = np.zeros(REPLY_BYTES + 1, np.uint8)
    assert not _vouch([(big.ctypes.data, 0x1000, REPLY_BYTES + 1)])
    readonly = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ)
    view = np.frombuffer(readonly, np.uint8)
    assert not _vouch([(view.ctypes.data, 0x1000, 64)])  # ours, but not writable
    del view
    readonly.close()


def test_a_write_with_its_sources_in_hand_asks_the_destination_once(calling: Any) -> None:
    log: List[str] = []
    peer = _Session(2, _Channel(log))
    router = _router({"me": calling, "peer": peer})
    before = enter_copy("peer", "me")
    try:
        with carrying(supplied={(0x9000, 4): b"\x01\x02\x03\x04"}):
            router.check_writable([(0x1000, 4)], alone=True)  # its write request checks first
            found = router.read([(0x9000, 4)], take=None)  # type: ignore[arg-type]
            assert not router.copy_direct([(0x1000, 0x9000, 4)])
            router.write([(0x1000, found[0])], take=None)  # type: ignore[arg-type]
        assert bytes(found[0]) == b"\x01\x02\x03\x04"
        assert log == ["mem_write"]
        assert calling.channel.log == []
        # a copy that also writes simulated memory is checked first, as ever (all or nothing)
        with carrying(supplied={(0x9000, 4): b"\x01\x02\x03\x04"}):
            router.check_writable([(0x1000, 4)], alone=False)
        assert log == ["mem_write", "mem_check"]
    finally:
        leave_copy(before)


def test_a_write_whose_bytes_do_not_match_its_descriptors_is_refused(calling: Any) -> None:
    from datadist_sim.fabric.host.hixl_host import HixlOwners, HostedHixl

    hosted = HostedHixl(HixlOwners())
    descs = [(0x9000, 0x1000, 4)]
    for data in ([b"abc"], [b"abcd", b"efgh"], ["abcd"], b"abcd"):
        with pytest.raises(TypeError):
            hosted.write_sync("127.0.0.1:1", descs, data, 1000)  # type: ignore[arg-type]


def test_a_caller_supplies_only_its_own_readable_memory() -> None:
    from datadist_sim.fabric.client.hixl_proxy import _supply

    mine = np.arange(16, dtype=np.uint8)
    assert _supply([(mine.ctypes.data, 0x1000, 16)]) == [bytes(range(16))]
    assert _supply([(mine.ctypes.data, 0x1000, 16), (_gone(), 0x1000, 16)]) is None
    assert _supply([(mine.ctypes.data, 0x1000, 0)]) is None
