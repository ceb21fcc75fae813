"""What crosses a fabric's socket, and what is checked before anything is believed.

Before a single byte is decoded, each end checks the other:

- **the socket and its directory are ours**: the directory is owned by this user and private (no group or
  other bits), and the peer's credentials (``SO_PEERCRED``, filled in by the kernel) carry our uid;
- **both ends know the world's token**: the stdlib's ``multiprocessing.connection`` challenge-response
  (``deliver_challenge`` / ``answer_challenge``: each side sends a random challenge and checks an HMAC of
  it under the token), run in both directions, so the token itself never crosses the wire and a squatter
  at the path cannot pass for the fabric.

After that, frames are an 8-byte length and a message (an envelope, then a payload: two pickles) decoded
by ``WireUnpickler``, which resolves only the exact classes the protocol carries (the faces' enums and
small data classes, and numpy arrays of plain numeric dtypes, which the decoder builds itself from a
dtype name, a shape and bytes, ``fabric/arrays.py``) and refuses anything else, so even a peer that
passed every check cannot name code to run; a payload so refused fails only its own request.
Exceptions travel as data (class name, args, attributes) and are rebuilt only as built-in or
datadist-sim exception classes. The commonest messages travel in a compact form instead, checked as
strictly (``fabric/compact.py``).
"""

from __future__ import annotations

import enum
import io
import os
import pickle
import select
import socket
import stat
import struct
import time
from multiprocessing import AuthenticationError
from multiprocessing.connection import answer_challenge, deliver_challenge
from typing import Any, Callable, Dict, FrozenSet, List, Optional, Tuple

from datadist_sim.fabric.exceptions import PackedException as PackedException
from datadist_sim.fabric.exceptions import RemoteError as RemoteError
from datadist_sim.fabric.exceptions import pack_exception as pack_exception
from datadist_sim.fabric.exceptions import unpack_exception as unpack_exception

HEADER = struct.Struct("!Q")
MAX_FRAME = 1 << 40
HELLO = b"datadist-sim fabric 2"
"""The client's first frame: it names the protocol (version 2: a message is an envelope, then a payload),
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
    """``sendall`` for a non-blocking socket (the fabric's, watched by its selector): wait for room at
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


# -- decoding: only the types the protocol carries -------------------------------------------------------


_DATA_CLASSES = frozenset(
    {
        "BlocksCacheKey",
        "Cache",  # a client's own ``Cache.create_cpu_cache`` (host memory it owns) travels by value
        "CacheDesc",
        "CacheKey",
        "CacheKeyByIdAndIndex",
        "KvCache",  # likewise ``KvCache.create_cpu_cache``
        "LLMClusterInfo",
        "LlmConfig",
        "MemInfo",
        "Status",
        "Tensor",
        "TensorDesc",
        "TransferConfig",
        "TransferWithCacheKeyConfig",
    }
)
_allowed: Optional[Dict[Tuple[str, str], Any]] = None


def allowed_globals() -> Dict[Tuple[str, str], Any]:
    """Every ``(module, name)`` a frame may name, with the object it names: the faces' enums and data
    classes, and the builders of plain numpy values (``fabric/arrays.py``: no numpy global itself, whose
    rebuilding trusts state the sender wrote). Resolved once, so decoding a frame never imports anything
    (and a lookup costs less than the import machinery ``Unpickler.find_class`` runs for each global)."""
    global _allowed
    if _allowed is None:
        from datadist_sim import llm_datadist, llm_datadist_v1
        from datadist_sim.fabric.arrays import BUILDERS

        # plain values a client may pass that pickle by name: ``range(n)`` as a layer or block list
        found: Dict[Tuple[str, str], Any] = {
            ("builtins", "range"): range,
            ("builtins", "slice"): slice,
            ("builtins", "complex"): complex,
        }
        for face in (llm_datadist, llm_datadist_v1):
            for name in getattr(face, "__all__", dir(face)):
                value = getattr(face, name, None)
                if isinstance(value, type) and (issubclass(value, enum.Enum) or name in _DATA_CLASSES):
                    found[(value.__module__, value.__qualname__)] = value
        for builder in BUILDERS:
            found[(builder.__module__, builder.__qualname__)] = builder
        _allowed = found
    return _allowed


_table: Optional[Dict[type, Callable[[Any], Any]]] = None


def _new_pickler(buffer: io.BytesIO) -> pickle.Pickler:
    """A pickler that sends numpy values as ``fabric/arrays.py`` builds them."""
    global _table
    if _table is None:
        from datadist_sim.fabric.arrays import dispatch_table

        _table = dispatch_table()
    pickler = pickle.Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.dispatch_table = _table
    return pickler


class TypeRefused(pickle.UnpicklingError):
    """A frame names a global the protocol does not carry. Raised before that global is imported or
    anything of it runs; ``type_name`` is a short printable form of the name, safe to log and to send
    back (the frame's own text is never repeated beyond it)."""

    def __init__(self, module: str, name: str) -> None:
        self.type_name = _printable(f"{module}.{name}")
        super().__init__(f"the fabric protocol does not carry {self.type_name}: refused")


def _printable(text: str, limit: int = 96) -> str:
    """``text`` (a name from an untrusted frame) as identifier characters only, at most ``limit`` long."""
    kept = "".join(ch if ch.isascii() and (ch.isalnum() or ch in "._") else "?" for ch in text[: limit + 1])
    return kept if len(kept) <= limit else kept[: limit - 3] + "..."


class WireUnpickler(pickle.Unpickler):
    """An unpickler that resolves only ``allowed_globals()``; ``persistent_load`` names object handles."""

    def find_class(self, module: str, name: str) -> Any:
        found = (_allowed or allowed_globals()).get((module, name))
        if found is None:
            raise TypeRefused(module, name)
        return found


# -- messages: an envelope, then a payload ----------------------------------------------------------------
#
# A message is ``("req", id, kind, payload)`` or ``("rep", id, ok, value)``. Its frame holds two pickles:
# the envelope (the first three fields: plain strings, ints and bools) and then the payload. So when a
# payload names a type the protocol does not carry, decoding stops there and the envelope still says
# which request it was: that one request is answered with a ``TypeError``, as the real library answers
# an argument of a type it does not take (``check_isinstance`` in hixl
# ``src/python/llm_datadist/llm_datadist/utils/utils.py`` and in GE
# ``api/python/llm_datadist_v1/utils/utils.py`` raises ``TypeError``), and the connection, still in step
# frame by frame, goes on serving. A frame whose envelope itself is refused is not our protocol: dropped.


class PayloadRefused(pickle.UnpicklingError):
    """A message whose envelope decoded but whose payload names a type the protocol does not carry."""

    def __init__(self, head: Tuple[Any, ...], type_name: str) -> None:
        super().__init__(f"a payload naming {type_name}: refused")
        self.head = head
        self.type_name = type_name

    @property
    def is_request(self) -> bool:
        return bool(self.head[0] == "req")

    def error(self) -> TypeError:
        """What the sender of the refused payload gets, in place of a result."""
        what = "an argument" if self.is_request else "a reply"
        return TypeError(
            f"the datadist-sim fabric carries only the types llm_datadist's API takes, but {what} names "
            f"{self.type_name}: refused, nothing of it decoded"
        )

    def as_reply(self) -> Tuple[Any, ...]:
        """A refused reply as the failed reply its waiter gets."""
        return ("rep", self.head[1], False, self.error())


PLAIN_TYPES: FrozenSet[type] = frozenset({int, float, bool, str, bytes, type(None), tuple, list, dict, type})
"""Types whose objects (of exactly these types) never travel as a handle: an end's ``persistent_id``
answers None for them at once. The pickler asks it about every object it meets (a small pull's request
holds about 30), and the handle tests (``isinstance`` against an ABC among them) cost a microsecond
each (issue 15)."""


def dump_message(pickler: pickle.Pickler, message: Tuple[Any, ...]) -> None:
    """``message`` as the protocol frames it: its envelope, then its payload, as two pickles."""
    pickler.dump(message[:3])
    pickler.dump(message[3])


def make_dumps(persistent_id: Callable[[Any], Any]) -> Callable[[Tuple[Any, ...]], bytes]:
    """A message encoder with this end's handle translation (``persistent_id``), for any number of
    threads: each message takes a free pickler and its buffer (a list's ``pop``, atomic) or makes one,
    and puts it back, so a connection's messages reuse a few instead of making one each (issue 15)."""
    free: List[Tuple[io.BytesIO, pickle.Pickler]] = []

    def dumps(message: Tuple[Any, ...]) -> bytes:
        try:
            buffer, pickler = free.pop()
        except IndexError:
            buffer = io.BytesIO()
            pickler = _new_pickler(buffer)
            pickler.persistent_id = persistent_id  # type: ignore[method-assign]
        try:
            dump_message(pickler, message)
            return buffer.getvalue()
        finally:  # empty again (a large message's bytes are not kept), and nothing remembered
            buffer.seek(0)
            buffer.truncate()
            pickler.clear_memo()
            free.append((buffer, pickler))

    return dumps


def plain_dumps(message: Tuple[Any, ...]) -> bytes:
    """A message of an end that sends no object handles."""
    buffer = io.BytesIO()
    dump_message(_new_pickler(buffer), message)
    return buffer.getvalue()


def make_loads(persistent_load: Callable[[Any], Any], *, bounded: bool = False) -> Callable[[bytes], Any]:
    """A message decoder with this end's handle translation: the message, or ``PayloadRefused``.
    ``bounded`` (the fabric's ends): the frame's opcodes are checked first (``bounds.check_pickled``)."""

    def loads(data: bytes) -> Any:
        if bounded:
            from datadist_sim.fabric.bounds import check_pickled

            check_pickled(data)
        unpickler = WireUnpickler(io.BytesIO(data))
        unpickler.persistent_load = persistent_load  # type: ignore[method-assign]
        head = unpickler.load()
        try:
            payload = unpickler.load()
        except TypeRefused as refused:
            if not _is_envelope(head):
                raise
            raise PayloadRefused(head, refused.type_name) from None
        return (*head, payload)

    return loads


def _is_envelope(head: Any) -> bool:
    return type(head) is tuple and len(head) == 3 and head[0] in ("req", "rep") and type(head[1]) is int
