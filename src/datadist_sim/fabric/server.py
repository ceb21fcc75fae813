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
import io
import itertools
import logging
import os
import pickle
import socket
import stat
import threading
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

import numpy as np

from datadist_sim._status import LLMStatusCode
from datadist_sim._world.address_space import is_simulated
from datadist_sim._world.cluster import Mode
from datadist_sim._world.errors import SimError
from datadist_sim._world.world import SimWorld
from datadist_sim.fabric.address import FabricAddress
from datadist_sim.fabric.channel import Channel, ChannelClosed, ChannelTimeout, accept_token
from datadist_sim.fabric.shm import Bytes, Range, SharedAddressSpace, Take, reclaim_stale

_log = logging.getLogger("datadist_sim.fabric")
INLINE_BYTES = 256 << 10
"""Raw-memory reads and writes up to this size travel in the message; larger ones through shared memory."""
MEMORY_TIMEOUT_S = 30.0
"""Longest wait for a client to read or write its own memory; past it the transfer times out."""

_STALE = object()
"""Stands for a handle the fabric no longer knows (decoding must not fail the whole connection)."""
CALLBACK_TIMEOUT_S = 600.0
"""Longest wait for a client's ``synchronize_layer`` given no timeout of its own."""

_context = threading.local()


def _by_handle_types() -> Tuple[type, ...]:
    from datadist_sim.llm_datadist.v2._caches import Cache, KvCache
    from datadist_sim.llm_datadist.v2._transfer import CacheTask
    from datadist_sim.llm_datadist.v2.cache_manager import CacheManager
    from datadist_sim.llm_datadist.v2.llm_datadist import LLMDataDist
    from datadist_sim.llm_datadist_v1.kv_cache_manager import KvCacheManager

    return (LLMDataDist, KvCacheManager, CacheManager, Cache, KvCache, CacheTask)


class Session:
    """One client process: its connection, the objects it holds handles to, the clusters it runs."""

    def __init__(self, server: FabricServer, sock: socket.socket, number: int) -> None:
        self.server = server
        self.number = number
        self.pid = 0
        self._objects: Dict[int, Any] = {}
        self._handles: Dict[int, int] = {}  # id(object) -> handle
        self._sent: Dict[int, int] = {}  # handle -> references sent and not yet released
        self._numbers = itertools.count(1)
        self._lock = threading.Lock()
        self.clusters: Dict[int, Mode] = {}
        self.lost: List[int] = []
        """Clusters that were still initialised when the process was lost."""
        self.channel = Channel(
            sock,
            self._handle,
            dumps=self._dumps,
            loads=self._loads,
            spawn=True,
            name=f"session-{number}",
            on_close=self._closed,
        )

    # -- handles -------------------------------------------------------------------------------------

    def handle_of(self, obj: Any) -> int:
        """The handle the client will know ``obj`` by; counts one more reference sent to it."""
        with self._lock:
            handle = self._handles.get(id(obj))
            if handle is None:
                handle = next(self._numbers)
                self._objects[handle] = obj
                self._handles[id(obj)] = handle
            self._sent[handle] = self._sent.get(handle, 0) + 1
            return handle

    def release(self, items: Sequence[Tuple[int, int]]) -> None:
        """The client dropped its proxies: forget each object once every reference sent is accounted
        for (a reference still in flight keeps it). A forgotten ``KvCache`` is then collected here,
        and its safety net frees it, as a real one going out of scope is."""
        with self._lock:
            for handle, count in items:
                left = self._sent.get(handle, 0) - count
                if left > 0:
                    self._sent[handle] = left
                    continue
                self._sent.pop(handle, None)
                obj = self._objects.pop(handle, None)
                if obj is not None:
                    self._handles.pop(id(obj), None)

    @property
    def object_count(self) -> int:
        with self._lock:
            return len(self._objects)

    def _dumps(self, message: Any) -> bytes:
        buffer = io.BytesIO()
        pickler = pickle.Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL)
        types = self.server.by_handle
        space = self.server.space

        def persistent_id(obj: Any) -> Any:
            if isinstance(obj, types) and getattr(obj, "cache_id", 0) != -1:
                return ("ref", self.handle_of(obj), type(obj).__name__)
            if isinstance(obj, np.ndarray):
                ref = space.locate(obj)
                if ref is not None:
                    return ("shm", ref)
            return None

        pickler.persistent_id = persistent_id  # type: ignore[method-assign]
        pickler.dump(message)
        return buffer.getvalue()

    def _loads(self, data: bytes) -> Any:
        unpickler = pickle.Unpickler(io.BytesIO(data))

        def persistent_load(pid: Any) -> Any:
            if pid[0] == "ref":
                with self._lock:
                    return self._objects.get(pid[1], _STALE)
            if pid[0] == "callback":
                return _remote_synchronizer(self, pid[1])
            raise pickle.UnpicklingError(f"unknown reference {pid[0]!r}")

        unpickler.persistent_load = persistent_load  # type: ignore[method-assign]
        return unpickler.load()

    # -- requests from the client --------------------------------------------------------------------

    def _handle(self, kind: str, payload: Tuple[Any, ...]) -> Any:
        _context.session = self
        try:
            return self.server.dispatch(self, kind, payload)
        finally:
            _context.session = None

    def ran(self) -> List[int]:
        """The clusters this process runs, or ran when it was lost."""
        return list(self.clusters) or list(self.lost)

    def _closed(self) -> None:
        self.server.session_lost(self)


def _remote_synchronizer(session: Session, target: int) -> Any:
    """A ``LayerSynchronizer`` whose ``synchronize_layer`` runs in the client process that passed it."""
    from datadist_sim.llm_datadist.v2._transfer import LayerSynchronizer

    class RemoteSynchronizer(LayerSynchronizer):
        def synchronize_layer(self, layer_index: int, timeout_in_millis: Optional[int]) -> bool:
            wait = CALLBACK_TIMEOUT_S if timeout_in_millis is None else timeout_in_millis / 1000 + 5.0
            try:
                args = (layer_index, timeout_in_millis)
                return bool(
                    session.channel.request("callback", target, "synchronize_layer", args, timeout=wait)
                )
            except (ChannelClosed, ChannelTimeout):
                return False  # its process died or never answered: the layer fails

    return RemoteSynchronizer()


class RawRouter:
    """Finds the process that owns a raw pointer and has it read or write its memory.

    Ranges a process registered (``register_cache`` and the like) are remembered with their owner;
    any other raw pointer belongs to the process whose call is running.
    """

    def __init__(self, on_silent: Callable[[Session, bool], None], timeout_s: float) -> None:
        self._lock = threading.Lock()
        self._ranges: List[Tuple[int, int, Session]] = []
        self._on_silent = on_silent
        self.timeout_s = timeout_s

    def add(self, session: Session, start: int, nbytes: int) -> None:
        with self._lock:
            self._ranges.append((start, start + max(nbytes, 1), session))

    def drop(self, session: Session) -> None:
        with self._lock:
            self._ranges = [entry for entry in self._ranges if entry[2] is not session]

    def _owner(self, address: int, nbytes: int) -> Session:
        with self._lock:
            for low, high, session in reversed(self._ranges):
                if low <= address and address + nbytes <= high:
                    return session
        caller: Optional[Session] = getattr(_context, "session", None)
        if caller is None:
            raise SimError(
                LLMStatusCode.LLM_PARAM_INVALID,
                f"address {address:#x} (+{nbytes} B) is neither simulated nor registered memory "
                "of any process",
            )
        return caller

    def _groups(self, keys: Sequence[Range]) -> List[Tuple[Session, List[int]]]:
        """Indices of ``keys`` grouped by owning process, in first-seen order."""
        groups: Dict[int, Tuple[Session, List[int]]] = {}
        for index, key in enumerate(keys):
            owner = self._owner(*key)
            groups.setdefault(id(owner), (owner, []))[1].append(index)
        return list(groups.values())

    def _request(self, owner: Session, kind: str, *payload: Any) -> Any:
        try:
            return owner.channel.request(kind, *payload, timeout=self.timeout_s)
        except (ChannelClosed, ChannelTimeout) as exc:
            code = (
                LLMStatusCode.LLM_TIMEOUT
                if Mode.CACHE_MANAGER in owner.clusters.values() or not owner.clusters
                else LLMStatusCode.LLM_WAIT_PROCESS_TIMEOUT
            )
            self._on_silent(owner, isinstance(exc, ChannelClosed))
            raise SimError(
                code, f"process {owner.pid} holding the memory did not answer ({exc}); transfer timed out"
            ) from None

    def read(self, ranges: Sequence[Range], take: Take) -> List[Bytes]:
        """The bytes of each range, read by its owner: small reads inline, large ones through a
        shared scratch file the owner copies into (no bytes through the socket)."""
        out: List[Bytes] = [np.empty(0, np.uint8)] * len(ranges)
        for owner, indices in self._groups(ranges):
            part = [ranges[i] for i in indices]
            total = sum(n for _, n in part)
            if total <= INLINE_BYTES:
                arrays = [np.frombuffer(b, np.uint8) for b in self._request(owner, "mem_read", part)]
            else:
                scratch = take(total)
                self._request(owner, "mem_read_to", scratch.path, part)
                arrays = scratch.split([n for _, n in part])
            for index, array in zip(indices, arrays):
                out[index] = array
        return out

    def check_writable(self, ranges: Sequence[Range]) -> None:
        for owner, indices in self._groups(ranges):
            self._request(owner, "mem_check", [ranges[i] for i in indices])

    def write(self, chunks: Sequence[Tuple[int, Bytes]], take: Take) -> None:
        """Have each owner write its chunks (inline when small, else from a shared scratch file)."""
        for owner, indices in self._groups([(a, data.nbytes) for a, data in chunks]):
            part = [chunks[i] for i in indices]
            total = sum(data.nbytes for _, data in part)
            if total <= INLINE_BYTES:
                self._request(owner, "mem_write", [(a, data.tobytes()) for a, data in part])
                continue
            scratch = take(total)
            placed = scratch.fill([data for _, data in part])
            self._request(
                owner, "mem_write_from", scratch.path, [(a, o, n) for (a, _), (o, n) in zip(part, placed)]
            )


class FabricServer:
    """Accepts client processes on a Unix socket and serves them one world."""

    def __init__(self, address: FabricAddress, world: SimWorld) -> None:
        self.address = address
        self.world = world
        self.raw = RawRouter(
            self.silent_mid_transfer, address.option_float("memory_timeout", MEMORY_TIMEOUT_S)
        )
        reclaim_stale()
        self.space = SharedAddressSpace(self.raw, backed=world.memory.backed)
        world.memory = self.space
        self.by_handle = _by_handle_types()
        self.sessions: Set[Session] = set()
        self._lock = threading.Lock()
        self._count = 0
        self._stop = threading.Event()
        self.idle = threading.Event()
        self._sock: Optional[socket.socket] = None

    # -- lifecycle -----------------------------------------------------------------------------------

    def bind(self) -> None:
        """Listen at the address; a stale socket file (nobody accepting) is replaced."""
        path = self.address.path
        if os.path.exists(path):
            if not stat.S_ISSOCK(os.stat(path).st_mode):
                raise RuntimeError(f"{path} exists and is not a socket")
            probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            probe.settimeout(1.0)
            try:
                probe.connect(path)
            except OSError:
                os.unlink(path)
            else:
                raise RuntimeError(f"a fabric is already listening at {path}")
            finally:
                probe.close()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            sock.bind(path)
        finally:
            os.umask(old)
        sock.listen(64)
        sock.settimeout(0.2)
        self._sock = sock

    def serve(self, *, idle_exit_s: Optional[float] = None) -> None:
        """Accept until ``stop()``, or until no process has been connected for ``idle_exit_s``."""
        from datadist_sim._current import reset_default_world

        reset_default_world(self.world)
        if self._sock is None:
            self.bind()
        assert self._sock is not None
        idle_since = self.world_wall()
        try:
            while not self._stop.is_set():
                try:
                    conn, _ = self._sock.accept()
                except socket.timeout:
                    with self._lock:
                        busy = bool(self.sessions)
                    if busy:
                        idle_since = self.world_wall()
                    elif idle_exit_s is not None and self.world_wall() - idle_since > idle_exit_s:
                        break
                    continue
                idle_since = self.world_wall()
                threading.Thread(target=self._admit, args=(conn,), daemon=True).start()
        finally:
            self.close()

    @staticmethod
    def world_wall() -> float:
        import time

        return time.monotonic()

    def stop(self) -> None:
        self._stop.set()

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.address.path)
        with self._lock:
            sessions = list(self.sessions)
        for session in sessions:
            session.channel.close()
        self.space.release_all()

    def _admit(self, conn: socket.socket) -> None:
        if not accept_token(conn, self.address.token):
            conn.close()
            return
        with self._lock:
            self._count += 1
            session = Session(self, conn, self._count)
            self.sessions.add(session)
            self.idle.clear()
        session.channel.start()

    def session_lost(self, session: Session) -> None:
        """A client process is gone: kill every cluster it still ran, forget its memory."""
        with self._lock:
            self.sessions.discard(session)
            if not self.sessions:
                self.idle.set()
        self.raw.drop(session)
        with self.world.lock:
            lost = list(session.clusters)
            session.clusters.clear()
            session.lost.extend(lost)
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
        caller: Optional[Session] = getattr(_context, "session", None)
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
        if kind in ("call", "get", "set", "str") and payload[0] is _STALE:
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
        if kind == "hello":
            session.pid = int(payload[0])
            return {"seed": self.world.seed, "pid": os.getpid()}
        if kind == "fn":
            return self._function(*payload)
        raise ValueError(f"unknown request {kind!r}")

    def _call(
        self, session: Session, obj: Any, name: str, args: Tuple[Any, ...], kwargs: Dict[str, Any]
    ) -> Any:
        from datadist_sim.llm_datadist.v2.llm_datadist import LLMDataDist

        if name.startswith("_"):
            raise AttributeError(name)
        is_instance = isinstance(obj, LLMDataDist)
        if is_instance and name == "init":
            self._one_per_process(session, obj)
        result = getattr(obj, name)(*args, **kwargs)
        if is_instance and name in ("init", "finalize"):
            cluster_id = obj.cluster_id
            node = self.world.node(cluster_id)
            if name == "init" and node is not None:
                session.clusters[cluster_id] = node.mode
            elif name == "finalize":
                session.clusters.pop(cluster_id, None)
        self._note_raw(session, result)
        return result

    def _one_per_process(self, session: Session, obj: Any) -> None:
        """The real rule: one initialised LLMDataDist per OS process (each session is one)."""
        from datadist_sim.llm_datadist.status import raise_if_false

        others = [cid for cid in session.clusters if cid != obj.cluster_id]
        raise_if_false(not others, "Cannot init multiple LLMDataDists", status_code=LLMStatusCode.LLM_FAILED)

    def _note_raw(self, session: Session, result: Any) -> None:
        """Remember which process owns the raw memory a registered cache names."""
        from datadist_sim.llm_datadist.v2._caches import Cache

        if isinstance(result, Cache):
            nbytes = _sized(result)
            for address in result.tensor_addrs:
                if not is_simulated(address):
                    self.raw.add(session, address, nbytes)

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
                "backed_bytes": self.space.backed_bytes,
            }
        raise ValueError(f"unknown fabric function {name!r}")


def _sized(cache: Any) -> int:
    try:
        return int(cache.cache_desc.size)
    except Exception:
        return 1
