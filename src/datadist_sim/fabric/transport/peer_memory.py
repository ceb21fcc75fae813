"""Copying another process's memory into this one's (Linux ``process_vm_readv``), for both ends: a client
pulling a peer's bytes straight into its own memory (``fabric/client/xmem.py``), and the fabric reading
a small range of a client's registered memory without asking it (``fabric/host/raw.py``).

The kernel allows it only where this process may trace the other (same user, and Yama's
``ptrace_scope`` 0, or 1 with the reader an ancestor) and only over pages the other process has mapped
readable, the very check its owner makes of its own memory before reading it (``/proc/self/maps``);
anything else fails the call, and a caller falls back to asking the owner.
"""

from __future__ import annotations

import ctypes
import errno
import os
import sys
import threading
from typing import List, Optional, Sequence, Tuple

import numpy as np

from datadist_sim.fabric.transport.memfile import Bytes

Copy = Tuple[int, int, int]
"""``(address in this process, address in the peer, nbytes)``."""
Mark = Tuple[int, bytes]
"""Where a process keeps random bytes of its own, and those bytes (``xmem.identity``)."""


class _IoVec(ctypes.Structure):
    _fields_ = [("iov_base", ctypes.c_void_p), ("iov_len", ctypes.c_size_t)]


def _load(library: type = ctypes.CDLL) -> Optional[ctypes._CFuncPtr]:  # type: ignore[name-defined]
    if not sys.platform.startswith("linux"):
        return None
    try:
        function = library(None, use_errno=True).process_vm_readv
    except (OSError, AttributeError):
        return None
    function.argtypes = [
        ctypes.c_int,
        ctypes.POINTER(_IoVec),
        ctypes.c_ulong,
        ctypes.POINTER(_IoVec),
        ctypes.c_ulong,
        ctypes.c_ulong,
    ]
    function.restype = ctypes.c_ssize_t
    return function


_READV = _load()
_READV_HELD = _load(ctypes.PyDLL)
"""The same call keeping the GIL, its vectors passed as addresses (``read_ranges``): a small read is over
in microseconds, and letting go of the GIL in a busy process (the fabric's) costs more than that in
waiting to have it back."""
if _READV_HELD is not None:
    _READV_HELD.argtypes = [
        ctypes.c_int,
        ctypes.c_void_p,
        ctypes.c_ulong,
        ctypes.c_void_p,
        ctypes.c_ulong,
        ctypes.c_ulong,
    ]
_IOV_MAX = 1024
"""Most iovecs one ``process_vm_readv`` call takes (Linux ``UIO_MAXIOV``)."""


class PeerMemoryError(OSError):
    """A read from the peer failed part-way (its memory went away after it was checked)."""


def read_once(pid: int, local: int, remote: int, nbytes: int) -> int:
    """One ``process_vm_readv`` call: bytes read, or ``-errno``."""
    assert _READV is not None
    mine, theirs = _IoVec(local, nbytes), _IoVec(remote, nbytes)
    done = int(_READV(pid, ctypes.byref(mine), 1, ctypes.byref(theirs), 1, 0))
    return done if done >= 0 else -ctypes.get_errno()


def read_from(pid: int, copies: Sequence[Copy]) -> None:
    """Copy each ``(local, remote, nbytes)`` from the peer ``pid`` into this process, one kernel copy of
    each byte; a failure part-way raises ``PeerMemoryError`` (each destination byte then holds either
    its old value or the peer's: nothing outside the copies is written).

    A large copy is split into contiguous parts read at once by threads, one per CPU this process may
    run on (``split_copies``): the kernel copies each part on the CPU of the thread that asked, and on
    x86 machines without fast string moves (``erms``/``fsrm``) one CPU copies at about half the speed
    of a ``memcpy`` between two mappings (benchmarks/README.md, "The 64 MiB raw-pointer pull"), so a
    second CPU is what brings the copy near it. The threads release the GIL in the call."""
    parts = split_copies(copies, _ways(sum(nbytes for _, _, nbytes in copies)))
    if len(parts) <= 1:
        _read_part(pid, copies)
        return
    failed: List[Exception] = []

    def run(part: Sequence[Copy]) -> None:
        try:
            _read_part(pid, part)
        except Exception as exc:  # raised in this thread once every part has stopped
            failed.append(exc)

    helpers = [threading.Thread(target=run, args=(part,), daemon=True) for part in parts[1:]]
    for helper in helpers:
        helper.start()
    run(parts[0])
    for helper in helpers:
        helper.join()
    if failed:
        raise failed[0]


PART_MIN_BYTES = 4 << 20
"""Smallest part a copy is split into: below it a thread's start (tens of microseconds) costs more than
the part's copy gains from running beside another."""
MAX_WAYS = 4
"""Most threads one copy is split among."""


def _ways(total: int) -> int:
    """How many threads a copy of ``total`` bytes is read by: one per CPU this process may use, each
    with at least ``PART_MIN_BYTES``."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity on this platform
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, MAX_WAYS, total // PART_MIN_BYTES))


def split_copies(copies: Sequence[Copy], ways: int) -> List[List[Copy]]:
    """``copies`` cut into at most ``ways`` parts of about equal bytes (each cut on a page boundary of
    the copy), in order; together they cover every byte of every copy exactly once."""
    total = sum(nbytes for _, _, nbytes in copies)
    if ways <= 1 or total == 0:
        return [list(copies)]
    share = -(-total // ways)
    share = -(-share // _PAGE) * _PAGE
    parts: List[List[Copy]] = [[]]
    room = share
    for local, remote, nbytes in copies:
        done = 0
        while done < nbytes:
            if room == 0:
                parts.append([])
                room = share
            take = min(room, nbytes - done)
            parts[-1].append((local + done, remote + done, take))
            done += take
            room -= take
    return parts


_PAGE = 4096


def _read_part(pid: int, copies: Sequence[Copy]) -> None:
    """``read_from`` in the calling thread."""
    for local, remote, nbytes in copies:
        done = 0
        while done < nbytes:
            got = read_once(pid, local + done, remote + done, nbytes - done)
            if got <= 0:
                code = -got if got < 0 else errno.EFAULT
                raise PeerMemoryError(
                    code,
                    f"reading {nbytes} B at {remote:#x} of process {pid}: {os.strerror(code)} after {done} B",
                )
            done += got


def is_process(pid: int, mark: Mark) -> bool:
    """Whether ``pid`` is the process whose mark this is: its bytes read back as given (pid namespaces,
    or a pid reused after its process died, can make a number name another process)."""
    if _READV is None or pid == os.getpid():
        return False
    where, want = mark
    got = ctypes.create_string_buffer(len(want))
    return read_once(pid, ctypes.addressof(got), where, len(want)) == len(want) and got.raw == want


def read_ranges(pid: int, mark: Mark, ranges: Sequence[Tuple[int, int]]) -> Optional[List[Bytes]]:
    """The bytes of each ``(address, nbytes)`` of process ``pid`` (the one ``mark`` names), read into new
    buffers of this process; None if the kernel refuses any of it, or ``pid`` is not that process
    (nothing anyone sees is written either way). One system call reads the mark and every range, so
    the bytes are of the very process whose mark came back (not one that took over a reused pid); its
    vectors are laid out as one array of numbers, since building ctypes structures field by field costs
    more than the call itself."""
    where, want = mark
    if _READV_HELD is None or pid == os.getpid() or any(n < 0 for _, n in ranges):
        return None
    head = len(want)
    wanted = [(address, nbytes) for address, nbytes in ranges if nbytes > 0]
    count = 1 + len(wanted)
    if count > _IOV_MAX:
        return None
    total = head + sum(nbytes for _, nbytes in wanted)
    buf = bytearray(total)
    base = ctypes.addressof(ctypes.c_char.from_buffer(buf))
    mine, theirs, offset = [base, head], [where, head], head
    for address, nbytes in wanted:
        mine += (base + offset, nbytes)
        theirs += (address, nbytes)
        offset += nbytes
    vectors = (ctypes.c_uint64 * (4 * count))(*mine, *theirs)
    at = ctypes.addressof(vectors)
    done = int(_READV_HELD(pid, at, count, at + 16 * count, count, 0))
    if done != total or buf[:head] != want:
        return None  # refused, short (memory not there), or another process at that pid
    out: List[Bytes] = []
    offset = head
    for _, nbytes in ranges:
        out.append(np.frombuffer(buf, dtype=np.uint8, count=nbytes, offset=offset))
        offset += nbytes
    return out
