"""Raw pointers of client processes: who owns one, and having the owner read or write it.

Small reads and writes travel in the message; large ones through a warm shared scratch file that the
owner copies into or out of, so KV bytes never pass through the socket. An owner that has died, or
does not answer within ``timeout_s``, times the transfer out with the mode's code.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Dict, List, Sequence, Tuple

import numpy as np

from datadist_sim._status import LLMStatusCode
from datadist_sim._world.cluster import Mode
from datadist_sim._world.errors import SimError
from datadist_sim.fabric.channel import ChannelClosed, ChannelTimeout
from datadist_sim.fabric.session import Session, calling_session
from datadist_sim.fabric.shm import Bytes, Range, Take

INLINE_BYTES = 256 << 10
"""Raw-memory reads and writes up to this size travel in the message; larger ones through shared memory."""
MEMORY_TIMEOUT_S = 30.0
"""Longest wait for a client to read or write its own memory; past it the transfer times out."""


class RawRouter:
    """Finds the process that owns a raw pointer and has it read or write its memory.

    Ranges a process registered (``register_cache`` and the like) are remembered with their owner;
    any other raw pointer belongs to the process whose call is running.
    """

    def __init__(self, on_silent: Callable[[Session, bool], None], timeout_s: float) -> None:
        self._lock = threading.Lock()
        self._ranges: List[Tuple[int, int, Session]] = []
        self._on_silent = on_silent
        self.timeout_s = timeout_s

    def add(self, session: Session, start: int, nbytes: int) -> None:
        with self._lock:
            self._ranges.append((start, start + max(nbytes, 1), session))

    def drop(self, session: Session) -> None:
        with self._lock:
            self._ranges = [entry for entry in self._ranges if entry[2] is not session]

    def _owner(self, address: int, nbytes: int) -> Session:
        with self._lock:
            for low, high, session in reversed(self._ranges):
                if low <= address and address + nbytes <= high:
                    return session
        caller = calling_session()
        if caller is None:
            raise SimError(
                LLMStatusCode.LLM_PARAM_INVALID,
                f"address {address:#x} (+{nbytes} B) is neither simulated nor registered memory "
                "of any process",
            )
        return caller

    def _groups(self, keys: Sequence[Range]) -> List[Tuple[Session, List[int]]]:
        """Indices of ``keys`` grouped by owning process, in first-seen order."""
        groups: Dict[int, Tuple[Session, List[int]]] = {}
        for index, key in enumerate(keys):
            owner = self._owner(*key)
            groups.setdefault(id(owner), (owner, []))[1].append(index)
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
        for owner, indices in self._groups(ranges):
            part = [ranges[i] for i in indices]
            total = sum(n for _, n in part)
            if total <= INLINE_BYTES:
                arrays = [np.frombuffer(b, np.uint8) for b in self._request(owner, "mem_read", part)]
            else:
                scratch = take(total)
                self._request(owner, "mem_read_to", scratch.path, part)
                arrays = scratch.split([n for _, n in part])
            for index, array in zip(indices, arrays):
                out[index] = array
        return out

    def check_writable(self, ranges: Sequence[Range]) -> None:
        for owner, indices in self._groups(ranges):
            self._request(owner, "mem_check", [ranges[i] for i in indices])

    def write(self, chunks: Sequence[Tuple[int, Bytes]], take: Take) -> None:
        """Have each owner write its chunks (inline when small, else from a shared scratch file)."""
        for owner, indices in self._groups([(a, data.nbytes) for a, data in chunks]):
            part = [chunks[i] for i in indices]
            total = sum(data.nbytes for _, data in part)
            if total <= INLINE_BYTES:
                self._request(owner, "mem_write", [(a, data.tobytes()) for a, data in part])
                continue
            scratch = take(total)
            placed = scratch.fill([data for _, data in part])
            self._request(
                owner, "mem_write_from", scratch.path, [(a, o, n) for (a, _), (o, n) in zip(part, placed)]
            )
