"""Reading another process's memory straight into this one's (Linux ``process_vm_readv``).

A pull between raw pointers of two client processes is, on the device, one RDMA read. Through shared
scratch files it is two copies (the owner into the file, the reader out of it); with
``process_vm_readv`` the reading process copies the peer's pages into its own in one step, at the speed
of the kernel's copy (which, on x86 without fast string moves, is half a ``memcpy`` per CPU: a large one
is split among threads, ``peer_memory.read_from``). The kernel allows it only where this process may
trace the other (same user, and Yama's ``ptrace_scope`` 0, or 1 with the reader an ancestor); elsewhere
``readable`` answers False before anything is written, and the fabric keeps the scratch-file path. The
kernel call itself is ``fabric/transport/peer_memory.py``'s (the fabric reads small ranges with it too).
"""

from __future__ import annotations

import ctypes
import secrets
from typing import Any, Callable, Sequence, Tuple

from datadist_sim._status import LLMStatusCode
from datadist_sim._world.surface import SimError
from datadist_sim.fabric.transport.peer_memory import _READV, Copy, PeerMemoryError, is_process, read_from
from datadist_sim.fabric.transport.peer_memory import read_once as _read

__all__ = ["_READV", "Copy", "PeerMemoryError", "identity", "read_from", "readable", "serve_pull"]


_MARK = ctypes.create_string_buffer(secrets.token_bytes(16), 16)
"""Random bytes at a known address of this process: a peer that reads them back at the pid it was
given knows that pid is this process (pid namespaces can make the fabric's pid name another one)."""


def identity() -> Tuple[int, bytes]:
    """``(address, bytes)`` of this process's mark (see ``_MARK``)."""
    return ctypes.addressof(_MARK), _MARK.raw


def readable(pid: int, mark: Tuple[int, bytes], ranges: Sequence[Tuple[int, int]]) -> bool:
    """Whether this process may read the peer's ``(address, nbytes)`` ranges directly: the peer's mark
    reads back as given, and each range's first and last byte can be read (into scratch bytes: nothing
    of this process's memory that anyone sees changes)."""
    if not is_process(pid, mark):
        return False
    probe = ctypes.create_string_buffer(1)
    where = ctypes.addressof(probe)
    for address, nbytes in ranges:
        if nbytes <= 0:  # nothing to read (its owner does not check an empty range either)
            continue
        for byte in {address, address + nbytes - 1}:
            if _read(pid, where, byte, 1) != 1:
                return False
    return True


def serve_pull(payload: Tuple[Any, ...], own: Callable[..., Any]) -> bool:
    """A client's side of ``mem_pull``: ``(peer pid, peer mark, [(dst, src, nbytes)])``, ``dst`` in this
    process (checked writable by ``own``), ``src`` in the peer's. False, nothing written, if the peer
    cannot be read directly; memory the peer unmapped after vouching for it is ``LLM_PARAM_INVALID``."""
    pid, mark, copies = payload
    for dst, _, nbytes in copies:
        own(dst, nbytes, writable=True)
    if not readable(pid, mark, [(src, nbytes) for _, src, nbytes in copies]):
        return False
    try:
        read_from(pid, copies)
    except PeerMemoryError as exc:  # as the peer's own check refuses memory it does not have
        raise SimError(LLMStatusCode.LLM_PARAM_INVALID, str(exc)) from None
    return True
