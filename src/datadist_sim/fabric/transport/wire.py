"""What crosses a fabric's socket, and what is checked before anything is believed.

Before a single byte is decoded, each end checks the other:

- **the socket and its directory are ours**: the directory is owned by this user and private (no group or
  other bits), and the peer's credentials (``SO_PEERCRED``, filled in by the kernel) carry our uid;
- **both ends know the world's token**: the stdlib's ``multiprocessing.connection`` challenge-response
  (``deliver_challenge`` / ``answer_challenge``: each side sends a random challenge and checks an HMAC of
  it under the token), run in both directions, so the token itself never crosses the wire and a squatter
  at the path cannot pass for the fabric.

After that, frames are an 8-byte length and a message, encoded and decoded by ``fabric/transport/codec.py``
(msgpack against a typed schema, through msgspec: no frame can name a type or code to run, and none can
make the decoder allocate past a small multiple of its own length).
"""

from __future__ import annotations

import os
import select
import socket
import stat
import struct
import time
from multiprocessing import AuthenticationError
from multiprocessing.connection import answer_challenge, deliver_challenge
from typing import Any, List, Optional, Tuple

from datadist_sim.fabric.transport.exceptions import PackedException as PackedException
from datadist_sim.fabric.transport.exceptions import RemoteError as RemoteError
from datadist_sim.fabric.transport.exceptions import pack_exception as pack_exception
from datadist_sim.fabric.transport.exceptions import unpack_exception as unpack_exception

HEADER = struct.Struct("!Q")
MAX_FRAME = 1 << 40
HELLO = b"datadist-sim fabric 3"
"""The client's first frame: it names the protocol (version 3: a message is msgpack, ``codec``),
and until it arrives a connection costs nothing but its file descriptor (the fabric starts the challenge
only for a peer that speaks)."""
HANDSHAKE_TIMEOUT_S = 5.0
"""Longest time the whole handshake may take, on either side."""
_CRED = struct.Struct("3i")


class ChannelClosed(ConnectionError):
    """The other end is gone (its process died or closed the connection)."""


class ChannelTimeout(TimeoutError):
    """No reply came within the wait's timeout."""


class FabricRefused(RuntimeError):
    """What listens at a fabric's address is not our fabric (or its directory is not private)."""


# -- frames ----------------------------------------------------------------------------------------------


def recv_exact(sock: socket.socket, nbytes: int) -> bytes:
    chunks: List[bytes] = []
    remaining = nbytes
    while remaining:
        chunk = sock.recv(min(remaining, 1 << 22))
        if not chunk:
            raise ChannelClosed("connection closed")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def send_frame(sock: socket.socket, payload: bytes) -> None:
    """One frame on a blocking socket (or one with a timeout)."""
    if len(payload) < 65536:
        sock.sendall(HEADER.pack(len(payload)) + payload)
    else:  # no concatenated copy of a large payload
        sock.sendall(HEADER.pack(len(payload)))
        sock.sendall(payload)


def recv_frame(sock: socket.socket) -> bytes:
    (length,) = HEADER.unpack(recv_exact(sock, HEADER.size))
    if length > MAX_FRAME:
        raise ChannelClosed(f"frame of {length} B is larger than any message")
    return recv_exact(sock, length)


def send_nonblocking(sock: socket.socket, payload: bytes, timeout: float) -> None:
    """``sendall`` for a non-blocking socket (the fabric's, watched by its poll): wait for room at
    most ``timeout`` seconds in all; a peer that stops reading for longer is given up on. A small
    message usually goes in one ``send`` with room to spare: then nothing else is done."""
    header = HEADER.pack(len(payload))
    if len(payload) < 65536:
        whole = header + payload
        try:
            sent = sock.send(whole)
        except BlockingIOError:
            sent = 0
        if sent == len(whole):
            return
        parts = [whole[sent:]]
    else:
        parts = [header, payload]
    deadline = time.monotonic() + timeout
    poller: Optional[select.poll] = None
    for part in parts:
        view = memoryview(part)
        while view:
            try:
                view = view[sock.send(view) :]
            except BlockingIOError:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ChannelTimeout(f"the peer took no data for {timeout} s") from None
                if poller is None:
                    poller = select.poll()
                    poller.register(sock, select.POLLOUT)
                poller.poll(left * 1000)


# -- who is at the other end ---------------------------------------------------------------------------


def peer_credentials(sock: socket.socket) -> Tuple[int, int]:
    """``(pid, uid)`` of the process at the other end of a Unix socket, as the kernel recorded them."""
    pid, uid, _gid = _CRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CRED.size))
    return pid, uid


def check_peer(sock: socket.socket, what: str) -> int:
    """The peer's pid, once its uid is ours; else ``FabricRefused``."""
    pid, uid = peer_credentials(sock)
    if uid != os.getuid():
        raise FabricRefused(f"{what} belongs to uid {uid} (pid {pid}), not to this user (uid {os.getuid()})")
    return pid


def check_private_directory(folder: str) -> None:
    """Refuse a directory that is not this user's own and private (mode 0700 or narrower)."""
    try:
        info = os.lstat(folder)
    except FileNotFoundError:
        raise FabricRefused(f"the fabric directory {folder} does not exist") from None
    if not stat.S_ISDIR(info.st_mode):
        raise FabricRefused(f"{folder} is not a directory (a symlink or a file): refusing to use it")
    if info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise FabricRefused(
            f"{folder} is not a private directory of this user (owner uid {info.st_uid}, mode "
            f"{stat.S_IMODE(info.st_mode):o}; needs uid {os.getuid()} and mode 700): refusing to use it"
        )


def private_directory(folder: str) -> str:
    """Create ``folder`` (and its parents) with mode 0700 if it is missing; refuse it if it is not ours
    and private."""
    os.makedirs(folder, mode=0o700, exist_ok=True)
    check_private_directory(folder)
    return folder


# -- the handshake -------------------------------------------------------------------------------------


class _Frames:
    """``multiprocessing.connection``'s handshake talks through ``send_bytes``/``recv_bytes``: our frames,
    every read and write within one ``deadline`` for the whole handshake (a peer that sends a byte at a
    time holds it no longer than a silent one)."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self._sock = sock
        self._deadline = deadline

    def _left(self) -> float:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout("the handshake took too long")
        self._sock.settimeout(left)
        return left

    def _recv(self, nbytes: int) -> bytes:
        chunks: List[bytes] = []
        remaining = nbytes
        while remaining:
            self._left()
            chunk = self._sock.recv(min(remaining, 1 << 16))
            if not chunk:
                raise ChannelClosed("connection closed")
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)

    def send_bytes(self, data: bytes) -> None:
        self._left()
        send_frame(self._sock, bytes(data))

    def recv_bytes(self, maxlength: Optional[int] = None) -> bytes:
        (length,) = HEADER.unpack(self._recv(HEADER.size))
        if maxlength is not None and length > maxlength:
            raise AuthenticationError(f"handshake message of {length} B")
        return self._recv(length)


def client_handshake(sock: socket.socket, token: str, timeout: Optional[float] = None) -> None:
    """Prove to the fabric that we know the token, then have it prove the same: ``FabricRefused`` if
    it cannot, ``ChannelTimeout`` if it does not finish within ``timeout`` (``HANDSHAKE_TIMEOUT_S``) in
    all, ``ChannelClosed`` if it goes away."""
    wait = HANDSHAKE_TIMEOUT_S if timeout is None else timeout
    sock.settimeout(wait)
    frames: Any = _Frames(sock, time.monotonic() + wait)  # duck-typed: the handshake sends and receives
    try:
        send_frame(sock, HELLO)
        answer_challenge(frames, token.encode())  # the order of multiprocessing's Client
        deliver_challenge(frames, token.encode())
    except socket.timeout:
        raise ChannelTimeout(f"no answer to the fabric handshake within {wait:g} s") from None
    except (ChannelClosed, ConnectionError) as exc:  # it went away: a fabric closing as we came
        raise ChannelClosed(f"the fabric closed the connection during the handshake ({exc})") from None
    except Exception as exc:  # whatever it is, this is not our fabric
        raise FabricRefused(f"the peer failed the fabric handshake ({type(exc).__name__}: {exc})") from None
    sock.settimeout(None)


def server_handshake(sock: socket.socket, token: str) -> bool:
    """The fabric's side, after the client's ``HELLO``: challenge it, then answer its challenge, all
    within ``HANDSHAKE_TIMEOUT_S``."""
    frames: Any = _Frames(sock, time.monotonic() + HANDSHAKE_TIMEOUT_S)  # duck-typed, as above
    try:
        deliver_challenge(frames, token.encode())  # the order of multiprocessing's Listener
        answer_challenge(frames, token.encode())
    except Exception:  # a failed, broken or too slow handshake: the connection is dropped
        return False
    return True
