"""The fabric's connections: one selector for all of them, and a pool of threads for the calls.

A connection costs a file descriptor, not a thread. One pool thread at a time, the *leader*, waits on
the selector: it accepts (refusing at once a peer of another uid), waits for each new connection's
``HELLO`` without a thread, drops one that says nothing within ``HELLO_WAIT_S``, and reads every
authenticated connection's frames (a reply wakes the fabric thread waiting for it). When requests
arrive, the leader hands the selector to an idle pool thread and answers the first request itself
(leader/follower): a call costs one wake-up in the fabric, as a plain ping-pong does, not a hand-off to
another thread. Only the handshake of a peer that spoke and the calls themselves occupy threads, so a
flood of idle or half-open connections delays nobody.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import functools
import logging
import os
import selectors
import socket
import threading
import time
from typing import Any, Callable, Deque, Dict, List, Optional, Tuple, Union

from datadist_sim.fabric.channel import Endpoint, Handler, Payload
from datadist_sim.fabric.wire import (
    HEADER,
    HELLO,
    MAX_FRAME,
    PayloadRefused,
    send_nonblocking,
    server_handshake,
)

HELLO_WAIT_S = 5.0
"""A new connection that has not sent its ``HELLO`` within this is dropped."""
SEND_TIMEOUT_S = 30.0
"""A peer that takes none of a reply for this long is treated as gone."""
TICK_S = 0.25
MAX_PENDING = 4096
"""Connections still to say ``HELLO``; past this the oldest is dropped to make room."""

_log = logging.getLogger("datadist_sim.fabric")


class WorkerPool:
    """Threads that run requests. An idle one is reused and a new one starts only when every one is busy
    (a call may block, even on another call, so a fixed pool could deadlock); one idle for ``idle_s``
    ends. Threads follow the calls in progress, not the connections or the requests served."""

    def __init__(self, name: str, idle_s: float = 30.0) -> None:
        self._name = name
        self._idle_s = idle_s
        self._jobs: Deque[Callable[[], None]] = collections.deque()
        self._cond = threading.Condition(threading.Lock())
        self._waiting = 0
        self._threads = 0
        self._started = 0

    def submit(self, job: Callable[[], None]) -> None:
        with self._cond:
            self._jobs.append(job)
            if self._waiting >= len(self._jobs):
                self._cond.notify()
                return
            self._threads += 1
            self._started += 1
            number = self._started
        threading.Thread(target=self._work, name=f"{self._name}-{number}", daemon=True).start()

    @property
    def threads(self) -> int:
        with self._cond:
            return self._threads

    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._jobs:
                    self._waiting += 1
                    try:
                        woken = self._cond.wait(self._idle_s)
                    finally:
                        self._waiting -= 1
                    if not woken and not self._jobs:
                        self._threads -= 1
                        return
                job = self._jobs.popleft()
            try:
                job()
            except Exception:  # a job reports its own failures; the thread lives on
                _log.exception("fabric worker: unexpected error")


class Connection(Endpoint):
    """The fabric's end of one client's connection: frames arrive from the selector thread, requests
    run on the pool, replies are written by whichever thread has them."""

    def __init__(
        self,
        sock: socket.socket,
        handler: Handler,
        pool: WorkerPool,
        *,
        dumps: Callable[[Any], bytes],
        loads: Callable[[bytes], Any],
        on_close: Optional[Callable[[], None]] = None,
    ) -> None:
        super().__init__(sock, handler, dumps=dumps, loads=loads, on_close=on_close)
        self._pool = pool
        self.buffer = bytearray()

    def bind(
        self,
        handler: Handler,
        *,
        dumps: Callable[[Any], bytes],
        loads: Callable[[bytes], Any],
        on_close: Optional[Callable[[], None]],
    ) -> None:
        """Serve this connection for a session from now on (its first request named the session)."""
        self._handler, self._dumps, self._loads, self._on_close = handler, dumps, loads, on_close

    def _send_bytes(self, data: bytes) -> None:
        send_nonblocking(self._sock, data, SEND_TIMEOUT_S)

    def _run(self, rid: int, kind: str, payload: Payload) -> None:
        self._pool.submit(functools.partial(self.answer, rid, kind, payload))

    @property
    def sock(self) -> socket.socket:
        return self._sock


class _Pending:
    """A connection that has not yet said ``HELLO``: a socket, the peer's pid, a deadline, some bytes."""

    __slots__ = ("buffer", "deadline", "pid", "sock")

    def __init__(self, sock: socket.socket, pid: int) -> None:
        self.sock = sock
        self.pid = pid
        self.deadline = time.monotonic() + HELLO_WAIT_S
        self.buffer = b""


Admit = Callable[[socket.socket, int], Connection]


class SelectorLoop:
    """Accepts on ``listener`` and serves every connection from one thread (``run``)."""

    def __init__(self, listener: socket.socket, token: str, admit: Admit, pool: WorkerPool) -> None:
        self._listener = listener
        self._token = token
        self._admit = admit
        self._pool = pool
        self._selector = selectors.DefaultSelector()
        self._waker, self._wake_in = socket.socketpair()
        self._waker.setblocking(False)
        self._wake_in.setblocking(False)
        self._todo: Deque[Connection] = collections.deque()
        self._todo_lock = threading.Lock()
        self._pending: Dict[int, _Pending] = {}
        self._conns: Dict[int, Connection] = {}
        self._stopped = threading.Event()
        self._finished = threading.Event()
        self._on_tick: Callable[[], bool] = lambda: True
        self._next_tick = 0.0
        self.refused_uid = 0
        """Connections refused because their peer was another user (for tests and the log)."""

    def stop(self) -> None:
        self._stopped.set()
        self.wake()

    def wake(self) -> None:
        with contextlib.suppress(OSError):
            self._wake_in.send(b"x")

    @property
    def pending_count(self) -> int:
        return len(self._pending)

    def run(self, on_tick: Callable[[], bool]) -> None:
        """Serve until ``stop()`` or until ``on_tick()`` (called every ``TICK_S``) returns False; the
        calling thread only waits (the pool's threads lead in turn)."""
        self._listener.setblocking(False)
        self._selector.register(self._listener, selectors.EVENT_READ, "accept")
        self._selector.register(self._waker, selectors.EVENT_READ, "wake")
        self._on_tick = on_tick
        self._next_tick = time.monotonic() + TICK_S
        self._pool.submit(self._lead)
        while not self._finished.wait(TICK_S):
            pass

    def _lead(self) -> None:
        """Wait on the selector until requests come; then hand the selector on and answer one."""
        work: List[Tuple[Connection, int, str, Payload]] = []
        while not work:
            if self._stopped.is_set():
                self._close_all()
                return
            try:
                for key, _ in self._selector.select(max(0.0, self._next_tick - time.monotonic())):
                    self._ready(key.data, key.fd, work)
                now = time.monotonic()
                if now >= self._next_tick:
                    self._next_tick = now + TICK_S
                    self._expire(now)
                    if not self._on_tick():
                        self._stopped.set()
            except Exception:  # the selector must keep a leader whatever happens
                _log.exception("fabric: unexpected error serving connections")
        self._pool.submit(self._lead)  # the next leader: an idle thread, already waiting
        for conn, rid, kind, payload in work[1:]:
            self._pool.submit(functools.partial(conn.answer, rid, kind, payload))
        conn, rid, kind, payload = work[0]
        conn.answer(rid, kind, payload)

    def _ready(self, data: Union[str, _Pending, Connection], fd: int, work: List[Any]) -> None:
        if data == "accept":
            self._accept()
        elif data == "wake":
            with contextlib.suppress(OSError):
                self._waker.recv(4096)
            with self._todo_lock:
                todo, self._todo = self._todo, collections.deque()
            for conn in todo:
                self._watch(conn.sock.fileno(), conn)
        elif isinstance(data, _Pending):
            self._read_hello(fd, data)
        elif isinstance(data, Connection):
            self._read(fd, data, work)

    def _watch(self, fd: int, data: Union[_Pending, Connection]) -> None:
        if fd < 0:
            return
        with contextlib.suppress(KeyError, ValueError, OSError):
            self._selector.unregister(fd)  # a number reused after another thread closed its socket
        self._selector.register(fd, selectors.EVENT_READ, data)
        if isinstance(data, Connection):
            self._conns[fd] = data
        else:
            self._pending[fd] = data

    def _forget(self, fd: int) -> None:
        with contextlib.suppress(KeyError, ValueError, OSError):
            self._selector.unregister(fd)
        self._pending.pop(fd, None)
        self._conns.pop(fd, None)

    # -- new connections ---------------------------------------------------------------------------

    def _accept(self) -> None:
        from datadist_sim.fabric.wire import peer_credentials

        while True:
            try:
                sock, _ = self._listener.accept()
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE) and self._pending:
                    self._drop_pending(next(iter(self._pending)))  # the oldest silent one makes room
                    continue
                _log.warning("fabric: accept failed: %s", exc)
                return
            pid, uid = peer_credentials(sock)
            if uid != os.getuid():
                self.refused_uid += 1
                _log.warning("fabric: refused a connection from uid %s (pid %s)", uid, pid)
                sock.close()
                continue
            sock.setblocking(False)
            if len(self._pending) >= MAX_PENDING:
                self._drop_pending(next(iter(self._pending)))
            self._watch(sock.fileno(), _Pending(sock, pid))

    def _drop_pending(self, fd: int) -> None:
        pending = self._pending.get(fd)
        self._forget(fd)
        if pending is not None:
            pending.sock.close()

    def _read_hello(self, fd: int, pending: _Pending) -> None:
        try:
            data = pending.sock.recv(256)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        pending.buffer += data
        expected = HEADER.pack(len(HELLO)) + HELLO
        if not data or not expected.startswith(pending.buffer):
            self._drop_pending(fd)  # closed, or not our protocol
            return
        if len(pending.buffer) < len(expected):
            return
        self._forget(fd)  # the handshake runs on a pool thread, with its own bounded waits
        self._pool.submit(lambda: self._handshake(pending))

    def _handshake(self, pending: _Pending) -> None:
        sock = pending.sock
        if not server_handshake(sock, self._token):
            sock.close()
            return
        sock.setblocking(False)
        conn = self._admit(sock, pending.pid)
        with self._todo_lock:
            self._todo.append(conn)
        self.wake()

    def _expire(self, now: float) -> None:
        for fd in [fd for fd, pending in self._pending.items() if pending.deadline < now]:
            self._drop_pending(fd)

    # -- authenticated connections -----------------------------------------------------------------

    def _read(self, fd: int, conn: Connection, work: List[Any]) -> None:
        buffer = conn.buffer
        need = HEADER.size
        if len(buffer) >= HEADER.size:
            need += HEADER.unpack_from(buffer)[0]
        try:
            data = conn.sock.recv(max(65536, min(need - len(buffer), 1 << 22)))
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._forget(fd)
            conn.close()
            with contextlib.suppress(OSError):
                conn.sock.close()
            return
        buffer += data
        try:
            for frame in _frames(buffer):
                request = conn.take(frame)
                if request is None:
                    continue
                if isinstance(request[2], PayloadRefused):  # answered with a TypeError, never run
                    _log.warning(
                        "fabric: refused a request naming %s (connection kept)", request[2].type_name
                    )
                work.append((conn, *request))
        except Exception as exc:  # an undecodable frame: this connection is not trusted
            _log.warning("fabric: dropping a connection after a bad frame: %.120r", exc)  # escaped, cut short
            self._forget(fd)
            conn.close()

    def _close_all(self) -> None:
        if self._finished.is_set():
            return
        for fd in list(self._pending):
            self._drop_pending(fd)
        for fd, conn in list(self._conns.items()):
            self._forget(fd)
            conn.close()
        self._selector.close()
        self._waker.close()
        self._wake_in.close()
        self._finished.set()


def _frames(buffer: bytearray) -> List[bytes]:
    """Take every complete frame off the front of ``buffer``."""
    frames = []
    start = 0
    while len(buffer) - start >= HEADER.size:
        (length,) = HEADER.unpack_from(buffer, start)
        if length > MAX_FRAME:
            raise ValueError(f"frame of {length} B")
        end = start + HEADER.size + length
        if len(buffer) < end:
            break
        frames.append(bytes(buffer[start + HEADER.size : end]))
        start = end
    if start:
        del buffer[:start]
    return frames
