"""Reading another process's memory directly (``fabric/client/xmem.py``), and the scratch file a read through
an owner leaves for the write that follows (``fabric/host/raw.py``)."""

from __future__ import annotations

import os
from typing import Any, List, Tuple

import numpy as np
import pytest

from datadist_sim._status import LLMStatusCode
from datadist_sim._world.errors import SimError
from datadist_sim.fabric.client import xmem
from datadist_sim.fabric.host.raw import _holding
from datadist_sim.fabric.host.shm import ScratchPool, shm_directory

pytestmark = pytest.mark.skipif(xmem._READV is None, reason="needs Linux process_vm_readv")


def _own(address: int, nbytes: int, *, writable: bool) -> None:
    """The client's check of its own memory, as ``fabric/client._own``: here everything is ours."""


def test_a_child_process_memory_is_read_in_one_step(child: Tuple[int, int, Tuple[int, bytes]]) -> None:
    pid, address, mark = child
    if not xmem.readable(pid, mark, [(address, 1 << 16)]):
        pytest.skip("the kernel does not let this process read its child's memory")
    out = np.zeros(4096, dtype=np.uint8)
    assert xmem.serve_pull((pid, mark, [(out.ctypes.data, address + 1000, 4096)]), _own)
    assert out.tolist() == (np.arange(1000, 5096) % 251).tolist()


def test_a_process_whose_mark_differs_is_not_read(child: Tuple[int, int, Tuple[int, bytes]]) -> None:
    pid, address, (where, mark) = child
    out = np.zeros(64, dtype=np.uint8)
    wrong = (where, bytes(len(mark)))  # another process behind the same pid would not hold the mark
    assert not xmem.serve_pull((pid, wrong, [(out.ctypes.data, address, 64)]), _own)
    assert not out.any()


def test_an_empty_range_is_read_without_probing_its_address(
    child: Tuple[int, int, Tuple[int, bytes]],
) -> None:
    pid, _, mark = child
    out = np.zeros(8, dtype=np.uint8)
    assert xmem.serve_pull((pid, mark, [(out.ctypes.data, 0x10, 0)]), _own)  # as a 0-byte read through it
    assert not out.any()


def test_this_process_is_never_read_as_a_peer() -> None:
    assert not xmem.readable(os.getpid(), xmem.identity(), [])


def test_memory_the_peer_does_not_have_is_refused_before_anything_moves(
    child: Tuple[int, int, Tuple[int, bytes]],
) -> None:
    pid, _, mark = child
    out = np.zeros(64, dtype=np.uint8)
    assert not xmem.serve_pull((pid, mark, [(out.ctypes.data, 0x10, 64)]), _own)
    assert not out.any()


def test_a_read_of_memory_the_peer_lacks_is_param_invalid(
    child: Tuple[int, int, Tuple[int, bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    pid, _, mark = child
    out = np.zeros(64, dtype=np.uint8)
    with pytest.raises(xmem.PeerMemoryError):
        xmem.read_from(pid, [(out.ctypes.data, 0x10, 64)])  # memory the peer does not have
    # memory the peer vouched for and unmapped before the read: the refusal a read through it gives
    monkeypatch.setattr(xmem, "readable", lambda *_: True)
    with pytest.raises(SimError) as caught:
        xmem.serve_pull((pid, mark, [(out.ctypes.data, 0x10, 64)]), _own)
    assert caught.value.code is LLMStatusCode.LLM_PARAM_INVALID


def test_bytes_read_into_a_scratch_file_are_written_from_it() -> None:
    pool = ScratchPool(os.path.join(shm_directory(), f"datadist-sim-{os.getpid()}-test"))
    scratch = pool.take(1 << 20)
    try:
        first, second = scratch.split([4096, 8192])
        found, placed = _holding([scratch], [first, second])
        assert found is scratch
        assert placed == [(0, 4096), (4096, 8192)]
        elsewhere = np.zeros(16, dtype=np.uint8)
        assert _holding([scratch], [first, elsewhere]) == (None, [])
    finally:
        pool.give(scratch)
        pool.release_all()


class _Channel:
    """A client's side as the router sees it: answers ``mem_check_read`` and ``mem_pull``."""

    def __init__(self, pull_answer: bool, log: List[str]) -> None:
        self.pull_answer = pull_answer
        self.log = log

    def request(self, kind: str, *payload: Any, timeout: float) -> Any:
        self.log.append(kind)
        if kind == "mem_check_read":
            return (0, b"mark")
        if kind == "mem_pull":
            return self.pull_answer
        raise AssertionError(kind)


class _Session:
    def __init__(self, pid: int, channel: _Channel) -> None:
        self.pid = pid
        self.channel = channel


@pytest.mark.parametrize("kernel_allows", [True, False])
def test_a_refused_direct_read_is_asked_once_per_pair_of_processes(kernel_allows: bool) -> None:
    from datadist_sim.fabric.host.raw import RawRouter

    log: List[str] = []
    owner, reader = _Session(101, _Channel(True, log)), _Session(102, _Channel(kernel_allows, log))
    registered = {0x1000: owner, 0x9000: reader}  # the address each process registered
    router = RawRouter(
        lambda *_: None,
        1.0,
        lambda cluster: None,
        lambda address, _n: [registered[address]],  # type: ignore[list-item]
    )
    copies = [(0x9000, 0x1000, 4096)]
    assert router.copy_direct(copies) is kernel_allows
    assert router.copy_direct(copies) is kernel_allows
    if kernel_allows:
        assert log == ["mem_check_read", "mem_pull"] * 2
        assert router.direct_copies == 2
    else:  # remembered: the second transfer goes through scratch files without asking again
        assert log == ["mem_check_read", "mem_pull"]
        assert router.direct_copies == 0


def test_one_process_on_both_sides_is_not_read_directly() -> None:
    from datadist_sim.fabric.host.raw import RawRouter

    log: List[str] = []
    both = _Session(101, _Channel(True, log))
    router = RawRouter(lambda *_: None, 1.0, lambda cluster: None, lambda address, _n: [both])  # type: ignore[list-item]
    assert not router.copy_direct([(0x8000, 0x1000, 4096)])
    assert log == []


def test_a_large_copy_is_split_into_parts_that_cover_each_byte_once() -> None:
    from datadist_sim.fabric.transport.peer_memory import split_copies

    copies = [(0x10000, 0x90000, 3 << 20), (0x800000, 0xA00000, 5000), (0x900000, 0xB00000, 0)]
    parts = split_copies(copies, 4)
    assert 1 < len(parts) <= 4
    flat = [piece for part in parts for piece in part]
    covered = {(dst + i, src + i) for dst, src, n in flat for i in range(0, n, 4096)}
    assert sum(n for _, _, n in flat) == sum(n for _, _, n in copies)
    assert len(covered) == len({(d + i, s + i) for d, s, n in copies for i in range(0, n, 4096)})
    # every cut falls on a page boundary of its copy, and pieces of one copy stay in order
    for (dst, src, n), nxt in zip(flat, flat[1:]):
        if nxt[0] == dst + n:
            assert n % 4096 == 0
            assert nxt[1] == src + n
    assert split_copies(copies, 1) == [copies]


def test_a_copy_split_among_threads_reads_every_byte(
    child: Tuple[int, int, Tuple[int, bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    from datadist_sim.fabric.transport import peer_memory

    pid, address, mark = child
    if not xmem.readable(pid, mark, [(address, 1 << 16)]):
        pytest.skip("the kernel does not let this process read its child's memory")
    monkeypatch.setattr(peer_memory, "_ways", lambda total: 3)
    used: List[int] = []
    real = peer_memory._read_part
    monkeypatch.setattr(
        peer_memory, "_read_part", lambda pid, part: (used.append(len(part)), real(pid, part))
    )
    out = np.zeros(1 << 16, dtype=np.uint8)
    xmem.read_from(pid, [(out.ctypes.data, address, 1 << 16)])
    assert len(used) == 3  # three parts, each read
    assert out.tolist() == (np.arange(1 << 16) % 251).tolist()


def test_a_failed_part_of_a_split_copy_raises_and_writes_only_the_copy(
    child: Tuple[int, int, Tuple[int, bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    from datadist_sim.fabric.transport import peer_memory

    pid, address, mark = child
    if not xmem.readable(pid, mark, [(address, 1 << 16)]):
        pytest.skip("the kernel does not let this process read its child's memory")
    monkeypatch.setattr(peer_memory, "_ways", lambda total: 2)
    out = np.zeros(3 << 14, dtype=np.uint8)
    # the first 32 KiB are the peer's, the next 16 KiB lie at an address the peer does not have
    copies = [(out.ctypes.data, address, 1 << 15), (out.ctypes.data + (1 << 15), 0x10, 1 << 13)]
    with pytest.raises(xmem.PeerMemoryError):
        xmem.read_from(pid, copies)
    assert not out[1 << 15 :].any()  # the range the peer lacks, and the bytes past every copy
