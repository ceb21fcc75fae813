"""The fabric's poll loop in one process: the leader answers a request on its own thread, so what
must hold is that an answer that blocks there never keeps the other connections waiting. It hands the
poll on at once when it asks a client something (whose reply only the poll reads), and after
``HANDOFF_S`` when it blocks on anything else."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from pathlib import Path
from typing import Any, Iterator, List, Tuple

import pytest

from datadist_sim.fabric.transport import loop
from datadist_sim.fabric.transport.channel import CallConnection, Channel, ChannelClosed
from datadist_sim.fabric.transport.codec import make_dumps, make_loads
from datadist_sim.fabric.transport.pool import WorkerPool
from datadist_sim.fabric.transport.wire import HEADER, client_handshake

TOKEN = "0123456789abcdef0123"
WAIT_S = 20.0
"""Every wait of these tests is bounded by this, so a loop that starves a connection fails, not hangs."""


def _no_reference(pid: Any) -> Any:
    raise AssertionError(f"unexpected reference {pid!r}")


class _Served:
    """A ``LeaderLoop`` on a socket in ``folder``, its connections answering with ``handler``;
    ``prepare`` sees the loop before it runs (a test that wraps one of its steps must do it then: once
    the leader waits inside a step, a wrapper set later misses that call)."""

    def __init__(self, folder: Path, handler: Any, prepare: Any = None) -> None:
        self.path = str(folder / "loop.sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(self.path)
        listener.listen(16)
        self.listener = listener
        self.conns: List[loop.Connection] = []
        self.pool = WorkerPool("test-loop")

        def admit(sock: socket.socket, pid: int) -> loop.Connection:
            conn = loop.Connection(
                sock,
                lambda kind, payload: handler(conn, kind, payload),
                self.pool,
                dumps=make_dumps(),
                loads=make_loads(),
            )
            self.conns.append(conn)
            return conn

        self.loop = loop.LeaderLoop(listener, TOKEN, admit, self.pool)
        if prepare is not None:
            prepare(self.loop)
        self.thread = threading.Thread(target=self.loop.run, args=(lambda: True,), daemon=True)
        self.thread.start()

    def connect(self) -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(self.path)
        client_handshake(sock, TOKEN, WAIT_S)
        return sock

    def call(self, kind: str, *payload: Any) -> Any:
        conn = CallConnection(self.connect(), make_dumps(), make_loads())
        try:
            return conn.call(kind, payload, WAIT_S)
        finally:
            conn.close()

    def stop(self) -> None:
        self.loop.stop()
        self.thread.join(WAIT_S)
        self.listener.close()
        self.pool.close(WAIT_S)  # no thread of this loop outlives the test


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Any]:
    made: List[_Served] = []

    def make(handler: Any, prepare: Any = None) -> _Served:
        made.append(_Served(tmp_path, handler, prepare))
        return made[-1]

    yield make
    for each in made:
        each.stop()


def test_an_answer_blocked_on_the_leaders_thread_does_not_keep_another_connection_waiting(
    served: Any,
) -> None:
    started, release = threading.Event(), threading.Event()
    answered_while_blocked: List[bool] = []

    def handler(conn: loop.Connection, kind: str, payload: Tuple[Any, ...]) -> Any:
        if kind == "block":
            started.set()
            return release.wait(WAIT_S)
        return ("echo", *payload)

    fabric = served(handler)
    blocked: List[Any] = []
    caller = threading.Thread(target=lambda: blocked.append(fabric.call("block")), daemon=True)
    caller.start()
    assert started.wait(WAIT_S)
    try:
        assert fabric.call("echo", 7) == ("echo", 7)
        answered_while_blocked.append(not release.is_set())
    finally:
        release.set()
    caller.join(WAIT_S)
    assert answered_while_blocked == [True]
    assert blocked == [True]


def test_a_leader_that_asks_a_client_hands_the_poll_on_at_once(
    served: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(loop, "HANDOFF_S", 3600.0)  # the standby never steps in: only the ask hands on
    asked: List[loop.Connection] = []

    def handler(conn: loop.Connection, kind: str, payload: Tuple[Any, ...]) -> Any:
        if kind == "hello":
            asked.append(conn)
            return os.getpid()
        (target,) = payload  # "ask": the fabric asks the first client, whose reply the poll reads
        return asked[target].request("ping", 5, timeout=WAIT_S)

    fabric = served(handler)
    client = Channel(
        fabric.connect(),
        lambda kind, payload: ("pong", *payload),
        dumps=make_dumps(),
        loads=make_loads(),
        spawn=False,
        name="test-client",
    )
    client.start()
    try:
        assert client.request("hello", timeout=WAIT_S) == os.getpid()
        assert fabric.call("ask", 0) == ("pong", 5)
    finally:
        client.close()


def test_stopping_while_an_answer_blocks_closes_the_loop_without_waiting_for_it(served: Any) -> None:
    started, release = threading.Event(), threading.Event()

    def handler(conn: loop.Connection, kind: str, payload: Tuple[Any, ...]) -> Any:
        started.set()
        return release.wait(WAIT_S)

    fabric = served(handler)
    outcome: List[str] = []

    def call() -> None:
        try:
            fabric.call("block")
            outcome.append("answered")
        except ChannelClosed:
            outcome.append("closed")

    caller = threading.Thread(target=call, daemon=True)
    caller.start()
    assert started.wait(WAIT_S)
    try:
        fabric.loop.stop()
        fabric.thread.join(WAIT_S)
        stopped_while_blocked = not fabric.thread.is_alive() and not release.is_set()
    finally:
        release.set()
    caller.join(WAIT_S)
    assert stopped_while_blocked
    assert outcome == ["closed"]  # its connection closed with the loop; the late answer is never sent


def _frame(rid: int, kind: str, *payload: Any) -> bytes:
    body = make_dumps()(("req", rid, kind, payload))
    return HEADER.pack(len(body)) + body


def _replies(sock: socket.socket, count: int) -> List[Any]:
    """``count`` replies read off ``sock``, decoded, in the order they came."""
    loads = make_loads()
    sock.settimeout(WAIT_S)
    data, found = b"", []
    while len(found) < count:
        data += sock.recv(65536)
        while len(data) >= HEADER.size and len(data) >= HEADER.size + HEADER.unpack_from(data)[0]:
            end = HEADER.size + HEADER.unpack_from(data)[0]
            found.append(loads(data[HEADER.size : end]))
            data = data[end:]
    return found


@pytest.mark.parametrize("how", ["two in one write", "byte by byte", "one and a half, then the rest"])
def test_requests_are_read_whatever_the_writes_cut_them_into(served: Any, how: str) -> None:
    """A request usually arrives as one whole frame in one read (read straight, without buffering);
    frames coalesced in one write, or cut anywhere, are buffered and read all the same."""
    fabric = served(lambda conn, kind, payload: (kind, *payload))
    sock = fabric.connect()
    try:
        stream = _frame(1, "echo", 1) + _frame(2, "echo", "two")
        if how == "two in one write":
            sock.sendall(stream)
        elif how == "byte by byte":
            for i in range(len(stream)):
                sock.sendall(stream[i : i + 1])
        else:
            cut = len(_frame(1, "echo", 1)) + 5
            sock.sendall(stream[:cut])
            sock.sendall(stream[cut:])
        replies = sorted(_replies(sock, 2), key=lambda reply: reply[1])
        assert replies == [("rep", 1, True, ("echo", 1)), ("rep", 2, True, ("echo", "two"))]
    finally:
        sock.close()


def test_a_stop_that_lands_as_the_leader_takes_a_request_does_not_wait_for_its_answer(
    served: Any,
) -> None:
    """``stop`` between the leader's read of a request and its answer: the standby may already have
    looked for an answer to hand on and left, so the leader must not answer on its own thread (it goes
    on to close every connection) and ``run`` returns while the answer blocks."""
    release, started = threading.Event(), threading.Event()

    def handler(conn: loop.Connection, kind: str, payload: Tuple[Any, ...]) -> Any:
        started.set()
        return release.wait(WAIT_S)

    def stop_after_the_read(leader: loop.LeaderLoop) -> None:
        collect = leader._collect
        others = set(threading.enumerate())  # another loop's standby in this process is not waited for

        def collect_then_stop() -> Any:
            work = collect()
            if work:
                leader.stop()  # the stop lands here, after the read, before the answer
                for thread in threading.enumerate():
                    if thread.name == "fabric-standby" and thread not in others:
                        thread.join(WAIT_S)  # and the standby has looked and left
            return work

        leader._collect = collect_then_stop  # type: ignore[method-assign]

    fabric = served(handler, stop_after_the_read)
    caller = threading.Thread(target=lambda: _call_quietly(fabric), daemon=True)
    caller.start()
    try:
        assert started.wait(WAIT_S)
        fabric.thread.join(5.0)
        assert not fabric.thread.is_alive(), "run() waited for an answer blocked on the leader's thread"
    finally:
        release.set()


def _call_quietly(fabric: Any) -> None:
    with contextlib.suppress(ChannelClosed):
        fabric.call("block")


def test_a_closed_pool_leaves_no_thread_behind() -> None:
    """An idle pool thread lives ``idle_s`` (30 s) for the next job; closing the pool ends it now, and a
    job submitted after still runs."""
    pool = WorkerPool("closing-pool")
    ran = [threading.Event(), threading.Event()]
    pool.submit(ran[0].set)
    assert ran[0].wait(WAIT_S)
    pool.close(WAIT_S)
    assert pool.threads == 0
    assert not [t for t in threading.enumerate() if t.name.startswith("closing-pool")]
    pool.submit(ran[1].set)
    assert ran[1].wait(WAIT_S)
    pool.close(WAIT_S)
    assert not [t for t in threading.enumerate() if t.name.startswith("closing-pool")]
