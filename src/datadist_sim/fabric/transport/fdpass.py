"""Memory files handed to a client as descriptors (``SCM_RIGHTS``) beside an ordinary reply.

A client maps a cache or a scratch file by asking the fabric for it by name on one of its authenticated
call connections; the fabric's reply is a normal message (the file's size) and the descriptor rides in
the same ``sendmsg`` as ancillary data, so the message encoding never sees it. Nothing of a path is
involved, so a client in another PID namespace or user namespace (a pod's sidecar, a container sharing
the socket directory) maps the memory just as well: ``/proc/<fabric pid>/fd/<n>`` would name another
process there, or be refused by the kernel's ptrace check.

Rules on the client's side: descriptors are received only on a call connection that passed the
handshake and was attached to the session; at most ``MAX_FDS`` per message, any surplus (the kernel
cuts it off, ``MSG_CTRUNC``) failing the fetch with everything received closed; and a received file is
checked (a sealed, fixed-size memory file of the name asked for) before it is mapped, then closed. Ordinary
replies are read with ``recv``, which makes the kernel discard any descriptor a peer attached.
"""

from __future__ import annotations

import array
import contextlib
import fcntl
import os
import select
import socket
import stat
import threading
import time
from typing import List, Optional

from datadist_sim.fabric.transport.wire import HEADER, ChannelClosed, ChannelTimeout

MAX_FDS = 1
"""Descriptors one message may carry: a fetch asks for one file."""

FIXED_SIZE_SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW
"""What a received file must be sealed with: nobody can change its size under a mapping (``SIGBUS``)."""

_handing = threading.local()
"""On a fabric thread answering a fetch: the descriptor to send beside the reply."""


# -- the fabric's side ----------------------------------------------------------------------------------


def hand_over(fd: int) -> None:
    """Send ``fd`` (a duplicate this thread owns) beside the reply this thread sends next."""
    _handing.fd = fd


def take_handed() -> Optional[int]:
    """The descriptor ``hand_over`` left for this thread's reply, if any (now the caller's to close)."""
    fd: Optional[int] = getattr(_handing, "fd", None)
    _handing.fd = None
    return fd


def send_with_fd(sock: socket.socket, payload: bytes, fd: int, timeout: float) -> None:
    """Send one frame (``wire``'s header and ``payload``) on a non-blocking socket, with ``fd`` attached
    to its first bytes; a peer that takes none of it for ``timeout`` seconds is ``ChannelTimeout``."""
    rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]).tobytes())]
    view = memoryview(HEADER.pack(len(payload)) + payload)
    deadline = time.monotonic() + timeout
    while view:
        try:
            sent = sock.sendmsg([view], rights) if rights else sock.send(view)
        except BlockingIOError:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ChannelTimeout("the peer takes no data") from None
            select.select([], [sock], [], left)
            continue
        rights = []  # the descriptor went with the first bytes
        view = view[sent:]


# -- the client's side ----------------------------------------------------------------------------------


def recv_bounded(sock: socket.socket, most: int, fds: List[int]) -> bytes:
    """Up to ``most`` bytes from a non-blocking socket (``BlockingIOError`` if none yet); descriptors
    that came with them are appended to ``fds``. More than ``MAX_FDS`` in all, or a cut-off control
    message, closes every one received and raises ``ChannelClosed``."""
    space = socket.CMSG_SPACE(MAX_FDS * array.array("i").itemsize)
    data, ancillary, flags, _ = sock.recvmsg(most, space)
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            got = array.array("i")
            got.frombytes(payload[: len(payload) - len(payload) % got.itemsize])
            fds.extend(got)
    if flags & socket.MSG_CTRUNC or len(fds) > MAX_FDS:
        close_all(fds)
        raise ChannelClosed(f"the fabric sent more than {MAX_FDS} descriptor(s) in one message")
    return data


def close_all(fds: List[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)
    fds.clear()


def check_memory_file(fd: int, name: str, size: int) -> None:
    """``fd`` must be the sealed memory file ``name`` of ``size`` bytes the fabric said it sent:
    anything else (a growable file, another size, another file) raises ``FileNotFoundError``."""
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_size != size:
        raise FileNotFoundError(f"the fabric's memory {name} is not a {size} B memory file")
    try:
        seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
    except OSError:  # EINVAL: not a file that can be sealed
        seals = 0
    if seals & FIXED_SIZE_SEALS != FIXED_SIZE_SEALS:
        raise FileNotFoundError(f"the fabric's memory {name} is not sealed against resizing")
    try:
        link = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:  # no /proc in this mount namespace: the seals and size are what matter
        return
    if link != f"/memfd:{name} (deleted)":
        raise FileNotFoundError(f"the fabric sent another file than its memory {name}")
