"""Raw pointers of this very process: whether ``/proc/self/maps`` vouches for a range, and views of it.

A raw pointer (``tensor.data_ptr()`` of a CPU tensor, ``arr.ctypes.data``) is read and written in place,
but only once the whole range shows mapped with the needed permissions (``address_space`` decides what
an address that is not vouched for means).
"""

from __future__ import annotations

import ctypes
import mmap
import os
import sys
import threading
from bisect import bisect_right
from typing import Dict, List, Optional, Tuple

import numpy as np
import numpy.typing as npt

Bytes = npt.NDArray[np.uint8]
Mapping = Tuple[int, int, bool, bool]
"""One line of ``/proc/self/maps``: start, end, readable, writable."""
Pair = Tuple[memoryview, memoryview, Tuple[memoryview, ...]]
"""A small copy's destination view, source view, and one-byte probes of every page of both."""
Again = Tuple[Pair, object]
"""A ``Pair`` and the parse of the maps it was found in (``ProcessMemory.parse``)."""


class ProcessMemory:
    """Vouches for raw pointers of this process by reading ``/proc/self/maps``.

    The parse is cached and re-read on a miss (mappings change). A hit is re-checked cheaply through
    ``/proc/self/mem``, which fails with ``EIO`` instead of faulting, so memory unmapped since the parse
    is caught: a small range is read whole in one system call, a large one at its first and last pages
    (where ``/proc/self/mem`` is denied, every check re-reads the maps instead). What is *not* caught: a
    mapping whose permissions changed since the parse, a hole punched in the middle of a large range, or
    a file mapping past its file's end; clients register their own live arrays, where none of these
    happen. A small copy between two raw ranges (``copy_small``) is vouched for by the kernel reading
    one byte of every page of both, in one system call, instead.
    """

    _SKIP_NAMES = ("[vvar", "[vsyscall]")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._table: Tuple[List[Mapping], List[int]] = ([], [])
        """The last parse and its start addresses, replaced whole (one assignment), so a check reads a
        consistent pair without taking the lock."""
        self._mem_fd: Optional[int] = None
        self._pid = 0  # the process _mem_fd belongs to: after a fork it reads the parent's memory
        self.supported = sys.platform.startswith("linux") and os.path.exists("/proc/self/maps")
        self._views: Dict[int, memoryview] = {}
        """Views of whole mappings of the current parse, by start, made on first use (``_view``)."""
        self._found: Dict[Tuple[int, int, bool], Tuple[memoryview, Tuple[memoryview, ...]]] = {}
        """Views of ranges ``_view`` found in the current parse, by ``(address, nbytes, writable)``."""
        self._pairs: Dict[Tuple[int, int, int], Pair] = {}
        """What ``copy_small`` found for a ``(dst, src, nbytes)`` in the current parse: both views and
        the probes of both."""
        self._pipe: Optional[Tuple[int, int]] = None
        self._pipe_pid = 0

    def refresh(self) -> None:
        """Re-read ``/proc/self/maps``."""
        maps: List[Mapping] = []
        with open("/proc/self/maps", encoding="ascii", errors="replace") as handle:
            for line in handle:
                fields = line.split(None, 5)
                name = fields[5].strip() if len(fields) > 5 else ""
                if name.startswith(self._SKIP_NAMES) or (
                    name.startswith("/dev/") and not name.startswith(("/dev/shm/", "/dev/zero"))
                ):
                    continue
                low, high = fields[0].split("-")
                maps.append((int(low, 16), int(high, 16), fields[1][0] == "r", fields[1][1] == "w"))
        self._table = (maps, [entry[0] for entry in maps])
        self._views = {}
        self._found = {}
        self._pairs = {}

    def covers(self, address: int, nbytes: int, *, writable: bool) -> bool:
        """Whether ``[address, address + nbytes)`` is mapped readable (and writable, if asked) right now."""
        if not self.supported or address <= 0 or nbytes <= 0:
            return False
        probe = self._probe(address, nbytes)
        if probe is not None and probe and self._covered(address, nbytes, writable):
            return True
        self.refresh()  # a miss, a failed probe, or no probe at all: ask the kernel again
        return probe is not False and self._covered(address, nbytes, writable)

    def _covered(self, address: int, nbytes: int, writable: bool) -> bool:
        maps, starts = self._table
        index = bisect_right(starts, address) - 1
        cursor, end = address, address + nbytes
        while 0 <= index < len(maps):
            start, stop, readable, can_write = maps[index]
            if not start <= cursor < stop or not readable or (writable and not can_write):
                return False
            if end <= stop:
                return True
            cursor, index = stop, index + 1
        return False

    def _probe(self, address: int, nbytes: int) -> Optional[bool]:
        """Whether the range (a small one whole, else its first and last pages) is mapped; ``None`` if
        ``/proc/self/mem`` is denied.

        Each ``pread`` is a system call, the dearest step of a small transfer, so a probe makes one
        where it can: pages are mapped and unmapped whole, so one byte vouches for its page."""
        fd = self._mem_fd if self._pid == _PID[0] else self._memory_fd()
        if fd is None:
            return None
        last = address + nbytes - 1
        try:
            if nbytes <= _WHOLE:  # one read of every byte vouches for every page, holes included
                return len(os.pread(fd, nbytes, address)) == nbytes
            if len(os.pread(fd, 1, address)) != 1:
                return False
            return (last ^ address) < _PAGE or len(os.pread(fd, 1, last)) == 1
        except (OSError, OverflowError):
            return False

    def copy_small(self, dst: int, src: int, nbytes: int) -> bool:
        """Copy a small range (up to ``_WHOLE`` bytes) between two raw ranges this process maps, once
        the kernel has vouched for every page of both; False when it cannot vouch that way (a range
        outside the cached parse or wider than one of its mappings, no pipe, a page gone since the
        parse), and then nothing was written: the caller takes the full path (``covers``, then a copy).
        """
        pair = self.small_pair(dst, src, nbytes)
        return pair is not None and self.copy_pair((pair, self._table))

    @property
    def parse(self) -> object:
        """The current parse of the maps, as a token: a ``Pair`` found under another one is stale."""
        return self._table

    def small_pair(self, dst: int, src: int, nbytes: int) -> Optional[Pair]:
        """The views of a small copy ``(dst, src, nbytes)`` and the probes of both, found in the current
        parse (kept for it: a client moves the same ranges again); None if either range is not inside
        one mapping with the needed permissions, or is larger than ``_WHOLE``. No byte is read."""
        key = (dst, src, nbytes)
        pair = self._pairs.get(key)
        if pair is None:
            if not 0 < nbytes <= _WHOLE:
                return None
            target, source = self._view(dst, nbytes, True), self._view(src, nbytes, False)
            if target is None or source is None:
                return None
            if len(self._pairs) >= _FOUND_MAX:
                self._pairs = {}
            pair = self._pairs[key] = (target[0], source[0], target[1] + source[1])
        return pair

    def copy_pair(self, again: Again) -> bool:
        """Copy what ``small_pair`` found (``again``: it and the parse it was found in), once the kernel
        has vouched for every page of both ranges; False (nothing written) if the maps were parsed
        again since, or a page is gone.

        One ``writev`` into a pipe hands the kernel one byte of each page of both ranges: it reads
        them as it would any buffer, and reports a page that is gone as a short write or ``EFAULT``
        instead of faulting (pages are mapped and unmapped whole, so one byte vouches for its page).
        Only then do the bytes move, by one memmove. One cheap system call instead of a
        ``/proc/self/mem`` read per range, each of which walks the page tables as a foreign reader
        would: on a small transfer, most of the check's cost. What the pipe holds is thrown away only
        when it is full (a write that does not fit is short, or refused whole): the pipe is emptied
        and the write made once more, and only a second short write is a refusal. So threads share
        the pipe without a lock: another thread's bytes can only make a write short, never vouch for
        a page of this one."""
        pair, parse = again
        if parse is not self._table:
            return False
        pipe = self._pipe if self._pipe_pid == _PID[0] else self._new_pipe()
        if pipe is None:
            return False
        if not _vouched(pipe, pair[2]):
            _drain(pipe[0])  # full, or a page is gone: empty it and ask once more
            if not _vouched(pipe, pair[2]):
                return False
        pair[0][:] = pair[1]
        return True

    def _view(
        self, address: int, nbytes: int, writable: bool
    ) -> Optional[Tuple[memoryview, Tuple[memoryview, ...]]]:
        """A view of a range inside one mapping of the cached parse (readable, and writable if asked),
        sliced from a view of the whole mapping made once per parse, with one-byte views of its first
        byte and of the first byte of each further page it touches; None otherwise. No byte is read.
        What is found is kept for the parse too: a client moves the same ranges again."""
        key = (address, nbytes, writable)
        found = self._found.get(key)
        if found is not None:
            return found
        maps, starts = self._table
        index = bisect_right(starts, address) - 1
        if index < 0:
            return None
        start, stop, readable, can_write = maps[index]
        if address + nbytes > stop or not readable or (writable and not can_write):
            return None
        views = self._views
        whole = views.get(start)
        if whole is None:
            whole = views[start] = memoryview((ctypes.c_ubyte * (stop - start)).from_address(start)).cast("B")
        offset = address - start
        pages = range((address | (_PAGE - 1)) + 1, address + nbytes, _PAGE)
        probes = (whole[offset : offset + 1], *(whole[p - start : p - start + 1] for p in pages))
        found = (whole[offset : offset + nbytes], probes)
        if len(self._found) >= _FOUND_MAX:
            self._found = {}
        self._found[key] = found
        return found

    def _new_pipe(self) -> Optional[Tuple[int, int]]:
        with self._lock:
            if self._pipe_pid != _PID[0]:
                if self._pipe is not None:  # inherited across fork: shared with the parent
                    for fd in self._pipe:
                        os.close(fd)
                self._pipe, self._pipe_pid = None, _PID[0]
                try:  # non-blocking: a write that does not fit fails instead of waiting for a reader
                    self._pipe = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
                except (OSError, AttributeError):  # no pipe2 (not Linux): the full path serves
                    return None
            return self._pipe

    def _memory_fd(self) -> Optional[int]:
        with self._lock:
            if self._pid != _PID[0]:
                if self._mem_fd is not None:
                    os.close(self._mem_fd)  # inherited across fork: it would read the parent
                self._pid = _PID[0]
                try:
                    self._mem_fd = os.open("/proc/self/mem", os.O_RDONLY | os.O_CLOEXEC)
                except OSError:  # some sandboxes deny it: then every check re-reads the maps
                    self._mem_fd = None
            return self._mem_fd


_PAGE = mmap.PAGESIZE
_WHOLE = 4 * _PAGE
"""Up to this size a probe reads the whole range in one system call (the kernel stops at the first
unmapped page, so a short read is a refusal); past it, the kernel's copy would cost more than a second
call, and only the first and last pages are read."""
_FOUND_MAX = 4096
"""At most this many ranges' views are kept per parse (then they are found again)."""
_PIPE_BYTES = 1 << 16
"""A pipe's default capacity on Linux (16 pages), read in one go to empty it. A ``copy_pair`` writes
one byte per page of two ranges of at most ``_WHOLE``, which always fits an emptied pipe."""
_PID = [os.getpid()]
"""This process's id, kept current across ``fork`` without asking the kernel on every check."""


def _vouched(pipe: Tuple[int, int], probes: Tuple[memoryview, ...]) -> bool:
    """Whether the kernel read every probe into the pipe: False when a page is gone (``EFAULT``, or a
    short write at the first probe it cannot read) or the pipe is full (refused whole, or short)."""
    try:
        return os.writev(pipe[1], probes) == len(probes)
    except OSError:  # EFAULT, or EAGAIN when the pipe is full
        return False


def _drain(fd: int) -> None:
    """Empty a non-blocking pipe after a refused copy, so the next one starts from nothing."""
    try:
        while os.read(fd, _PIPE_BYTES):
            pass
    except OSError:  # EAGAIN: empty
        pass


def _forked() -> None:
    _PID[0] = os.getpid()


if hasattr(os, "register_at_fork"):  # POSIX only
    os.register_at_fork(after_in_child=_forked)


PROCESS_MEMORY = ProcessMemory()
"""The process's one view of its own mappings, shared by every address space (it holds one fd)."""


def raw_view(address: int, nbytes: int, *, writable: bool) -> Bytes:
    """A uint8 view of process memory at ``address``, with no check at all: call only once vouched for."""
    array: Bytes = np.frombuffer(memoryview((ctypes.c_ubyte * nbytes).from_address(address)), dtype=np.uint8)
    if not writable:
        array.flags.writeable = False
    return array
