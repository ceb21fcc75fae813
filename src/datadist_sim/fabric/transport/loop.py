"""The fabric's connections: one epoll for all of them, and a pool of threads for the calls.

A connection costs a file descriptor, not a thread. One pool thread at a time, the *leader*, waits on
the epoll: it accepts (refusing at once a peer of another uid), waits for each new connection's
``HELLO`` without a thread, drops one that says nothing within ``HELLO_WAIT_S``, and reads every
authenticated connection's frames (a reply wakes the fabric thread waiting for it). When requests
arrive, the leader answers the first itself and then leads again (further ones go to pool threads): a
call costs one wake-up in the fabric, as a plain ping-pong does. Handing the poll to another thread
before each answer, as plain leader/follower does, cost a small pull about 65 us of the fabric's CPU and
three more context switches, so the poll is handed on only when an answer may block: at
once when the answering thread asks a client something (its reply comes through the poll), and
otherwise when an answer has run a whole ``HANDOFF_S`` (a lock, a simulated wait, another process's
call), which a standby thread watches for while requests come. So a blocking call delays the other
connections by two ``HANDOFF_S`` periods (plus scheduling) and starves none. Only the handshake of a
peer that spoke and the calls themselves occupy threads, so a flood of idle or half-open connections
delays nobody. Those threads are bounded (``pool.MAX_THREADS``; the leader alone may pass the bound) and
so is what one connection runs at once (``MAX_IN_FLIGHT``: a client pipelining more is read no further
until one is answered, so it waits). A leader survives any error of its own (logged), and a thread the
system will not start delays jobs but loses none: the fabric never stops answering.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import functools
import logging
import os
import select
import socket
import threading
import time
from typing import Any, Callable, Deque, Dict, List, Tuple, Union

from datadist_sim.fabric.transport.channel import Payload
from datadist_sim.fabric.transport.connection import MAX_IN_FLIGHT as MAX_IN_FLIGHT
from datadist_sim.fabric.transport.connection import Connection as Connection
from datadist_sim.fabric.transport.connection import answering
from datadist_sim.fabric.transport.exceptions import PayloadRefused
from datadist_sim.fabric.transport.pool import WorkerPool
from datadist_sim.fabric.transport.wire import HEADER, HELLO, MAX_FRAME, server_handshake

HELLO_WAIT_S = 5.0
"""A new connection that has not sent its ``HELLO`` within this is dropped."""
TICK_S = 0.25
HANDOFF_S = 0.002
"""An answer that has run this long on the leader's thread gets the poll handed on (``_standby``)."""
STANDBY_QUIET_S = 0.1
"""With no request for this long, the standby stops looking until the next one."""
MAX_PENDING = 4096
"""Connections still to say ``HELLO``; past this the oldest is dropped to make room."""
_log = logging.getLogger("datadist_sim.fabric")


class _Pending:
    """A connection that has not yet said ``HELLO``: a socket, the peer's pid, a deadline, some bytes."""

    __slots__ = ("buffer", "deadline", "pid", "sock")

    def __init__(self, sock: socket.socket, pid: int) -> None:
        self.sock = sock
        self.pid = pid
        self.deadline = time.monotonic() + HELLO_WAIT_S
        self.buffer = b""


Admit = Callable[[socket.socket, int], Connection]


class LeaderLoop:
    """Accepts on ``listener`` and serves every connection: one pool thread at a time, the leader, waits
    on the epoll and answers the first request it reads (``run``)."""

    def __init__(self, listener: socket.socket, token: str, admit: Admit, pool: WorkerPool) -> None:
        self._listener = listener
        self._token = token
        self._admit = admit
        self._pool = pool
        self._epoll = select.epoll()  # Linux only, as SO_PEERCRED is (``selectors`` cost a wake ~1 us)
        self._watched: Dict[int, Union[str, _Pending, Connection]] = {}
        """What each watched fd is: the listener, the waker, a connection yet to say ``HELLO``, or an
        authenticated one (the map of connections: one look-up per ready fd, and what stop closes)."""
        self._waker, self._wake_in = socket.socketpair()
        self._waker.setblocking(False)
        self._wake_in.setblocking(False)
        self._todo: Deque[Connection] = collections.deque()
        self._todo_lock = threading.Lock()
        self._pending: Dict[int, _Pending] = {}
        self._stopped = threading.Event()
        self._finished = threading.Event()
        self._on_tick: Callable[[], bool] = lambda: True
        self._next_tick = 0.0
        self._hand_lock = threading.Lock()
        """Guards the hand-off state; the leader takes it directly (twice an answer), as a C lock."""
        self._hand = threading.Condition(self._hand_lock)
        self._answers = 0  # answers begun on a leader's thread: the standby tells a long one from a new one
        self._inline = 0  # the one running now while it holds the poll, else 0
        self._watching = False  # the standby looks every HANDOFF_S (requests came lately)
        self.refused_uid = 0
        """Connections refused because their peer was another user (for tests and the log)."""

    def stop(self) -> None:
        self._stopped.set()
        self.wake()
        with self._hand:
            self._hand.notify()

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
        self._watch(self._listener.fileno(), "accept")
        self._watch(self._waker.fileno(), "wake")
        self._on_tick = on_tick
        self._next_tick = time.monotonic() + TICK_S
        standby = threading.Thread(target=self._standby, name="fabric-standby", daemon=True)
        standby.start()
        self._pool.submit(self._lead, urgent=True)
        while not self._finished.wait(TICK_S):
            pass
        with self._hand:
            self._hand.notify()

    def _lead(self) -> None:
        """Lead until the poll is handed on; whatever goes wrong, a leader goes on (logged)."""
        while True:
            try:
                self._lead_once()
                return
            except Exception:  # never deaf: this thread leads again, or the loop is stopping
                _log.exception("fabric: unexpected error in the poll's leader; leading again")
                if self._finished.is_set():
                    return

    def _lead_once(self) -> None:
        """Wait on the poll until requests come, answer the first on this thread, and lead again,
        until the poll is handed on (``hand_off``) while this thread answers."""
        while True:
            work = self._collect()
            if not work:
                return
            for conn, rid, kind, payload in work[1:]:
                self._pool.submit(functools.partial(conn.answer, rid, kind, payload))
            conn, rid, kind, payload = work[0]
            with self._hand_lock:
                # stopping: no answer on this thread, which must go on to close every connection (the
                # standby may already have looked for an inline answer to hand on, and left)
                stopping = self._stopped.is_set()
                if not stopping:
                    self._answers += 1
                    number = self._inline = self._answers
                    if not self._watching:
                        self._watching = True
                        self._hand.notify()
            if stopping:
                self._pool.submit(functools.partial(conn.answer, rid, kind, payload))
                continue
            answering.leading = (self, number)
            try:
                conn.answer(rid, kind, payload)
            finally:
                answering.leading = None
                with self._hand_lock:
                    still = self._inline == number
                    if still:
                        self._inline = 0
            if not still:
                return  # another thread leads now: this one goes back to the pool

    def _is_lead(self, job: Callable[[], None]) -> bool:
        return getattr(job, "__func__", None) is LeaderLoop._lead

    def hand_off(self, number: int) -> None:
        """Answer ``number`` may block: another thread takes the poll (once per answer)."""
        with self._hand:
            if self._inline != number:
                return
            self._inline = 0
        self._pool.submit(self._lead, urgent=True)

    def _standby(self) -> None:
        """While requests come, look every ``HANDOFF_S``: an answer that has run a whole period gets the
        poll handed on. Quiet for ``STANDBY_QUIET_S``, sleep until the next request (no wake-ups)."""
        quiet = 0.0
        with self._hand:
            while not self._stopped.is_set():
                if not self._watching:
                    self._hand.wait()
                    quiet = 0.0
                    continue
                answers, inline = self._answers, self._inline
                self._hand.wait(HANDOFF_S)
                if inline and self._inline == inline:
                    self._inline = 0
                    self._pool.submit(self._lead, urgent=True)
                elif self._answers == answers:
                    quiet += HANDOFF_S
                    if quiet >= STANDBY_QUIET_S:
                        self._watching = False
                else:
                    quiet = 0.0
            if self._inline:  # stopping while an answer runs: a leader must close the connections
                self._inline = 0
                self._pool.submit(self._lead, urgent=True)

    def _collect(self) -> List[Tuple[Connection, int, str, Payload]]:
        """Wait on the poll until requests come; none once the loop stops (all closed then)."""
        work: List[Tuple[Connection, int, str, Payload]] = []
        while not work:
            if self._stopped.is_set():
                self._close_all()
                return work
            try:
                wait = self._next_tick - time.monotonic()
                for fd, _ in self._epoll.poll(wait if wait > 0.0 else 0.0):
                    data = self._watched.get(fd)
                    if data is not None:
                        self._ready(data, fd, work)
                if self._pool.short:  # no thread could be started for jobs waiting: take them here
                    self._pool.run_waiting(self._is_lead)
                now = time.monotonic()
                if now >= self._next_tick:
                    self._next_tick = now + TICK_S
                    self._expire(now)
                    if not self._on_tick():
                        self._stopped.set()
            except Exception:  # the poll must keep a leader whatever happens
                _log.exception("fabric: unexpected error serving connections")
        return work

    def _ready(self, data: Union[str, _Pending, Connection], fd: int, work: List[Any]) -> None:
        if type(data) is Connection:  # the usual one first
            self._read(fd, data, work)
        elif data == "accept":
            self._accept()
        elif data == "wake":
            with contextlib.suppress(OSError):
                self._waker.recv(4096)
            with self._todo_lock:
                todo, self._todo = self._todo, collections.deque()
            for conn in todo:
                self._watch(conn.sock.fileno(), conn)
                if conn.buffer:  # a resumed connection: the requests it had sent past its share
                    self._take(conn.sock.fileno(), conn, b"", work)
        elif isinstance(data, _Pending):
            self._read_hello(fd, data)

    def _watch(self, fd: int, data: Union[str, _Pending, Connection]) -> None:
        if fd < 0:
            return
        with contextlib.suppress(KeyError, ValueError, OSError):
            self._epoll.unregister(fd)  # a number reused after another thread closed its socket
        self._epoll.register(fd, select.EPOLLIN)
        self._watched[fd] = data
        if isinstance(data, _Pending):
            self._pending[fd] = data

    def _forget(self, fd: int) -> None:
        with contextlib.suppress(KeyError, ValueError, OSError):
            self._epoll.unregister(fd)
        self._watched.pop(fd, None)
        self._pending.pop(fd, None)

    # -- new connections ---------------------------------------------------------------------------

    def _accept(self) -> None:
        from datadist_sim.fabric.transport.wire import peer_credentials

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
        conn.resume = self._resume
        self._resume(conn)

    def _resume(self, conn: Connection) -> None:
        """Have the poll watch ``conn`` (new, or with room again after its share)."""
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
            most = need - len(buffer)  # the rest of a large frame at once, up to 4 MiB
            data = conn.sock.recv(65536 if most < 65536 else most if most < 1 << 22 else 1 << 22)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:  # the peer is gone: closing may wait for the world (a lost process's clusters die)
            self._forget(fd)
            self._pool.submit(functools.partial(_close, conn))
            return
        self._take(fd, conn, data, work)

    def _take(self, fd: int, conn: Connection, data: bytes, work: List[Any]) -> None:
        """The requests among the frames ``conn.buffer`` and ``data`` complete, up to the connection's
        share: past it, the frames left go back to its buffer and it is read no further (``paused``)
        until an answer makes room."""
        try:
            frames = _frames(conn.buffer, data)
            for index, frame in enumerate(frames):
                request = conn.take(frame)
                if request is None:
                    continue
                if isinstance(request[2], PayloadRefused):  # answered with a TypeError, never run
                    _log.warning(
                        "fabric: refused a request naming %s (connection kept)", request[2].type_name
                    )
                work.append((conn, *request))
                if not conn.took():
                    self._pause(fd, conn, frames[index + 1 :])
                    return
        except Exception as exc:  # an undecodable frame: this connection is not trusted
            _log.warning("fabric: dropping a connection after a bad frame: %.120r", exc)  # escaped, cut short
            self._forget(fd)
            self._pool.submit(functools.partial(_close, conn))

    def _pause(self, fd: int, conn: Connection, rest: List[bytes]) -> None:
        if rest:
            conn.buffer[:0] = b"".join(HEADER.pack(len(frame)) + frame for frame in rest)
        with contextlib.suppress(KeyError, ValueError, OSError):
            self._epoll.unregister(fd)  # still in ``_watched``: closed with the rest on stop
        _log.warning(
            "fabric: a connection (fd %d) has %d calls in flight, its share: read no further until one "
            "is answered",
            fd,
            MAX_IN_FLIGHT,
        )

    def _close_all(self) -> None:
        if self._finished.is_set():
            return
        for fd in list(self._pending):
            self._drop_pending(fd)
        for fd, conn in list(self._watched.items()):
            if isinstance(conn, Connection):
                self._forget(fd)
                conn.close()
        self._epoll.close()
        self._waker.close()
        self._wake_in.close()
        self._finished.set()


def _close(conn: Connection) -> None:
    """Close a connection whose peer is gone, on a pool thread: telling its owner may wait on the world's
    lock, which a thread waiting for the poll's reader may hold."""
    conn.close()
    with contextlib.suppress(OSError):
        conn.sock.close()


def _frames(buffer: bytearray, data: bytes) -> List[bytes]:
    """Take every complete frame off the front of what ``buffer`` holds followed by ``data``, and keep
    the rest in ``buffer``. With nothing buffered (the usual request: one whole frame in one read), the
    frames are sliced from ``data`` itself, one copy each, and ``buffer`` keeps only a partial frame."""
    source: Union[bytes, bytearray] = data
    if buffer:
        buffer += data
        source = buffer
    frames = []
    start = 0
    while len(source) - start >= HEADER.size:
        (length,) = HEADER.unpack_from(source, start)
        if length > MAX_FRAME:
            raise ValueError(f"frame of {length} B")
        end = start + HEADER.size + length
        if len(source) < end:
            break
        frames.append(bytes(source[start + HEADER.size : end]))
        start = end
    if source is buffer:
        del buffer[:start]
    elif start < len(data):
        buffer += data[start:]
    return frames
