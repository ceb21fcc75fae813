"""A client process's side of the fabric: its calls, a proxy (``remote``) for each object the fabric
runs for it, and a small memory service through which the fabric reads and writes this process's own
raw pointers.

Client code keeps calling ``LLMDataDist`` and its managers exactly as in-process. Each call travels to
the fabric, runs there on the real face, and comes back as its result or as the very exception
(``LLMException`` with its status code, ``TypeError``, ...). Caches and managers come back as proxies;
arrays over simulated memory come back mapped from shared memory, so writing into them writes the cache.

A process holds one *service* connection (the fabric asks it to read or write its memory or to run a
callback there, and its loss is the process's death) and, for its own calls, call connections: a thread
takes an idle one (or opens one, which joins the same session with the key ``hello`` returned), sends,
and reads its reply itself, so a call costs the same wake-ups as a plain ping-pong.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
import weakref
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from datadist_sim._status import LLMStatusCode
from datadist_sim._world.surface import PROCESS_MEMORY, SimError, raw_view
from datadist_sim.fabric.client import xmem
from datadist_sim.fabric.client.remote import RemoteObject, stand_in
from datadist_sim.fabric.transport import address as fabric_address
from datadist_sim.fabric.transport import codec
from datadist_sim.fabric.transport.channel import CallConnection, Channel, ChannelClosed, ChannelTimeout
from datadist_sim.fabric.transport.memfile import open_scratch, open_view
from datadist_sim.fabric.transport.wire import FabricRefused, check_peer, client_handshake

CONNECT_TIMEOUT_S = 20.0
SCRATCH_MAPS_KEPT = 8
CALLBACKS_KEPT = 1024
"""Synchronizers passed to the fabric stay callable for this many later ones (a task outlives few)."""
CALL_TIMEOUT_S = 15.0
"""Longest wait for a call that has no timeout of its own (``call_timeout`` in the address overrides
it): a fabric that stops answering (stopped, deadlocked) fails it with ``LLM_TIMEOUT`` after this."""
CALL_MARGIN_S = 5.0
"""A call with a timeout of its own (a pull's ``sync_kv_timeout``, ``link_clusters``' ``timeout``) waits
that long (on the world's clock speed) plus this margin (``call_margin`` in the address overrides it)."""
DEFAULT_SYNC_KV_TIMEOUT_MS = 1000
TRANSFER_CALLS = frozenset(
    {"pull_cache", "pull_blocks", "push_cache", "push_blocks", "transfer_cache", "transfer_cache_async"}
)
"""Calls bounded by the instance's ``sync_kv_timeout``."""
LINK_CALLS = frozenset({"link_clusters", "unlink_clusters"})
LINK_DEFAULT_TIMEOUT_MS = 3000

_client_lock = threading.Lock()
_client: Optional[FabricClient] = None

before_serving: Optional[Callable[[str], None]] = None
"""Test hook: called with the request kind before this process serves a memory request (a test that
kills a process in the middle of a pull sets it)."""


class FabricClient:
    """This process's membership of its fabric: the service channel and the call connections."""

    def __init__(self, where: fabric_address.FabricAddress, sock: socket.socket) -> None:
        self.address = where
        self.call_timeout = where.option_float("call_timeout", CALL_TIMEOUT_S)
        self.call_margin = where.option_float("call_margin", CALL_MARGIN_S)
        self.clock_speed = min(1.0, where.option_float("real-clock", 1.0)) or 1.0
        self.sync_timeout_s = DEFAULT_SYNC_KV_TIMEOUT_MS / 1000
        """This process's ``sync_kv_timeout`` (one initialised ``LLMDataDist`` per process: its own)."""
        self._proxies: weakref.WeakValueDictionary[int, RemoteObject] = weakref.WeakValueDictionary()
        self._proxy_lock = threading.Lock()
        self._callbacks: Dict[int, Any] = {}
        self._callback_lock = threading.Lock()
        self._loads = codec.make_loads({codec.REF: self._ref, codec.SHM: self._view})
        self._dumps = codec.make_dumps(self._own)
        self._scratch_maps: Dict[str, Any] = {}
        self._received: Dict[int, int] = {}  # handle -> references received, not yet released
        self._releases: List[int] = []  # handles whose proxy was collected
        self.pid = os.getpid()
        self.channel = Channel(
            sock,
            self._serve,
            dumps=self._dumps,
            loads=self._loads,
            spawn=False,
            name="fabric-client",
            spawn_kinds=frozenset({"callback"}),  # user code may block; memory requests never do
        )
        self.channel.start()
        self.info = self.channel.request("hello", os.getpid(), timeout=CONNECT_TIMEOUT_S)
        self._idle_calls: List[CallConnection] = []
        self._calls_lock = threading.Lock()

    # -- calls ---------------------------------------------------------------------------------------

    def request(self, kind: str, *payload: Any) -> Any:
        timeout, code = self.bound(kind, payload)
        if self._releases:  # carried by this very request, so the fabric forgets them before it runs
            released = self._take_releases()
            if released:
                kind, payload = "released", (released, kind, payload)
        try:
            return self._call(kind, payload, timeout)
        except ChannelClosed as exc:
            from datadist_sim.llm_datadist.status import LLMException

            raise LLMException(
                f"the datadist-sim fabric is gone ({exc}), error code is LLM_FAILED",
                status_code=LLMStatusCode.LLM_FAILED,
            ) from None
        except ChannelTimeout as exc:
            from datadist_sim.llm_datadist.status import LLMException

            raise LLMException(
                f"the datadist-sim fabric did not answer ({exc}), error code is {code.name}",
                status_code=code,
            ) from None

    def bound(self, kind: str, payload: Tuple[Any, ...]) -> Tuple[float, LLMStatusCode]:
        """How long to wait for a request, and the code if it does not come back: a call's own timeout
        plus ``call_margin`` (a transfer's code is the one a silent peer gives in its mode), else
        ``call_timeout``."""
        if kind != "call":
            return self.call_timeout, LLMStatusCode.LLM_TIMEOUT
        target, name, args, kwargs = payload
        own_ms: Optional[float] = None
        for key in ("timeout", "timeout_in_millis") if kwargs else ():
            if isinstance(kwargs.get(key), (int, float)):
                own_ms = float(kwargs[key])
        if own_ms is None and name in LINK_CALLS:
            given = args[1] if len(args) > 1 else LINK_DEFAULT_TIMEOUT_MS
            own_ms = float(given) if isinstance(given, (int, float)) else LINK_DEFAULT_TIMEOUT_MS
        code = LLMStatusCode.LLM_TIMEOUT
        if name in TRANSFER_CALLS:
            own_ms = self.sync_timeout_s * 1000 if own_ms is None else own_ms
            if object.__getattribute__(target, "_type_name") == "KvCacheManager":
                code = LLMStatusCode.LLM_WAIT_PROCESS_TIMEOUT
        if own_ms is None:
            return self.call_timeout, code
        return max(0.0, own_ms) / 1000 / self.clock_speed + self.call_margin, code

    def note_options(self, options: Any) -> None:
        """Remember ``llm.SyncKvCacheWaitTime`` of the options this process's instance was initialised
        with: it bounds this process's transfers."""
        try:
            value = int(dict(options).get("llm.SyncKvCacheWaitTime", DEFAULT_SYNC_KV_TIMEOUT_MS))
        except (TypeError, ValueError):
            return
        if value > 0:
            self.sync_timeout_s = value / 1000

    def function(self, name: str, *args: Any, **kwargs: Any) -> Any:
        return self.request("fn", name, args, kwargs)

    def _call(self, kind: str, payload: Tuple[Any, ...], timeout: float) -> Any:
        """One request on a call connection of this thread's own (taken from the idle ones, or opened):
        the reply is read by the thread that waits for it, with no hand-off to another thread."""
        if self.channel.closed.is_set():
            raise ChannelClosed("the fabric connection is closed")
        with self._calls_lock:
            conn = self._idle_calls.pop() if self._idle_calls else None
        deadline = time.monotonic() + timeout
        if conn is None:
            conn = self._open_call(timeout)
        try:
            left = deadline - time.monotonic()
            return conn.call(kind, payload, left if left > 0.001 else 0.001)
        finally:  # a call that failed in the fabric leaves its connection in step: kept
            if not conn.closed:  # one that lost its reply closed it: dropped
                with self._calls_lock:
                    self._idle_calls.append(conn)

    def fetch_file(self, name: str) -> Tuple[int, int]:
        """The fabric's memory file ``name``, handed over as a descriptor on one of this process's call
        connections (authenticated and attached: no descriptor is taken before that): the descriptor,
        now ours to close, and the size the fabric says it has. A file the fabric no longer has, or a
        fabric that cannot be reached, is ``FileNotFoundError``."""
        with self._calls_lock:
            conn = self._idle_calls.pop() if self._idle_calls else None
        try:
            if conn is None:
                conn = self._open_call(self.call_timeout)
            size, fd = conn.fetch("fd", (name,), self.call_timeout)
        except (ChannelClosed, ChannelTimeout) as exc:
            raise FileNotFoundError(f"cannot get the fabric's memory {name}: {exc}") from None
        finally:
            if conn is not None and not conn.closed:
                with self._calls_lock:
                    self._idle_calls.append(conn)
        if type(size) is not int:
            os.close(fd)
            raise FileNotFoundError(f"the fabric's memory {name} came with no size")
        return fd, size

    def _open_call(self, timeout: float) -> CallConnection:
        """Another connection of this process, within ``timeout``: a fabric that does not answer in
        time is ``ChannelTimeout``, one that is gone (or is no longer ours) ``ChannelClosed``."""
        deadline = time.monotonic() + timeout
        try:
            sock = connect_within(self.address.path, deadline)
        except (socket.timeout, ChannelTimeout) as exc:
            raise ChannelTimeout(f"no answer opening a call connection: {exc}") from None
        except OSError as exc:
            raise ChannelClosed(f"cannot open a call connection: {exc}") from None
        try:
            check_peer(sock, f"the socket {self.address.path}")
            client_handshake(sock, self.address.token, max(0.001, deadline - time.monotonic()))
        except (socket.timeout, ChannelTimeout) as exc:
            sock.close()
            raise ChannelTimeout(f"no answer opening a call connection: {exc}") from None
        except (OSError, FabricRefused, ChannelClosed) as exc:
            sock.close()
            raise ChannelClosed(f"cannot open a call connection: {exc}") from None
        conn = CallConnection(sock, self._dumps, self._loads)
        conn.call("attach", (self.info["key"],), max(0.001, deadline - time.monotonic()))
        return conn

    def close(self) -> None:
        self.channel.close()
        with self._calls_lock:
            idle, self._idle_calls = self._idle_calls, []
        for conn in idle:
            conn.close()

    # -- handles: proxies out, proxies and shared arrays in -------------------------------------------

    def _own(self, obj: Any) -> Optional[codec.Ext]:
        """What travels as a handle: a proxy by its handle, a layer synchronizer as a callback the fabric
        calls back here; anything else by value."""
        handle = self._handle_of(obj)
        if handle is not None:
            return codec.own_form(codec.HANDLE, handle)
        if isinstance(obj, _synchronizer_type()):  # user code: it runs here, called from the fabric
            with self._callback_lock:
                self._callbacks.pop(id(obj), None)
                self._callbacks[id(obj)] = obj  # most recent last; the oldest go past the bound
                while len(self._callbacks) > CALLBACKS_KEPT:
                    self._callbacks.pop(next(iter(self._callbacks)))
            return codec.own_form(codec.CALLBACK, id(obj))
        return None

    @staticmethod
    def _handle_of(obj: Any) -> Optional[int]:
        """A proxy's handle."""
        if isinstance(obj, RemoteObject):
            handle: int = object.__getattribute__(obj, "_handle")
            return handle
        return None

    def _ref(self, value: Any) -> Any:
        if type(value) is not list or len(value) != 2 or type(value[0]) is not int:
            raise codec.NotOurs("a malformed object handle")
        return self._proxy(value[0], str(value[1]))

    def _view(self, value: Any) -> Any:
        if type(value) is not list or len(value) != 5:
            raise codec.NotOurs("a malformed view of shared memory")
        path, offset, shape, dtype, strides = value
        return open_view((path, offset, tuple(shape), dtype, tuple(strides)), self.fetch_file)

    def adopt(self, handle: int, proxy: RemoteObject) -> None:
        """Make ``proxy`` the one object that stands for ``handle`` in this process."""
        with self._proxy_lock:
            self._received[handle] = self._received.get(handle, 0) + 1
            self._proxies[handle] = proxy
            weakref.finalize(proxy, self._releases.append, handle)

    def _proxy(self, handle: int, type_name: str) -> RemoteObject:
        with self._proxy_lock:
            self._received[handle] = self._received.get(handle, 0) + 1
            proxy = self._proxies.get(handle)
            if proxy is None:
                proxy = stand_in(self, handle, type_name)
                self._proxies[handle] = proxy
                # a finalizer may run anywhere (even mid-send): it only queues; the next call tells
                weakref.finalize(proxy, self._releases.append, handle)
            return proxy

    def _take_releases(self) -> List[Tuple[int, int]]:
        """``(handle, references received)`` for every object this process no longer holds."""
        items = []
        with self._proxy_lock:
            while self._releases:
                handle = self._releases.pop()
                if handle in self._proxies:
                    continue  # a newer proxy stands for it: that one's finalizer will tell
                items.append((handle, self._received.pop(handle, 0)))
        return items

    # -- serving the fabric: this process's raw memory -------------------------------------------------

    def _serve(self, kind: str, payload: Tuple[Any, ...]) -> Any:
        if before_serving is not None:
            before_serving(kind)
        if kind == "callback":
            target, method, args = payload
            with self._callback_lock:
                synchronizer = self._callbacks[target]
            return getattr(synchronizer, method)(*args)
        if kind in ("mem_read_to", "mem_write_from"):
            return self._serve_scratch(kind, payload)
        if kind == "mem_pull":
            return xmem.serve_pull(payload, _own)
        (items,) = payload
        if kind == "mem_read":
            return [bytes(_own(address, nbytes, writable=False)) for address, nbytes in items]
        if kind in ("mem_check", "mem_check_read"):  # read: a peer will read it directly (``xmem``)
            for address, nbytes in items:
                _own(address, nbytes, writable=kind == "mem_check")
            return None if kind == "mem_check" else xmem.identity()
        if kind == "mem_write":
            targets = [_own(address, len(data), writable=True) for address, data in items]
            for target, (_, data) in zip(targets, items):
                np.copyto(target, np.frombuffer(data, dtype=np.uint8))
            return None
        raise ValueError(f"unknown request {kind!r}")

    def _scratch(self, path: str) -> Any:
        """The fabric's scratch file at ``path``, mapped once and kept while the fabric reuses it."""
        mapped = self._scratch_maps.pop(path, None)
        if mapped is None:
            mapped = open_scratch(path, self.fetch_file)
        self._scratch_maps[path] = mapped  # most recent last
        while len(self._scratch_maps) > SCRATCH_MAPS_KEPT:
            self._scratch_maps.pop(next(iter(self._scratch_maps)))
        return mapped

    def _serve_scratch(self, kind: str, payload: Tuple[Any, ...]) -> None:
        """Large raw-memory reads and writes: copy between this process's memory and a shared file."""
        if kind == "mem_read_to":
            path, reads = payload
            sources = [_own(address, nbytes, writable=False) for address, nbytes in reads]
            scratch, offset = self._scratch(path), 0
            for source in sources:
                scratch[offset : offset + source.nbytes] = source
                offset += source.nbytes
            return None
        if kind == "mem_write_from":
            path, writes = payload
            targets = [_own(address, nbytes, writable=True) for address, _, nbytes in writes]
            scratch = self._scratch(path)
            for target, (_, offset, nbytes) in zip(targets, writes):
                np.copyto(target, scratch[offset : offset + nbytes])
            return None
        raise ValueError(f"unknown request {kind!r}")


_synchronizer: Optional[type] = None


def _synchronizer_type() -> type:
    """``LayerSynchronizer``, imported on first use (the face imports this module's package)."""
    global _synchronizer
    if _synchronizer is None:
        from datadist_sim.llm_datadist.v2._transfer import LayerSynchronizer

        _synchronizer = LayerSynchronizer
    return _synchronizer


def _own(address: int, nbytes: int, *, writable: bool) -> Any:
    """A view of this process's memory, once ``/proc/self/maps`` vouches for it (else PARAM_INVALID)."""
    if nbytes == 0:
        return np.empty(0, dtype=np.uint8)
    if not PROCESS_MEMORY.covers(address, nbytes, writable=writable):
        access = "writable" if writable else "readable"
        raise SimError(
            LLMStatusCode.LLM_PARAM_INVALID,
            f"address {address:#x} (+{nbytes} B) is not {access} memory of process {os.getpid()}",
        )
    return raw_view(address, nbytes, writable=writable)


def connect_within(path: str, deadline: float) -> socket.socket:
    """A socket connected to ``path`` by ``deadline`` (``time.monotonic()``). A full backlog (``EAGAIN``:
    a burst of processes joining at once, or a flood of connections the fabric has not yet dropped) is
    waited out, retrying with a short backoff, rather than failing the call at once; still full at the
    deadline is ``socket.timeout``. Anything else (nobody listens, no such path) raises at once."""
    pause = 0.001
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        left = deadline - time.monotonic()
        sock.settimeout(left if left > 0.001 else 0.001)
        try:
            sock.connect(path)
            return sock
        except BlockingIOError:  # EAGAIN from a Unix socket: its backlog is full
            sock.close()
            left = deadline - time.monotonic()
            if left <= 0:
                raise socket.timeout(f"the fabric's backlog at {path} stayed full") from None
            time.sleep(pause if pause < left else left)
            pause = pause * 2 if pause < 0.05 else 0.05
        except BaseException:
            sock.close()
            raise


def connect(where: fabric_address.FabricAddress, *, timeout: float = CONNECT_TIMEOUT_S) -> FabricClient:
    """Connect to the fabric at ``where``, starting one on demand if nobody listens there yet.

    Before anything is decoded, the directory must be ours and private, the listener's uid ours, and it
    must pass the handshake (``wire``): otherwise ``FabricRefused``, at once. A fabric that is going
    away as we arrive (closed, refused) is waited for, or started again, until ``timeout``."""
    from datadist_sim.fabric.transport.launch import ensure_running

    deadline = time.monotonic() + timeout
    while True:
        ensure_running(where, timeout=timeout)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(min(5.0, timeout))
        try:
            sock.connect(where.path)
            check_peer(sock, f"the socket {where.path}")
            client_handshake(sock, where.token)
            return FabricClient(where, sock)
        except FabricRefused as exc:
            sock.close()
            raise FabricRefused(f"refusing the datadist-sim fabric at {where.path}: {exc}") from None
        except ChannelTimeout as exc:  # something holds the path but does not answer: not ours to trust
            sock.close()
            raise FabricRefused(f"refusing the datadist-sim fabric at {where.path}: {exc}") from None
        except (OSError, ChannelClosed) as exc:
            sock.close()
            if time.monotonic() > deadline:
                raise RuntimeError(f"cannot join the datadist-sim fabric at {where.path}: {exc}") from exc
            time.sleep(0.05)


def current_client() -> Optional[FabricClient]:
    """This process's fabric connection, made on first use when ``DATADIST_SIM_FABRIC`` is set."""
    global _client
    with _client_lock:
        if _client is not None and _client.pid == os.getpid():
            return _client  # once lost, it stays lost: its calls say so (no fresh, empty world)
        # a forked child must not share its parent's connection: it makes its own
        where = fabric_address.from_env()
        if where is None:
            return None
        _client = connect(where)
        return _client


def existing_client() -> Optional[FabricClient]:
    """This process's fabric connection if it has made one (never connects)."""
    with _client_lock:
        return _client if _client is not None and _client.pid == os.getpid() else None


def kill_self(kind: str) -> None:
    """``before_serving`` for a test: this process dies (SIGKILL) as it is asked to serve memory."""
    os.kill(os.getpid(), signal.SIGKILL)
