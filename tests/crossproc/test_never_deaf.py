"""The fabric's loop never goes deaf: a client pipelining calls it never reads gets at most its share
run at once (and waits for the rest), a thread the system will not start delays jobs but loses none and
kills no leader, and a handshake is bounded as a whole, not read by read."""

from __future__ import annotations

import select
import socket
import threading
import time
from pathlib import Path
from typing import Any, Iterator, List, Tuple

import pytest

from datadist_sim.fabric.transport import loop, pool, wire
from datadist_sim.fabric.transport.wire import HEADER, HELLO

from .test_loop import WAIT_S, _frame, _replies, _Served


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Any]:
    made: List[_Served] = []

    def make(handler: Any) -> _Served:
        made.append(_Served(tmp_path, handler))
        return made[-1]

    yield make
    for each in made:
        each.stop()


def test_a_pipelining_client_gets_its_share_run_and_the_others_are_served_meanwhile(served: Any) -> None:
    release = threading.Event()
    lock = threading.Lock()
    running: List[int] = [0, 0]  # now, most at once

    def handler(conn: loop.Connection, kind: str, payload: Tuple[Any, ...]) -> Any:
        if kind == "block":
            with lock:
                running[0] += 1
                running[1] = max(running)
            try:
                release.wait(WAIT_S)
            finally:
                with lock:
                    running[0] -= 1
        return (kind, *payload)

    fabric = served(handler)
    sock = fabric.connect()
    calls = 200
    try:
        sock.sendall(b"".join(_frame(rid, "block", rid) for rid in range(1, calls + 1)))
        deadline = time.monotonic() + WAIT_S
        while running[0] < loop.MAX_IN_FLIGHT and time.monotonic() < deadline:
            time.sleep(0.01)
        assert fabric.call("echo", 3) == ("echo", 3)  # another connection is served meanwhile
        assert running[1] == loop.MAX_IN_FLIGHT  # its share, no more: the rest wait unread
        release.set()
        replies = _replies(sock, calls)  # and every one of them is answered in the end
        assert sorted(reply[1] for reply in replies) == list(range(1, calls + 1))
        assert all(reply[2] for reply in replies)
    finally:
        release.set()
        sock.close()


def test_a_thread_the_system_refuses_delays_jobs_but_loses_none_and_kills_no_leader(
    served: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    fabric = served(lambda conn, kind, payload: (kind, *payload))
    assert fabric.call("echo", 1) == ("echo", 1)
    fabric.pool._idle_s = 0.01  # no idle thread left but the leader: every job now needs a new one
    deadline = time.monotonic() + WAIT_S
    while fabric.pool.threads > 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    real_start = threading.Thread.start

    def refuse(thread: threading.Thread) -> None:
        if thread.name.startswith("test-loop"):
            raise RuntimeError("can't start new thread")
        real_start(thread)

    monkeypatch.setattr(threading.Thread, "start", refuse)
    for number in range(20):  # every handshake and call now runs on the threads already there
        assert fabric.call("echo", number) == ("echo", number)
    assert fabric.pool.refused > 0
    monkeypatch.setattr(threading.Thread, "start", real_start)
    assert fabric.call("echo", "after") == ("echo", "after")


def test_the_pool_runs_at_most_its_bound_of_threads_and_queues_the_rest() -> None:
    workers = pool.WorkerPool("bounded-pool", max_threads=3)
    release = threading.Event()
    done: List[int] = []
    try:
        for number in range(10):
            workers.submit(lambda number=number: (release.wait(WAIT_S), done.append(number)))
        assert workers.threads == 3
        release.set()
        deadline = time.monotonic() + WAIT_S
        while len(done) < 10 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert sorted(done) == list(range(10))
    finally:
        release.set()
        workers.close(WAIT_S)


def test_a_handshake_is_bounded_as_a_whole_not_read_by_read(
    served: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A peer that says HELLO and then answers the challenge a byte at a time, each byte well within any
    single read's wait, is dropped once the whole handshake's time is up."""
    monkeypatch.setattr(wire, "HANDSHAKE_TIMEOUT_S", 0.5)
    fabric = served(lambda conn, kind, payload: (kind, *payload))
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(fabric.path)
    try:
        sock.sendall(HEADER.pack(len(HELLO)) + HELLO)
        sock.settimeout(WAIT_S)
        (length,) = HEADER.unpack(sock.recv(HEADER.size, socket.MSG_WAITALL))
        sock.recv(length, socket.MSG_WAITALL)  # the fabric's challenge
        sock.sendall(HEADER.pack(64))  # an answer of 64 bytes, sent a byte every 0.2 s (13 s in all)
        dropped = False
        for _ in range(64):
            readable, _, _ = select.select([sock], [], [], 0.2)
            if readable and sock.recv(1) == b"":
                dropped = True
                break
            try:
                sock.sendall(b"x")
            except OSError:
                dropped = True
                break
        assert dropped, "the fabric waited on a handshake that kept sending a byte at a time"
    finally:
        sock.close()
