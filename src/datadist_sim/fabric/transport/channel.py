"""One framed, two-way message channel over a Unix socket: requests either way, replies by id.

Both ends can ask: a client asks the fabric to run a call; the fabric asks a client to read or write
memory that only the client can reach. ``Endpoint`` holds what both ends share (reply slots, answering a
request, closing once); ``Channel`` is a client's end, with one reader thread; the fabric's end is
``loop.Connection``, fed by the fabric's poll. ``CallConnection`` is a client's connection for its
own calls: the calling thread sends and reads the reply itself, with no reader thread in between.
Every wait has a timeout, and a closed connection wakes every waiter at once with ``ChannelClosed``, so
a dead peer never hangs anyone.

Frames are an 8-byte length and a message that ``codec`` encodes and decodes, after both ends
passed the handshake (``wire``).
"""

from __future__ import annotations

import contextlib
import itertools
import select
import socket
import threading
import time
from typing import Any, Callable, Dict, FrozenSet, List, Optional, Tuple, Union

from datadist_sim.fabric.transport import fdpass
from datadist_sim.fabric.transport.exceptions import (
    PayloadRefused,
    RemoteError,
    pack_exception,
    unpack_exception,
)
from datadist_sim.fabric.transport.wire import (
    HEADER,
    MAX_FRAME,
    ChannelClosed,
    ChannelTimeout,
    recv_frame,
    send_frame,
    send_nonblocking,
)

__all__ = ["CallConnection", "Channel", "ChannelClosed", "ChannelTimeout", "Endpoint", "RemoteError"]

Message = Tuple[Any, ...]
Handler = Callable[[str, Tuple[Any, ...]], Any]
Payload = Union[Tuple[Any, ...], PayloadRefused]
"""A request's payload, or its refusal: a payload the decoder refused is answered, never handled."""
Request = Tuple[int, str, Payload]


class _Slot:
    __slots__ = ("event", "ok", "value")

    def __init__(self) -> None:
        self.event = threading.Event()
        self.ok = False
        self.value: Any = None


class Endpoint:
    """What both ends of a channel share: asking and waiting (bounded), answering, closing once.

    ``handler(kind, payload)`` answers the other end's requests; ``dumps``/``loads`` are this end's
    codec (``fabric/transport/codec.py``, with its object handles). A subclass sends (``_send_bytes``) and
    decides where a request runs (``_run``).
    """

    def __init__(
        self,
        sock: socket.socket,
        handler: Handler,
        *,
        dumps: Callable[[Any], bytes],
        loads: Callable[[bytes], Any],
        on_close: Optional[Callable[[], None]] = None,
    ) -> None:
        self._sock = sock
        self._handler = handler
        self._dumps = dumps
        self._loads = loads
        self._on_close = on_close
        self._send_lock = threading.Lock()
        self._slots: Dict[int, _Slot] = {}
        self._slots_lock = threading.Lock()
        self._ids = itertools.count(1)
        self.closed = threading.Event()

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
                self._send_bytes(data)
        except (OSError, ChannelTimeout) as exc:
            self.close()
            raise ChannelClosed(f"connection lost: {exc}") from exc

    def _send_bytes(self, data: bytes) -> None:
        raise NotImplementedError

    # -- receiving and answering -------------------------------------------------------------------

    def receive(self, frame: bytes) -> None:
        """One frame from the other end: a reply wakes its waiter, a request is run (``_run``)."""
        request = self.take(frame)
        if request is not None:
            self._run(*request)

    def take(self, frame: bytes) -> Optional[Request]:
        """Decode one frame: a reply wakes its waiter (None); a request is returned, to be answered (a
        refused one with its refusal as payload). A refused reply fails its waiter."""
        try:
            message = self._loads(frame)
        except PayloadRefused as refused:
            if refused.is_request:
                return int(refused.head[1]), str(refused.head[2]), refused
            message = refused.as_reply()
        if message[0] == "rep":
            _, rid, ok, value = message
            with self._slots_lock:
                slot = self._slots.get(rid)
            if slot is not None:
                slot.ok, slot.value = ok, value
                slot.event.set()
            return None
        _, rid, kind, payload = message
        return int(rid), str(kind), tuple(payload)

    def _run(self, rid: int, kind: str, payload: Payload) -> None:
        self.answer(rid, kind, payload)

    def answer(self, rid: int, kind: str, payload: Payload) -> None:
        try:
            if isinstance(payload, PayloadRefused):
                raise payload.error()
            value = self._handler(kind, payload)
            reply: Message = ("rep", rid, True, value)
        except BaseException as exc:  # every failure travels back to the caller
            reply = ("rep", rid, False, pack_exception(exc))
        try:
            self._send(reply)
        except ChannelClosed:
            pass
        except Exception as exc:  # a value that cannot be sent: report that instead
            with contextlib.suppress(ChannelClosed):
                self._send(("rep", rid, False, pack_exception(RemoteError(f"unsendable reply: {exc!r}"))))

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


class Channel(Endpoint):
    """A client's end: one reader thread receives everything over a blocking socket.

    With ``spawn`` (or for a kind in ``spawn_kinds``) a request from the other end runs on its own
    thread (calls that may block, such as a user's callback), otherwise on the reader thread (quick
    memory operations).
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
        super().__init__(sock, handler, dumps=dumps, loads=loads, on_close=on_close)
        self._spawn = spawn
        self._spawn_kinds = spawn_kinds
        self._reader = threading.Thread(target=self._read_loop, name=f"{name}-reader", daemon=True)

    def start(self) -> None:
        self._reader.start()

    def _send_bytes(self, data: bytes) -> None:
        send_frame(self._sock, data)

    def _run(self, rid: int, kind: str, payload: Payload) -> None:
        if self._spawn or kind in self._spawn_kinds:
            threading.Thread(
                target=self.answer, args=(rid, kind, payload), name=f"call-{kind}", daemon=True
            ).start()
        else:
            self.answer(rid, kind, payload)

    def _read_loop(self) -> None:
        try:
            while True:
                self.receive(recv_frame(self._sock))
        except (OSError, ChannelClosed, EOFError):
            pass
        except Exception as exc:  # an undecodable frame: the connection is no longer trustworthy
            self._fail_all(ChannelClosed(f"bad frame: {exc!r}"))
        finally:
            self.close()


class CallConnection:
    """A connection a client process calls on: it sends a request and reads the reply itself (the fabric
    never asks anything on it). One call at a time. A call whose reply came, even as an error, leaves it
    open and in step for the next; one that lost its reply (timed out, broken) leaves it closed.

    The socket is non-blocking and every wait is a ``poll`` bounded by the call's deadline: a small call
    costs three system calls (send, poll, receive: the frame's header and body in one read), where a
    socket timeout cost eight (two timeouts set, a poll before each send and receive, the header and
    the body read apart)."""

    def __init__(
        self, sock: socket.socket, dumps: Callable[[Any], bytes], loads: Callable[[bytes], Any]
    ) -> None:
        self._sock = sock
        self._dumps = dumps
        self._loads = loads
        self._ids = itertools.count(1)
        self._poller = select.poll()
        self._poller.register(sock, select.POLLIN)
        self._left = b""  # bytes read past the last frame (none while in step)
        self._fds: Optional[List[int]] = None  # during ``fetch``: the descriptors received
        sock.setblocking(False)
        self.closed = False

    def call(self, kind: str, payload: Tuple[Any, ...], timeout: float) -> Any:
        rid = next(self._ids)
        data = self._dumps(("req", rid, kind, payload))
        deadline = time.monotonic() + timeout
        try:
            send_nonblocking(self._sock, data, timeout)
            while True:
                message = self._receive(deadline)
                if message[0] == "rep" and message[1] == rid:
                    break
        except ChannelTimeout:
            self.close()
            raise ChannelTimeout(f"no reply to {kind!r} within {timeout} s") from None
        except (OSError, ChannelClosed, EOFError) as exc:
            self.close()
            raise ChannelClosed(f"connection lost: {exc}") from None
        except BaseException:
            self.close()
            raise
        if message[2]:
            return message[3]
        if isinstance(message[3], BaseException):
            raise message[3]
        raise unpack_exception(message[3])

    def fetch(self, kind: str, payload: Tuple[Any, ...], timeout: float) -> Tuple[Any, int]:
        """A call whose reply carries one descriptor (``fdpass``): the reply's value and the descriptor,
        now the caller's. A reply with none, or with more than ``fdpass.MAX_FDS``, closes whatever came
        and raises ``ChannelClosed``; so does a failed call."""
        fds: List[int] = []
        self._fds = fds
        try:
            value = self.call(kind, payload, timeout)
        except BaseException:
            fdpass.close_all(fds)
            raise
        finally:
            self._fds = None
        if len(fds) != 1:
            fdpass.close_all(fds)
            raise ChannelClosed(f"the fabric's reply to {kind!r} carried no descriptor")
        return value, fds[0]

    def _receive(self, deadline: float) -> Message:
        """The next message; a reply whose payload the decoder refused arrives as a failed reply."""
        try:
            message: Message = self._loads(self._frame(deadline))
        except PayloadRefused as refused:
            message = refused.as_reply() if not refused.is_request else ("req",)
        return message

    def _frame(self, deadline: float) -> bytes:
        data = self._left
        while len(data) < HEADER.size:
            data += self._read(65536, deadline)
        (length,) = HEADER.unpack_from(data)
        if length > MAX_FRAME:
            raise ChannelClosed(f"frame of {length} B is larger than any message")
        end = HEADER.size + length
        if len(data) < end:
            chunks = [data]
            got = len(data)
            while got < end:
                chunks.append(self._read(min(end - got, 1 << 22), deadline))
                got += len(chunks[-1])
            data = b"".join(chunks)
        self._left = data[end:]
        return data[HEADER.size : end]

    def _read(self, most: int, deadline: float) -> bytes:
        """Up to ``most`` bytes, waiting for them until ``deadline`` (``ChannelTimeout``)."""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ChannelTimeout("no reply in time")
            ms = int(left * 1000 + 0.999)  # (no max(): it parses keywords, on every call)
            if self._poller.poll(ms if ms > 1 else 1):
                try:  # plain ``recv`` discards any descriptor a reply carries: only ``fetch`` takes one
                    fds = self._fds
                    chunk = (
                        self._sock.recv(most) if fds is None else fdpass.recv_bounded(self._sock, most, fds)
                    )
                except BlockingIOError:
                    continue
                if not chunk:
                    raise ChannelClosed("connection closed")
                return chunk

    def close(self) -> None:
        self.closed = True
        self._sock.close()
