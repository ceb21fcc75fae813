"""Raw pointers of client processes: who owns one, and having the owner read or write it.

Small reads and writes travel in the message; large ones through a warm shared scratch file that the
owner copies into or out of, so KV bytes never pass through the socket; bytes read into a scratch file
for a write to another process are written from that same file (two copies, none in the fabric). A copy
from one process's raw memory to another's is, where the kernel allows it, one copy: the destination's
owner reads the source's memory itself (``xmem``). An owner that has died, or does not answer within
``timeout_s``, times the transfer out with the mode's code.

A small ``hixl`` transfer carries the calling process's side of it in its call and its reply
(``carried.py``): a READ into the caller's own memory costs no request to either process (the fabric
reads the source's registered memory itself where the kernel allows it, ``transport/peer_memory.py``,
and the bytes the world writes into the caller's memory travel back in the reply, which the caller
writes, all or nothing); a WRITE from it costs one, the destination's write, since its bytes came with
the call. Every decision (ranges, faults, time, trace) is still the world's, made before any byte moves.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

import numpy as np

from datadist_sim._status import LLMStatusCode
from datadist_sim._world.surface import Mode, SimError, copy_parties
from datadist_sim.fabric.host.carried import INLINE_BYTES, current
from datadist_sim.fabric.host.session import Session, calling_session
from datadist_sim.fabric.host.shm import Range, Scratch, Take
from datadist_sim.fabric.transport.channel import ChannelClosed, ChannelTimeout
from datadist_sim.fabric.transport.memfile import Bytes
from datadist_sim.fabric.transport.peer_memory import Mark, read_ranges

MEMORY_TIMEOUT_S = 30.0
"""Longest wait for a client to read or write its own memory; past it the transfer times out."""


DST, SRC = 0, 1
"""Which party of a copy (``surface.copy_parties``) a range belongs to."""
SessionOf = Callable[[object], Optional[Session]]
"""The process that runs a cluster, or owns a hixl engine (None if no live process does)."""
Holders = Callable[[int, int], List[Session]]
"""The processes whose live registered memory holds a range."""


class RawRouter:
    """Finds the process that owns a raw pointer and has it read or write its memory.

    An address alone names no memory: two processes may hold their own at the same number (workers
    started by ``fork``, ASLR off). So a copy made by a transfer goes to the process that runs the
    cluster on that side of it (the world names both, ``surface.copy_parties``). A copy with no named
    parties goes to the calling process if the range is registered memory of it or of no process, else
    to the one process whose registered memory holds it; the registrations are the world's own (a cache
    unregistered, or a cluster killed with its process, is forgotten with it), never a table of ours.
    """

    def __init__(
        self,
        on_silent: Callable[[Session, bool], None],
        timeout_s: float,
        session_of: SessionOf,
        holders: Holders,
    ) -> None:
        self._lock = threading.Lock()
        self._on_silent = on_silent
        self._session_of = session_of
        self._holders = holders
        self.timeout_s = timeout_s
        self.direct = True
        """Whether raw-to-raw copies may go straight from process to process, and the fabric read a
        process's memory itself (tests turn it off)."""
        self._no_direct: Set[Tuple[int, int]] = set()  # (reader pid, owner pid) the kernel refused
        self.direct_copies = 0
        """Transfers done process to process (``status()`` shows it)."""
        self.peeks = 0
        """Reads the fabric made of a process's memory itself, without asking it (``status()``)."""
        self._marks: weakref.WeakKeyDictionary[Session, Mark] = weakref.WeakKeyDictionary()

    def _owner(self, address: int, nbytes: int) -> Session:
        """The owner of a range outside a transfer that names its parties."""
        holders = self._holders(address, nbytes)
        caller = calling_session()
        if caller is not None and (not holders or caller in holders):
            return caller
        if len(holders) == 1:
            return holders[0]
        if holders:
            raise SimError(
                LLMStatusCode.LLM_PARAM_INVALID,
                f"address {address:#x} (+{nbytes} B) is registered memory of processes "
                f"{sorted(h.pid for h in holders)}, none of them the caller: which one is meant is unknown",
            )
        raise SimError(
            LLMStatusCode.LLM_PARAM_INVALID,
            f"address {address:#x} (+{nbytes} B) is neither simulated nor registered memory of any process",
        )

    def _groups(self, keys: Sequence[Range], side: int) -> List[Tuple[Session, List[int]]]:
        """Indices of ``keys`` (ranges on ``side`` of the copy) grouped by owning process, in first-seen
        order."""
        parties = copy_parties()
        if parties is not None:
            owner = self._session_of(parties[side])
            if owner is not None:
                return [(owner, list(range(len(keys))))]
        groups: Dict[int, Tuple[Session, List[int]]] = {}
        for index, key in enumerate(keys):
            found = self._owner(*key)
            groups.setdefault(id(found), (found, []))[1].append(index)
        return list(groups.values())

    def _request(self, owner: Session, kind: str, *payload: Any) -> Any:
        try:
            return owner.channel.request(kind, *payload, timeout=self.timeout_s)
        except (ChannelClosed, ChannelTimeout) as exc:
            code = (
                LLMStatusCode.LLM_TIMEOUT
                if Mode.CACHE_MANAGER in owner.ran().values() or not owner.ran()
                else LLMStatusCode.LLM_WAIT_PROCESS_TIMEOUT
            )
            self._on_silent(owner, isinstance(exc, ChannelClosed))
            raise SimError(
                code, f"process {owner.pid} holding the memory did not answer ({exc}); transfer timed out"
            ) from None

    def read(self, ranges: Sequence[Range], take: Take) -> List[Bytes]:
        """The bytes of each range, read by its owner: small reads inline, large ones through a
        shared scratch file the owner copies into (no bytes through the socket)."""
        out: List[Bytes] = [np.empty(0, np.uint8)] * len(ranges)
        carried = current()
        for owner, indices in self._groups(ranges, SRC):
            part = [ranges[i] for i in indices]
            total = sum(n for _, n in part)
            small = total <= INLINE_BYTES
            given = carried.give(part) if carried is not None and owner is carried.session else None
            peeked = None
            if given is None and carried is not None and small and self.direct:
                peeked = self._peek(owner, part)
            if given is not None:  # the caller's own bytes, handed in with its call
                arrays = [np.frombuffer(data, np.uint8) for data in given]
            elif peeked is not None:
                arrays = peeked
            elif small:
                arrays = [np.frombuffer(b, np.uint8) for b in self._request(owner, "mem_read", part)]
            else:
                scratch = take(total)
                self._request(owner, "mem_read_to", scratch.path, part)
                arrays = scratch.split([n for _, n in part])
            for index, array in zip(indices, arrays):
                out[index] = array
        return out

    def _peek(self, owner: Session, ranges: Sequence[Range]) -> Optional[List[Bytes]]:
        """The ranges' bytes, read by the fabric itself from ``owner``'s memory (``peer_memory``); None
        where the kernel does not allow it or the memory is not there (the caller then asks the owner,
        whose answer, or silence, decides). The owner's mark is asked for once."""
        with self._lock:
            mark = self._marks.get(owner)
        if mark is None:
            where, raw = self._request(owner, "mem_check_read", [])
            mark = (int(where), bytes(raw))
            with self._lock:
                self._marks[owner] = mark
        found = read_ranges(owner.pid, mark, ranges)
        if found is not None:
            with self._lock:
                self.peeks += 1
        return found

    def check_writable(self, ranges: Sequence[Range], alone: bool = False) -> None:
        """Have each owner check its ranges are writable memory of its own, before anything is read or
        written. ``alone``: these are every destination of the copy (none is simulated memory, which
        the copy would write before them)."""
        carried = current()
        groups = self._groups(ranges, DST)
        if carried is not None and carried.sources_in_hand and alone and len(groups) == 1:
            # every source came with the call and one process writes every destination: its write
            # request checks every range before it writes any, so checking first adds only a trip
            return
        for owner, indices in groups:
            part = [ranges[i] for i in indices]
            if carried is not None and owner is carried.session and carried.covers(part):
                continue  # vouched for by the caller before it called, and checked again as it writes
            self._request(owner, "mem_check", part)

    def copy_direct(self, copies: Sequence[Tuple[int, int, int]]) -> bool:
        """``(dst, src, nbytes)`` between raw memory of two processes, read by the destination's owner
        straight from the source's (one copy). False, with nothing written, where that cannot be:
        several owners on a side, one process on both, or a kernel that refuses (remembered)."""
        if not self.direct or not copies:
            return False
        readers = self._groups([(d, n) for d, _, n in copies], DST)
        owners = self._groups([(s, n) for _, s, n in copies], SRC)
        if len(readers) != 1 or len(owners) != 1:
            return False
        reader, owner = readers[0][0], owners[0][0]
        carried = current()
        if carried is not None and carried.session in (reader, owner):
            return False  # the caller's side travels with its call or its reply: no request to it
        pair = (reader.pid, owner.pid)
        with self._lock:
            if reader is owner or pair in self._no_direct:
                return False
        # the owner vouches for its memory (and shows it is alive) as a read through it would
        mark = self._request(owner, "mem_check_read", [(s, n) for _, s, n in copies])
        if self._request(reader, "mem_pull", owner.pid, mark, list(copies)):
            with self._lock:
                self.direct_copies += 1
            return True
        with self._lock:
            self._no_direct.add(pair)
        return False

    def write(self, chunks: Sequence[Tuple[int, Bytes]], take: Take, lent: Sequence[Scratch] = ()) -> None:
        """Have each owner write its chunks (inline when small, else from a shared scratch file: from
        the ``lent`` one that already holds them, if one does). The calling process's, where its
        request takes them back (``carried.py``), are kept for its reply."""
        carried = current()
        for owner, indices in self._groups([(a, data.nbytes) for a, data in chunks], DST):
            part = [chunks[i] for i in indices]
            if carried is not None and owner is carried.session and carried.take(part):
                continue
            total = sum(data.nbytes for _, data in part)
            if total <= INLINE_BYTES:
                self._request(owner, "mem_write", [(a, data.tobytes()) for a, data in part])
                continue
            scratch, placed = _holding(lent, [data for _, data in part])
            if scratch is None:
                scratch = take(total)
                placed = scratch.fill([data for _, data in part])
            self._request(
                owner, "mem_write_from", scratch.path, [(a, o, n) for (a, _), (o, n) in zip(part, placed)]
            )


def _holding(
    lent: Sequence[Scratch], chunks: Sequence[Bytes]
) -> Tuple[Optional[Scratch], List[Tuple[int, int]]]:
    """The scratch file among ``lent`` that already holds every chunk (views of it, as ``read`` returns),
    and where each lies in it; ``(None, [])`` if none does."""
    for scratch in lent:
        base = scratch.array.__array_interface__["data"][0]
        placed = []
        for chunk in chunks:
            offset = chunk.__array_interface__["data"][0] - base if chunk.flags.c_contiguous else -1
            if offset < 0 or offset + chunk.nbytes > scratch.size:
                break
            placed.append((offset, chunk.nbytes))
        else:
            return scratch, placed
    return None, []
