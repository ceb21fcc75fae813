"""One client process as the fabric sees it: its connection, the objects it holds handles to (with
reference counts, so a dropped proxy lets its object go), and the clusters it runs."""

from __future__ import annotations

import itertools
import secrets
import threading
from typing import Any, Dict, List, Optional, Protocol, Sequence, Tuple

import numpy as np

from datadist_sim._coverage import CodeCoverage
from datadist_sim._world.surface import Mode
from datadist_sim.fabric.host.shm import SharedAddressSpace
from datadist_sim.fabric.transport import codec
from datadist_sim.fabric.transport.loop import Connection
from datadist_sim.fabric.transport.wire import ChannelClosed, ChannelTimeout

STALE = object()
"""Stands for a handle the fabric no longer knows (decoding must not fail the whole connection)."""
CALLBACK_TIMEOUT_S = 600.0
"""Longest wait for a client's ``synchronize_layer`` given no timeout of its own."""

_context = threading.local()


def calling_session() -> Optional[Session]:
    """The session whose request this thread is running, if any."""
    found: Optional[Session] = getattr(_context, "session", None)
    return found


class SessionHost(Protocol):
    """What a session needs of the fabric that runs it (``server.FabricServer``): the types that travel
    by handle, the shared memory whose arrays travel as mappings, someone to run its requests and
    someone to tell when its process is gone. A session names only this, never the server, so imports
    run one way: the server makes sessions and knows them; a session knows its host by what it does."""

    by_handle: Tuple[type, ...]
    space: SharedAddressSpace

    def dispatch(self, session: Session, kind: str, payload: Tuple[Any, ...]) -> Any: ...

    def session_lost(self, session: Session) -> None: ...


def by_handle_types() -> Tuple[type, ...]:
    from datadist_sim.llm_datadist.v2._caches import Cache, KvCache
    from datadist_sim.llm_datadist.v2._transfer import CacheTask
    from datadist_sim.llm_datadist.v2.cache_manager import CacheManager
    from datadist_sim.llm_datadist.v2.llm_datadist import LLMDataDist
    from datadist_sim.llm_datadist_v1.kv_cache_manager import KvCacheManager

    return (LLMDataDist, KvCacheManager, CacheManager, Cache, KvCache, CacheTask)


class Session:
    """One client process: its connection, the objects it holds handles to, the clusters it runs."""

    def __init__(self, server: SessionHost, channel: Connection, number: int) -> None:
        self.server = server
        self.number = number
        self.pid = 0
        self._objects: Dict[int, Any] = {}
        self._handles: Dict[int, int] = {}  # id(object) -> handle
        self._sent: Dict[int, int] = {}  # handle -> references sent and not yet released
        self._numbers = itertools.count(1)
        self._lock = threading.Lock()
        self.clusters: Dict[int, Mode] = {}
        self.lost: Dict[int, Mode] = {}
        """Clusters that were still initialised when the process was lost."""
        self.coverage = CodeCoverage()
        """The status codes this process's calls received (``exec --coverage`` fetches them)."""
        self.key = secrets.token_hex(16)
        """What the process's further connections present to join this session (``attach``)."""
        self.channel = channel
        """The first connection: the fabric's requests to the process go here; its loss is the process's."""
        self._calls: List[Connection] = []
        self._dumps = codec.make_dumps(self._own, server.by_handle)
        self._loads = codec.make_loads({codec.HANDLE: self._handle_named, codec.CALLBACK: self._callback})
        self.attach(channel, main=True)

    def attach(self, conn: Connection, *, main: bool = False) -> None:
        """Serve ``conn`` for this process: its calls arrive on it (a client calls on connections of its
        own and reads each reply itself)."""
        conn.bind(
            self._handle,
            dumps=self._dumps,
            loads=self._loads,
            on_close=self._closed if main else None,
        )
        if not main:
            with self._lock:
                self._calls.append(conn)

    def close_calls(self) -> None:
        with self._lock:
            calls, self._calls = self._calls, []
        for conn in calls:
            conn.close()

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
        dropped = []
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
                    dropped.append(obj)
        del dropped  # outside the lock: a KvCache's safety net may call into the world

    @property
    def object_count(self) -> int:
        with self._lock:
            return len(self._objects)

    def _own(self, obj: Any) -> Optional[codec.Ext]:
        """What travels as a handle: a face object (a cache that still has an id) by its handle, an
        array over shared memory by where it lies; anything else by value."""
        if isinstance(obj, self.server.by_handle) and getattr(obj, "cache_id", 0) != -1:
            return codec.own_form(codec.REF, (self.handle_of(obj), type(obj).__name__))
        if isinstance(obj, np.ndarray):
            ref = self.server.space.locate(obj)
            if ref is not None:
                return codec.own_form(codec.SHM, ref)
        return None

    def _resolve(self, handle: int) -> Any:
        """The object a handle names; ``STALE`` once released."""
        with self._lock:
            return self._objects.get(handle, STALE)

    def _handle_named(self, value: Any) -> Any:
        if type(value) is not int:
            raise codec.NotOurs("a malformed handle")
        return self._resolve(value)

    def _callback(self, value: Any) -> Any:
        if type(value) is not int:
            raise codec.NotOurs("a malformed callback")
        return _remote_synchronizer(self, value)

    # -- requests from the client --------------------------------------------------------------------

    def _handle(self, kind: str, payload: Tuple[Any, ...]) -> Any:
        """Run one request, this thread marked meanwhile as serving this session (``calling_session``:
        whose raw pointers are the default, whose coverage counts the call)."""
        _context.session = self
        try:
            return self.server.dispatch(self, kind, payload)
        finally:
            _context.session = None

    def ran(self) -> Dict[int, Mode]:
        """The clusters this process runs, or ran when it was lost, with their modes."""
        return dict(self.clusters) or dict(self.lost)

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
