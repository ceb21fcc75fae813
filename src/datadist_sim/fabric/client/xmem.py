"""Reading another process's memory straight into this one's (Linux ``process_vm_readv``).

A pull between raw pointers of two client processes is, on the device, one RDMA read. Through shared
scratch files it is two copies (the owner into the file, the reader out of it); with
``process_vm_readv`` the reading process copies the peer's pages into its own in one step, as fast as a
``memcpy`` between two mappings. The kernel allows it only where this process may trace the other
(same user, and Yama's ``ptrace_scope`` 0, or 1 with the reader an ancestor); elsewhere ``readable``
answers False before anything is written, and the fabric keeps the scratch-file path.
"""

from __future__ import annotations

import ctypes
import errno
import os
import secrets
import sys
from typing import Any, Callable, Optional, Sequence, Tuple

from datadist_sim._status import LLMStatusCode
from datadist_sim._world.surface import SimError

Copy = Tuple[int, int, int]
"""``(address in this process, address in the peer, nbytes)``."""


class _IoVec(ctypes.Structure):
    _fields_ = [("iov_base", ctypes.c_void_p), ("iov_len", ctypes.c_size_t)]


def _load() -> Optional[ctypes._CFuncPtr]:  # type: ignore[name-defined]
    if not sys.platform.startswith("linux"):
        return None
    try:
        function = ctypes.CDLL(None, use_errno=True).process_vm_readv
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


class PeerMemoryError(OSError):
    """A read from the peer failed part-way (its memory went away after it was checked)."""


def _read(pid: int, local: int, remote: int, nbytes: int) -> int:
    """One ``process_vm_readv`` call: bytes read, or ``-errno``."""
    assert _READV is not None
    mine, theirs = _IoVec(local, nbytes), _IoVec(remote, nbytes)
    done = int(_READV(pid, ctypes.byref(mine), 1, ctypes.byref(theirs), 1, 0))
    return done if done >= 0 else -ctypes.get_errno()


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
    if _READV is None or pid == os.getpid():
        return False
    where, want = mark
    got = ctypes.create_string_buffer(len(want))
    if _read(pid, ctypes.addressof(got), where, len(want)) != len(want) or got.raw != want:
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


def read_from(pid: int, copies: Sequence[Copy]) -> None:
    """Copy each ``(local, remote, nbytes)`` from the peer ``pid`` into this process, one kernel copy
    each; a failure part-way raises ``PeerMemoryError`` (call ``readable`` first: then only a peer that
    unmaps its memory meanwhile can cause one)."""
    for local, remote, nbytes in copies:
        done = 0
        while done < nbytes:
            got = _read(pid, local + done, remote + done, nbytes - done)
            if got <= 0:
                code = -got if got < 0 else errno.EFAULT
                raise PeerMemoryError(
                    code,
                    f"reading {nbytes} B at {remote:#x} of process {pid}: {os.strerror(code)} after {done} B",
                )
            done += got


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
