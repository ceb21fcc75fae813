"""The fabric: one process that owns a ``SimWorld`` and runs every client process's instances in it.

Each connected client process is a *session*. Its ``LLMDataDist`` objects (and their managers, caches and
tasks) live here, as the ordinary in-process face, and the client holds proxies that name them by
handle. So a cross-process world has exactly the semantics, codes, timeouts, fault rules and trace of an
in-process one: it *is* one. What differs is memory (``shm``): caches are shared-memory files every
process can map, and raw pointers a client registered are read and written by that client on request.

A session whose connection closes (the process exited or was killed) is treated as the real library
would see a dead process: each cluster it had initialised is killed in the world (``SimWorld.kill``:
listeners close, memory is reclaimed, peers find the link dead), and a transfer that was waiting on its
memory fails with the mode's timeout code.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import stat
import threading
from typing import Any, Dict, List, Optional, Set, Tuple

from datadist_sim._status import LLMStatusCode
from datadist_sim._world.surface import (
    SimWorld,
    holds,
    observe_calls,
    observe_nodes,
    reset_default_world,
)
from datadist_sim.fabric.host.hixl_host import HixlOwners, HostedHixl
from datadist_sim.fabric.host.raw import MEMORY_TIMEOUT_S, RawRouter
from datadist_sim.fabric.host.session import STALE as STALE_HANDLE
from datadist_sim.fabric.host.session import Session, by_handle_types, calling_session
from datadist_sim.fabric.host.shm import SharedAddressSpace, lend
from datadist_sim.fabric.transport import codec
from datadist_sim.fabric.transport.address import FabricAddress
from datadist_sim.fabric.transport.fdpass import hand_over
from datadist_sim.fabric.transport.launch import STALE, lock_path, log_path, probe, start_lock
from datadist_sim.fabric.transport.loop import Connection, LeaderLoop
from datadist_sim.fabric.transport.pool import WorkerPool
from datadist_sim.fabric.transport.wire import private_directory

_log = logging.getLogger("datadist_sim.fabric")


class FabricServer:
    """Accepts client processes on a Unix socket and serves them one world."""

    def __init__(self, address: FabricAddress, world: SimWorld) -> None:
        self.address = address
        self.world = world
        self.raw = RawRouter(
            self.silent_mid_transfer,
            address.option_float("memory_timeout", MEMORY_TIMEOUT_S),
            self.session_of,
            self.registered_by,
        )
        self.raw.direct = address.option_float("direct_memory", 1.0) != 0  # 0: always scratch files
        self.space = SharedAddressSpace(self.raw, backed=world.memory.backed)
        world.memory = self.space
        self.by_handle = by_handle_types()
        self.hixl = HixlOwners()
        self.sessions: Set[Session] = set()
        self.pool = WorkerPool("fabric-call")
        self._lock = threading.Lock()
        self._count = 0
        self._stop = threading.Event()
        self._sock: Optional[socket.socket] = None
        self._stop_counting = observe_calls(self._count_call)  # every traced call, of any world
        self._stop_noting = observe_nodes(self._note_mode)  # the engine mode of each instance
        self._inode = 0
        self._loop: Optional[LeaderLoop] = None

    # -- lifecycle -----------------------------------------------------------------------------------

    def bind(self, *, lock_fd: Optional[int] = None) -> None:
        """Listen at the address, in a private directory of ours. A socket file nobody listens on is
        replaced; one that accepts (or whose backlog is full) is a live fabric: refused. Done under the
        start lock (``lock_fd``: the one our starter holds for us)."""
        private_directory(os.path.dirname(self.address.path))
        if lock_fd is not None:
            self._bind()
            os.close(lock_fd)
            return
        with start_lock(self.address):
            self._bind()

    def _bind(self) -> None:
        path = self.address.path
        if os.path.lexists(path):
            if not stat.S_ISSOCK(os.lstat(path).st_mode):
                raise RuntimeError(f"{path} exists and is not a socket")
            if probe(path) != STALE:
                raise RuntimeError(f"a fabric is already listening at {path}")
            os.unlink(path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            sock.bind(path)
        finally:
            os.umask(old)
        sock.listen(socket.SOMAXCONN)
        self._inode = os.stat(path).st_ino
        self._sock = sock
        _raise_file_limit()

    def serve(self, *, idle_exit_s: Optional[float] = None) -> None:
        """Accept until ``stop()``, or until no process has been connected for ``idle_exit_s``."""
        reset_default_world(self.world)
        if self._sock is None:
            self.bind()
        assert self._sock is not None
        self._loop = LeaderLoop(self._sock, self.address.token, self._admit, self.pool)
        idle_since = [_now()]

        def tick() -> bool:
            if self._stop.is_set():
                return False
            with self._lock:
                busy = bool(self.sessions)
            if busy or self._loop is None or self._loop.pending_count:
                idle_since[0] = _now()
            return idle_exit_s is None or _now() - idle_since[0] <= idle_exit_s

        try:
            self._loop.run(tick)
        finally:
            self.close()
            # The served world ends here (its trace file is closed next): a program that goes on in this
            # process (a test run in-process) gets a fresh drop-in world, not one writing to a closed file.
            reset_default_world()

    def stop(self) -> None:
        self._stop.set()
        if self._loop is not None:
            self._loop.wake()

    def _count_call(self, op: str, outcome: str, detail: str) -> None:
        """Each traced call counts for the process whose request it serves (error-path coverage)."""
        session = calling_session()
        if session is not None and session.server is self:
            session.coverage.count(op, outcome, detail)

    def _note_mode(self, mode: str) -> None:
        """An instance came up for the process whose request it serves: coverage says its mode."""
        session = calling_session()
        if session is not None and session.server is self:
            session.coverage.note_mode(mode)

    def close(self) -> None:
        """Stop listening and take the socket, lock and log files away (under the start lock, so no
        process is starting a fabric here meanwhile); end every session; unlink shared memory."""
        self._stop_counting()
        self._stop_noting()
        if self._sock is not None:
            try:
                with start_lock(self.address, timeout=5.0):
                    self._remove_files()
            except (TimeoutError, OSError):
                self._remove_files()
        with self._lock:
            sessions = list(self.sessions)
        for session in sessions:
            session.channel.close()
        self.space.release_all()
        self.pool.close()

    def _remove_files(self) -> None:
        if self._sock is None:
            return
        self._sock.close()
        self._sock = None
        path = self.address.path
        with contextlib.suppress(OSError):
            if os.stat(path).st_ino == self._inode:  # ours, not a successor's
                os.unlink(path)
        for extra in (log_path(self.address), lock_path(self.address)):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(extra)

    def _admit(self, sock: socket.socket, pid: int) -> Connection:
        """A connection that passed the handshake: its first request says whether it is a new process
        (``hello``: a session begins) or another connection of one (``attach`` with the session's key)."""

        def first(kind: str, payload: Tuple[Any, ...]) -> Any:
            return self._first(conn, pid, kind, payload)

        # no object handles before hello or attach: a decoder without the ends' codes refuses them
        conn = Connection(sock, first, self.pool, dumps=codec.make_dumps(), loads=codec.make_loads())
        return conn

    def _first(self, conn: Connection, pid: int, kind: str, payload: Tuple[Any, ...]) -> Any:
        if kind == "hello":
            with self._lock:
                self._count += 1
                session = Session(self, conn, self._count)
                session.pid = pid
                self.sessions.add(session)
            return {"seed": self.world.seed, "pid": os.getpid(), "key": session.key}
        if kind == "attach":
            with self._lock:
                found = [s for s in self.sessions if s.key == payload[0] and s.pid == pid]
            if not found:
                raise RuntimeError("no such process in this fabric")
            found[0].attach(conn)
            return True
        raise RuntimeError(f"a connection must begin with hello or attach, not {kind!r}")

    def session_lost(self, session: Session) -> None:
        """A client process is gone: kill every cluster it still ran, forget its memory."""
        with self._lock:
            self.sessions.discard(session)
        session.close_calls()
        self.hixl.session_lost(session)
        with self.world.lock:
            lost = list(session.clusters)
            session.lost.update(session.clusters)
            session.clusters.clear()
            for cluster_id in lost:
                with contextlib.suppress(Exception):
                    self._kill(cluster_id)
                _log.info("process %s lost: cluster %s killed", session.pid, cluster_id)

    def silent_mid_transfer(self, session: Session, died: bool) -> None:
        """A process died, or did not answer in time, while a transfer needed its memory: the transfer
        times out, which breaks the link it ran on (re-link to recover). A dead process's clusters die
        with it, and every link to them breaks; one merely slow stays alive.

        Runs on the transferring thread, which may hold the world's (re-entrant) lock.
        """
        caller = calling_session()
        for silent in session.ran():
            for node in self.world.nodes:
                if silent in node.peers and (
                    died or (caller is not None and node.cluster_id in caller.clusters)
                ):
                    self.world.break_link(node.cluster_id, silent)
        if died:
            session.channel.close()
            self.session_lost(session)

    def _kill(self, cluster_id: int) -> None:
        kill = getattr(self.world, "kill", None)
        if kill is not None:
            kill(cluster_id)
            return
        node = self.world.node(cluster_id)  # a world without fault plans: finalize it instead
        if node is not None:
            self.world.remove_node(node)

    # -- dispatch ------------------------------------------------------------------------------------

    def dispatch(self, session: Session, kind: str, payload: Tuple[Any, ...]) -> Any:
        if kind in ("call", "get", "set", "str") and payload[0] is STALE_HANDLE:
            raise RuntimeError("this object no longer exists in the datadist-sim fabric")
        if kind == "call":
            return self._call(session, *payload)
        if kind == "get":
            obj, name = payload
            if name.startswith("_"):
                raise AttributeError(name)
            attr = getattr(type(obj), name, None)
            if callable(attr) and not isinstance(attr, property):
                return (True, None)
            return (False, getattr(obj, name))
        if kind == "set":
            obj, name, value = payload
            if name.startswith("_"):
                raise AttributeError(name)
            setattr(obj, name, value)
            return None
        if kind == "released":  # objects the client dropped, then the request itself
            released, kind, payload = payload
            session.release(released)
            return self.dispatch(session, kind, payload)
        if kind == "str":
            return str(payload[0])
        if kind == "new":
            from datadist_sim.llm_datadist.v2.llm_datadist import LLMDataDist

            return session.handle_of(LLMDataDist(*payload))
        if kind == "fd":  # a memory file by name: its size, and its descriptor beside the reply
            fd, size = lend(payload[0])
            hand_over(fd)
            return size
        if kind == "new_hixl":
            return session.handle_of(HostedHixl(self.hixl))
        if kind == "fn" and payload[0] == "coverage":
            return session.coverage.as_dict()
        if kind == "fn":
            return self._function(*payload)
        raise ValueError(f"unknown request {kind!r}")

    def _call(
        self, session: Session, obj: Any, name: str, args: Tuple[Any, ...], kwargs: Dict[str, Any]
    ) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if name not in _LIFECYCLE:  # the calls a cluster's life does not hang on: nothing to note first
            return getattr(obj, name)(*args, **kwargs)
        from datadist_sim.llm_datadist.v2.llm_datadist import LLMDataDist

        is_instance = isinstance(obj, LLMDataDist)
        if is_instance and name == "init":
            self._one_per_process(session, obj)
        result = getattr(obj, name)(*args, **kwargs)
        if is_instance:
            cluster_id = obj.cluster_id
            node = self.world.node(cluster_id)
            if name == "init" and node is not None:
                session.clusters[cluster_id] = node.mode
            elif name == "finalize":
                session.clusters.pop(cluster_id, None)
        return result

    def _one_per_process(self, session: Session, obj: Any) -> None:
        """The real rule: one initialised LLMDataDist per OS process (each session is one)."""
        from datadist_sim.llm_datadist.status import raise_if_false

        others = [cid for cid in session.clusters if cid != obj.cluster_id]
        raise_if_false(not others, "Cannot init multiple LLMDataDists", status_code=LLMStatusCode.LLM_FAILED)

    def session_of(self, party: object) -> Optional[Session]:
        """The live process that runs cluster ``party``, or whose ``hixl.Hixl`` opened engine ``party``
        (the two kinds of party a copy names, ``surface.copy_parties``)."""
        served = getattr(party, "cluster_id", None)  # the engine of a hixl-backend instance: its process
        if not isinstance(party, int) and served is None:
            return self.hixl.owner(party)
        cluster_id = party if isinstance(party, int) else served
        with self._lock:
            sessions = list(self.sessions)
        for session in sessions:
            if cluster_id in session.clusters:
                return session
        return None

    def registered_by(self, address: int, nbytes: int) -> List[Session]:
        """The live processes with a cluster whose memory (registered caches, pools) holds the range."""
        with self._lock:
            sessions = list(self.sessions)
        return [s for s in sessions if any(holds(self.world, c, address, nbytes) for c in list(s.clusters))]

    def _function(self, name: str, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
        if name == "tensor_views":
            from datadist_sim._views import tensor_views

            return tensor_views(*args, world=self.world, **kwargs)
        if name == "trace_lines":
            return self.world.trace.lines(*args, **kwargs)
        if name == "trace_events":
            return [event.to_json() for event in self.world.trace]
        if name == "now":
            return self.world.now()
        if name == "status":
            return {
                "clusters": sorted(node.cluster_id for node in self.world.nodes),
                "processes": len(self.sessions),
                "objects": sum(session.object_count for session in list(self.sessions)),
                "shared_segments": self.space.segment_count,
                "scratch_files_made": self.space.scratch_files_made,
                "direct_copies": self.raw.direct_copies,
                "peeks": self.raw.peeks,
                "threads_refused": self.pool.refused,
                "backed_bytes": self.space.backed_bytes,
            }
        raise ValueError(f"unknown fabric function {name!r}")


_LIFECYCLE = frozenset({"init", "finalize"})
"""An instance's calls that begin or end a cluster of the calling process."""


def _now() -> float:
    import time

    return time.monotonic()


def _raise_file_limit() -> None:
    """Let the fabric hold as many connections as this user may open (each is one descriptor)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    del soft
