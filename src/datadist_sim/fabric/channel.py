"""One framed, two-way message channel over a Unix socket: requests either way, replies by id.

Both ends can ask: a client asks the fabric to run a call; the fabric asks a client to read or write
memory that only the client can reach. One reader thread per end receives everything; replies wake the
waiting caller, requests go to the end's handler. Every wait has a timeout, and a closed connection
wakes every waiter at once with ``ChannelClosed``, so a dead peer never hangs anyone.

Frames are an 8-byte length and a pickle. Pickle is safe here only because the peer proved it holds
the world's token before its first frame was read (``accept_token``).
"""

from __future__ import annotations

import contextlib
import hmac
import importlib
import itertools
import socket
import struct
import threading
from typing import Any, Callable, Dict, FrozenSet, List, Optional, Tuple

_HEADER = struct.Struct("!Q")
_MAX_FRAME = 1 << 40
HANDSHAKE_TIMEOUT_S = 10.0

Message = Tuple[Any, ...]
Handler = Callable[[str, Tuple[Any, ...]], Any]


class ChannelClosed(ConnectionError):
    """The other end is gone (its process died or closed the connection)."""


class ChannelTimeout(TimeoutError):
    """No reply came within the wait's timeout."""


class RemoteError(RuntimeError):
    """An exception from the other end that cannot be rebuilt here as its own type."""


def _recv_exact(sock: socket.socket, nbytes: int) -> bytes:
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
    if len(payload) < 65536:
        sock.sendall(_HEADER.pack(len(payload)) + payload)
    else:  # no concatenated copy of a large payload
        sock.sendall(_HEADER.pack(len(payload)))
        sock.sendall(payload)


def recv_frame(sock: socket.socket) -> bytes:
    (length,) = _HEADER.unpack(_recv_exact(sock, _HEADER.size))
    if length > _MAX_FRAME:
        raise ChannelClosed(f"frame of {length} B is larger than any message")
    return _recv_exact(sock, length)


def offer_token(sock: socket.socket, token: str) -> None:
    """Client side of the handshake: send the token, wait (bounded) for the fabric's yes."""
    sock.settimeout(HANDSHAKE_TIMEOUT_S)
    send_frame(sock, token.encode())
    if recv_frame(sock) != b"ok":
        raise ChannelClosed("the fabric refused this process's token")
    sock.settimeout(None)


def accept_token(sock: socket.socket, token: str) -> bool:
    """Fabric side: read one bounded frame and compare it with the token in constant time."""
    sock.settimeout(HANDSHAKE_TIMEOUT_S)
    try:
        (length,) = _HEADER.unpack(_recv_exact(sock, _HEADER.size))
        if length > 4096:
            return False
        offered = _recv_exact(sock, length)
    except (OSError, ChannelClosed):
        return False
    if not hmac.compare_digest(offered, token.encode()):
        return False
    send_frame(sock, b"ok")
    sock.settimeout(None)
    return True


def pack_exception(exc: BaseException) -> Tuple[str, str, Tuple[Any, ...], Dict[str, Any]]:
    """An exception as data: its class (by import path), args and attributes."""
    cls = type(exc)
    state = {k: v for k, v in vars(exc).items() if not k.startswith("__")}
    return cls.__module__, cls.__qualname__, tuple(exc.args), state


def unpack_exception(packed: Tuple[str, str, Tuple[Any, ...], Dict[str, Any]]) -> BaseException:
    """Rebuild the very exception type (``LLMException`` with its status code, ``TypeError``...)."""
    module, qualname, args, state = packed
    try:
        cls: Any = importlib.import_module(module)
        for part in qualname.split("."):
            cls = getattr(cls, part)
        exc: BaseException = cls.__new__(cls)
        exc.args = args
        vars(exc).update(state)
        return exc
    except Exception:  # a type this side cannot import: keep the text
        return RemoteError(f"{module}.{qualname}: {', '.join(map(str, args))}")


class _Slot:
    __slots__ = ("event", "ok", "value")

    def __init__(self) -> None:
        self.event = threading.Event()
        self.ok = False
        self.value: Any = None


class Channel:
    """Requests and replies over one connected socket.

    ``handler(kind, payload)`` answers the other end's requests; with ``spawn`` (or for a kind in
    ``spawn_kinds``) each runs on its own thread (calls that may block), otherwise on the reader thread
    (quick memory operations).
    ``dumps``/``loads`` are the picklers of this end (they translate object handles).
    """

    def __init__(
        self,
        sock: socket.socket,
        handler: Handler,
        *,
        dumps: Callable[[Any], bytes],
        loads: Callable[[bytes], Any],
        spawn: bool,
        name: str,
        spawn_kinds: FrozenSet[str] = frozenset(),
        on_close: Optional[Callable[[], None]] = None,
    ) -> None:
        self._sock = sock
        self._handler = handler
        self._dumps = dumps
        self._loads = loads
        self._spawn = spawn
        self._spawn_kinds = spawn_kinds
        self._on_close = on_close
        self._send_lock = threading.Lock()
        self._slots: Dict[int, _Slot] = {}
        self._slots_lock = threading.Lock()
        self._ids = itertools.count(1)
        self.closed = threading.Event()
        self._reader = threading.Thread(target=self._read_loop, name=f"{name}-reader", daemon=True)

    def start(self) -> None:
        self._reader.start()

    # -- asking ------------------------------------------------------------------------------------

    def request(self, kind: str, *payload: Any, timeout: Optional[float]) -> Any:
        """Send a request and wait for its reply; the other end's exception is raised here."""
        rid = next(self._ids)
        slot = _Slot()
        with self._slots_lock:
            if self.closed.is_set():
                raise ChannelClosed("connection closed")
            self._slots[rid] = slot
        try:
            self._send(("req", rid, kind, payload))
            if not slot.event.wait(timeout):
                raise ChannelTimeout(f"no reply to {kind!r} within {timeout} s")
        finally:
            with self._slots_lock:
                self._slots.pop(rid, None)
        if slot.ok:
            return slot.value
        if isinstance(slot.value, BaseException):
            raise slot.value
        raise unpack_exception(slot.value)

    def _send(self, message: Message) -> None:
        data = self._dumps(message)
        try:
            with self._send_lock:
                send_frame(self._sock, data)
        except OSError as exc:
            self.close()
            raise ChannelClosed(f"connection lost: {exc}") from exc

    # -- answering ---------------------------------------------------------------------------------

    def _answer(self, rid: int, kind: str, payload: Tuple[Any, ...]) -> None:
        try:
            value = self._handler(kind, payload)
            reply: Message = ("rep", rid, True, value)
        except BaseException as exc:  # every failure travels back to the caller
            reply = ("rep", rid, False, pack_exception(exc))
        try:
            self._send(reply)
        except ChannelClosed:
            pass
        except Exception as exc:  # a value that cannot be pickled: report that instead
            self._send(("rep", rid, False, pack_exception(RemoteError(f"unsendable reply: {exc!r}"))))

    def _read_loop(self) -> None:
        try:
            while True:
                message = self._loads(recv_frame(self._sock))
                if message[0] == "rep":
                    _, rid, ok, value = message
                    with self._slots_lock:
                        slot = self._slots.get(rid)
                    if slot is not None:
                        slot.ok, slot.value = ok, value
                        slot.event.set()
                else:
                    _, rid, kind, payload = message
                    if self._spawn or kind in self._spawn_kinds:
                        threading.Thread(
                            target=self._answer, args=(rid, kind, payload), name=f"call-{kind}", daemon=True
                        ).start()
                    else:
                        self._answer(rid, kind, payload)
        except (OSError, ChannelClosed, EOFError):
            pass
        except Exception as exc:  # an undecodable frame: the connection is no longer trustworthy
            self._fail_all(ChannelClosed(f"bad frame: {exc!r}"))
        finally:
            self.close()

    def _fail_all(self, exc: BaseException) -> None:
        with self._slots_lock:
            slots = list(self._slots.values())
            self._slots.clear()
        for slot in slots:
            slot.ok, slot.value = False, exc
            slot.event.set()

    def close(self) -> None:
        """Close once: wake every waiter with ``ChannelClosed`` and tell the owner."""
        with self._slots_lock:
            if self.closed.is_set():
                return
            self.closed.set()
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        self._fail_all(ChannelClosed("connection closed"))
        if self._on_close is not None:
            self._on_close()
