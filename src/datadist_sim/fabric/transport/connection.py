"""The fabric's end of one client's connection: frames arrive from the loop's leader, requests run
on the pool, replies are written by whichever thread has them, and no more than ``MAX_IN_FLIGHT`` of
its requests are taken at once."""

from __future__ import annotations

import functools
import itertools
import os
import socket
import threading
from typing import Any, Callable, Optional

from datadist_sim.fabric.transport.channel import Endpoint, Handler, Payload
from datadist_sim.fabric.transport.fdpass import send_with_fd, take_handed
from datadist_sim.fabric.transport.pool import WorkerPool
from datadist_sim.fabric.transport.wire import send_nonblocking

SEND_TIMEOUT_S = 30.0
"""A peer that takes none of a reply for this long is treated as gone."""
MAX_IN_FLIGHT = 16
"""Most requests of one connection taken and not yet answered. A client calls on a connection of its
own, one call at a time (``CallConnection``), so only a client that pipelines calls reaches it: its
connection is then read no further until one is answered, and the client waits, as a full socket
makes it; the other connections are served meanwhile, and the pool's threads stay bounded."""

answering = threading.local()
"""On a thread answering as the leader: ``(loop, answer number)``, for ``Connection.request``."""


class Connection(Endpoint):
    """The fabric's end of one client's connection: frames arrive from the leader (``loop``), requests
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
        # In flight = taken - answered. Only the poll's leader takes (``taken`` has one writer);
        # answers end on any thread and count with ``itertools.count`` (one C call, atomic), so the
        # common call, one in flight, takes no lock; the lock guards only pausing and resuming.
        self.taken = 0
        self._answered = itertools.count(1)
        self._answered_hint = 0  # at most the answers counted (a racy copy: only ever too low)
        self._flight = threading.Lock()
        self.paused = False
        """Not read (at ``MAX_IN_FLIGHT``) until an answer makes room; then ``resume`` is called."""
        self.resume: Callable[[Connection], None] = lambda conn: None

    @property
    def in_flight(self) -> int:
        """Requests taken and not yet answered (``MAX_IN_FLIGHT``)."""
        return self.taken - _counted(self._answered)

    def took(self) -> bool:
        """One more request taken (by the leader); False, with the connection marked paused, when that
        fills its share."""
        self.taken += 1
        if self.taken - self._answered_hint < MAX_IN_FLIGHT:
            return True
        with self._flight:
            self.paused = True  # before the exact count: an answer ending now sees it and resumes
            if self.in_flight < MAX_IN_FLIGHT:
                self.paused = False
                return True
            return False

    def answer(self, rid: int, kind: str, payload: Payload) -> None:
        try:
            super().answer(rid, kind, payload)
        finally:
            left = take_handed()  # a descriptor whose reply was never sent: not kept open
            if left is not None:
                os.close(left)
            self._answered_hint = next(self._answered)
            if self.paused:
                with self._flight:
                    room = self.paused and self.in_flight < MAX_IN_FLIGHT
                    if room:
                        self.paused = False
                if room:
                    self.resume(self)

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
        fd = take_handed()  # a memory file the client fetched (``fdpass``): beside its reply
        if fd is None:
            send_nonblocking(self._sock, data, SEND_TIMEOUT_S)
            return
        try:
            send_with_fd(self._sock, data, fd, SEND_TIMEOUT_S)
        finally:
            os.close(fd)  # ours was a duplicate; the client's copy is in flight

    def request(self, kind: str, *payload: Any, timeout: Optional[float]) -> Any:
        """Ask the client (its memory, a callback). The reply comes through the poll, so a leader
        answering on its own thread hands the poll on before it waits."""
        leading = getattr(answering, "leading", None)
        if leading is not None:
            leading[0].hand_off(leading[1])
        return super().request(kind, *payload, timeout=timeout)

    def _run(self, rid: int, kind: str, payload: Payload) -> None:
        self._pool.submit(functools.partial(self.answer, rid, kind, payload))

    @property
    def sock(self) -> socket.socket:
        return self._sock


def _counted(counter: itertools.count[int]) -> int:
    """How many times ``counter`` (started at 1) has been advanced, without advancing it: its repr is
    ``count(N)``, N the next value (the rare path only: pausing and resuming)."""
    return int(repr(counter)[6:-1]) - 1
