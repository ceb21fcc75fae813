"""SimWorld: the whole simulated fabric — clusters, listen endpoints, links, the clock, the seed."""

from __future__ import annotations

import contextlib
import random
import threading
from typing import IO, Callable, Dict, Iterator, List, Optional, Sequence, Set, Tuple, Union

from datadist_sim import _log
from datadist_sim._status import LLMStatusCode
from datadist_sim._world import active, hixl_served, world_faults
from datadist_sim._world.address_space import AddressSpace
from datadist_sim._world.caches import NodeCaches
from datadist_sim._world.clock import Clock, VirtualClock, Wake
from datadist_sim._world.cluster import ClusterNode, Endpoint, Mode, NodeSettings, Role
from datadist_sim._world.comms import CommRegistry
from datadist_sim._world.config import SimConfig as SimConfig
from datadist_sim._world.errors import SimError
from datadist_sim._world.hixl_state import HixlEngines
from datadist_sim._world.trace import Trace, TraceEvent, node_up
from datadist_sim.faults.engine_codes import EngineMode
from datadist_sim.faults.plan import FaultPlan
from datadist_sim.faults.rules import Fault

WILDCARD_IP = "0.0.0.0"
ROCE_BYTES_PER_S = 25e9
"""RoCE between servers, 200 Gb/s per NIC (the default link bandwidth)."""
HCCS_BYTES_PER_S = 56e9
"""HCCS inside one server, roughly 56 GB/s per link on Atlas 800 A2 class machines (approximate)."""


def _nothing() -> None:
    """``touch`` of a clock that does not care which threads take part."""


class SimWorld:
    """Every simulated cluster, listener and link, with one clock and one seed.

    Each initialised ``LLMDataDist`` is its own simulated process, so Prompt and Decode live side by
    side in one Python process. Bookkeeping is guarded by one lock; nothing here parses the Python API.
    """

    def __init__(
        self,
        seed: int = 0,
        *,
        clock: Optional[Clock] = None,
        config: Optional[SimConfig] = None,
        trace_size: int = 10_000,
        trace_sink: Optional[IO[str]] = None,
    ) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.clock: Clock = clock if clock is not None else VirtualClock()
        self.now: Callable[[], float] = self.clock.now
        """Simulated time now (the clock's own ``now``)."""
        self.touch: Callable[[], None] = getattr(self.clock, "touch", _nothing)
        """The calling thread takes part in this world now (the face calls it at each public call;
        a ``VirtualClock`` waits for such threads before it lets time jump)."""
        self.config = config if config is not None else SimConfig()
        self.trace = Trace(trace_size, sink=trace_sink, now=self.clock.now)
        self.record_call = self.trace.record_call
        """``record`` of one API call, as the face traces each of its public calls
        (``Trace.record_call``): its arguments are kept as given and formatted when read."""
        self.lock = threading.RLock()
        self._nodes: Dict[int, ClusterNode] = {}
        self._listeners: Dict[Endpoint, int] = {}
        self._paused: Dict[int, threading.Event] = {}
        self.comms = CommRegistry(self)
        self.memory = AddressSpace(backed=not self.config.metadata_only)
        self.memory.on_join = self._forget_views
        self.caches: Dict[int, NodeCaches] = {}
        self.hixl = HixlEngines()
        """The engines of the ``hixl`` API (``hixl_state``, ``hixl_engines``): they are not clusters."""
        self.killed: Set[int] = set()
        """Clusters a fault rule killed (until one with the same id is initialised again)."""
        self.faults = FaultPlan(self, seed)
        """The fault rules of this world; it reaches the world through the hooks this world has
        (``faults.plan.WorldHooks``), and the world applies what fired (``world_faults``; what fires
        on a call, ``fault_effects``)."""

    def activate(self) -> contextlib.AbstractContextManager[SimWorld]:
        """``with world.activate():`` instances constructed inside the block join this world."""
        return active.activated(self)

    # -- clusters -------------------------------------------------------------------------------

    def add_node(
        self, cluster_id: int, role: Role, mode: Mode, settings: NodeSettings, listen: List[Endpoint]
    ) -> ClusterNode:
        """Bring up an initialised instance and open its listeners; all or nothing."""
        with self.lock:
            if self.config.one_instance_per_process and self._nodes:
                raise SimError(LLMStatusCode.LLM_FAILED, "Cannot init multiple LLMDataDists")
            if cluster_id in self._nodes:
                raise SimError(
                    LLMStatusCode.LLM_PARAM_INVALID,
                    f"cluster_id {cluster_id} is already initialised in this world",
                )
            node = ClusterNode(cluster_id, role, mode, settings)
            store = NodeCaches(self.memory, mode, settings, legacy_codes=self.config.legacy_codes)
            self._open_listeners(node, listen)
            self.caches[cluster_id] = store
            self._nodes[cluster_id] = node
            hixl_served.serve(self.hixl, node, store, _listening(node, listen))
            self.killed.discard(cluster_id)
            # The detail says the engine mode (``faults.engine_codes.trace_modes`` reads it back).
            backend = " hixl" if node.hixl else ""
            self.record(cluster_id, "node.init", "ok", f"{role.value} {mode.value}{backend}", kind="event")
            node_up(node.engine_mode.value)
            return node

    def remove_node(self, node: ClusterNode, *, quiet: bool = False) -> None:
        """Finalize: close listeners and drop this side of every link. Peers keep theirs, now dead."""
        with self.lock:
            self.comms.forget(node)
            self.close_listeners(node)
            hixl_served.unserve(self.hixl, node)
            node.peers.clear()
            node.alive = False
            store = self.caches.pop(node.cluster_id, None)
            if store is not None:
                store.free_all()
            self._nodes.pop(node.cluster_id, None)
            if not quiet:
                self.record(node.cluster_id, "node.finalize", "ok", kind="event")

    def kill(self, cluster_id: int) -> None:
        """The process of ``cluster_id`` dies: listeners close, memory is reclaimed, peers are not told.
        (A kill of ``hixl`` engines, named by a ``str``, is ``world_faults``'.)"""
        with self.lock:
            node = self._nodes.get(cluster_id)
            if node is None:
                return
            for other in self._nodes.values():
                link = other.peers.get(cluster_id)
                if link is not None:
                    link.peer_lost = True
            self.remove_node(node, quiet=True)
            self.killed.add(cluster_id)
            self.record(cluster_id, "node.kill", "ok", kind="event")

    def node(self, cluster_id: int) -> Optional[ClusterNode]:
        """The live instance with this id, if any."""
        return self._nodes.get(cluster_id)

    def engine_mode(self, cluster_id: Optional[Union[int, str]]) -> Optional[EngineMode]:
        """The engine mode of the instance with this id (live or killed), for the fault plan; None
        when no instance has it. A name is that of ``hixl`` engines."""
        if isinstance(cluster_id, str):
            return EngineMode.HIXL_ENGINE if cluster_id in self.hixl.named else None
        node = None if cluster_id is None else self._nodes.get(cluster_id)
        return None if node is None else node.engine_mode

    @property
    def nodes(self) -> Tuple[ClusterNode, ...]:
        return tuple(self._nodes.values())

    # -- listeners ------------------------------------------------------------------------------

    def _open_listeners(self, node: ClusterNode, endpoints: List[Endpoint]) -> None:
        opened = _listening(node, endpoints)
        busy = [ep for ep in opened if ep in self._listeners or ep in self.hixl.listeners]
        if busy or len(set(opened)) != len(opened):
            shown = busy[0] if busy else opened[0]
            raise SimError(
                LLMStatusCode.LLM_FAILED, f"listen endpoint {shown[0]}:{shown[1]} is already in use"
            )
        for ep in opened:
            self._listeners[ep] = node.cluster_id
        node.listeners = list(endpoints)

    def close_listeners(self, node: ClusterNode) -> None:
        with self.lock:
            for ep in _listening(node, node.listeners):
                if self._listeners.get(ep) == node.cluster_id:
                    del self._listeners[ep]
            node.listeners = []

    def listener_at(self, endpoint: Endpoint) -> Optional[ClusterNode]:
        """Who accepts a connection to ``endpoint``: an exact listener, else one on 0.0.0.0 at that port."""
        cluster_id = self._listeners.get(endpoint)
        if cluster_id is None:
            cluster_id = self._listeners.get((WILDCARD_IP, endpoint[1]))
        return None if cluster_id is None else self._nodes.get(cluster_id)

    @property
    def listeners(self) -> Dict[Endpoint, int]:
        return dict(self._listeners)

    def switch_role(self, node: ClusterNode, role: Role, listen: Optional[List[Endpoint]]) -> None:
        """Change role once no link remains; ``listen`` (None: stop listening) replaces the listeners.

        v1 also needs ``enable_switch_role`` and a single device (``LLM_FEATURE_NOT_ENABLED``).
        """
        with self.lock:
            if node.hixl:
                # hixl_transfer_engine.cc:249-264: no link check; a listen address other than the one
                # given at init is LLM_FEATURE_NOT_ENABLED, and the engine keeps listening either way.
                if listen is not None and listen != node.listeners:
                    raise SimError(
                        LLMStatusCode.LLM_FEATURE_NOT_ENABLED,
                        f"listen ip info {listen} is not the init listen ip info {node.listeners}",
                    )
                node.role = role
                self.record(node.cluster_id, "node.role", "ok", role.value, kind="event")
                return
            if node.mode is Mode.KV_CACHE_MANAGER:
                if not node.settings.enable_switch_role:
                    raise SimError(LLMStatusCode.LLM_FEATURE_NOT_ENABLED, "enable_switch_role is not set")
                if node.device_num > 1:
                    raise SimError(
                        LLMStatusCode.LLM_FEATURE_NOT_ENABLED, "switch_role supports a single device only"
                    )
            if node.peers:
                raise SimError(
                    LLMStatusCode.LLM_EXIST_LINK, f"{len(node.peers)} link(s) remain: {sorted(node.peers)}"
                )
            wanted = listen or []
            if wanted != node.listeners:
                old = node.listeners
                self.close_listeners(node)
                try:
                    self._open_listeners(node, wanted)
                except SimError:
                    self._open_listeners(node, old)
                    raise
            node.role = role
            self.record(node.cluster_id, "node.role", "ok", role.value, kind="event")

    def set_link_bandwidth(self, a: int, b: int, bytes_per_s: float) -> None:
        """Give the link between clusters ``a`` and ``b`` its own bandwidth (e.g. ``HCCS_BYTES_PER_S``)."""
        if bytes_per_s <= 0:
            raise ValueError(f"bytes_per_s must be > 0, got {bytes_per_s}")
        self.config.link_bandwidth[(min(a, b), max(a, b))] = bytes_per_s

    def bandwidth(self, a: int, b: int) -> float:
        """The bandwidth a transfer between ``a`` and ``b`` runs at."""
        config = self.config
        if not config.link_bandwidth:
            return config.bandwidth_bytes_per_s
        return config.link_bandwidth.get((min(a, b), max(a, b)), config.bandwidth_bytes_per_s)

    # -- links ----------------------------------------------------------------------------------

    def links(self) -> List[Tuple[int, int]]:
        """Every link end as ``(holder, remote)``; a healthy link appears from both sides."""
        with self.lock:
            return sorted((n.cluster_id, r) for n in self._nodes.values() for r in n.peers)

    def is_linked(self, a: int, b: int) -> bool:
        """Both ends hold the link."""
        na, nb = self._nodes.get(a), self._nodes.get(b)
        return na is not None and nb is not None and b in na.peers and a in nb.peers

    def break_link(self, a: int, b: int) -> None:
        """Cut the link between ``a`` and ``b``: both ends stay but fail until it is made again.
        (A cut between ``hixl`` engines, named by a ``str``, is ``world_faults``'.)"""
        with self.lock:
            for holder, remote in ((a, b), (b, a)):
                node = self._nodes.get(holder)
                link = None if node is None else node.peers.get(remote)
                if link is not None:
                    link.broken = True
            self.record(a, "link.cut", "ok", f"remote {b}", kind="event")

    def unreachable(self, a: int, b: int) -> bool:
        """No answer can come back from ``b`` to ``a`` now: it was killed, or a partition or hang holds."""
        return b in self.killed or self.faults.partitioned(a, b)

    # -- world faults ---------------------------------------------------------------------------

    def start_fault(self, rule: Fault) -> object:
        """A world action fired (the plan's hook): applied where every world action is."""
        return world_faults.start_world_fault(self, rule)

    def heal_fault(self, rule: Fault, undo: object, poisoned: Sequence[Tuple[int, int]]) -> None:
        """A rule healed (the plan's hook): undone where every world action is."""
        world_faults.heal_world_fault(self, rule, undo, poisoned)

    # -- peers that do not answer ---------------------------------------------------------------

    @contextlib.contextmanager
    def pause(self, cluster_id: int) -> Iterator[None]:
        """Hold every handshake to ``cluster_id`` until the block exits (a peer that is slow to answer).

        A call that waits longer than ``config.pause_wall_limit_s`` of wall time counts as unanswered.
        """
        gate = threading.Event()
        with self.lock:
            self._paused[cluster_id] = gate
        try:
            yield
        finally:
            with self.lock:
                self._paused.pop(cluster_id, None)
            gate.set()

    def wait_if_paused(self, cluster_id: int) -> bool:
        """Block while ``cluster_id`` is paused; False if it never answered in time."""
        gate = self._paused.get(cluster_id)
        if gate is None:
            return True
        return gate.wait(self.config.pause_wall_limit_s)

    # -- time and trace -------------------------------------------------------------------------

    def elapse(self, seconds: float) -> None:
        """Let simulated time pass (instantly under the virtual clock)."""
        if seconds > 0:
            self.clock.sleep(seconds)

    def wait_until(self, when: float, wake: Optional[Wake] = None) -> None:
        """Wait for simulated time ``when`` (or until ``wake()``): where concurrent threads meet on the
        virtual clock (``VirtualClock.wait_until``); a plain jump on a clock that cannot wait."""
        wait = getattr(self.clock, "wait_until", None)
        if wait is None:
            self.clock.advance_to(when)
        else:
            wait(when, wake)

    def _forget_views(self, address: int) -> None:
        """The allocation at ``address`` has new bytes (``AddressSpace.on_join``): views of its old
        ones that caches hold for the pull fast path (``CacheEntry.views``) are made again."""
        with self.lock:
            for store in list(self.caches.values()):
                for entry in list(store.caches.values()):
                    if address in entry.addrs:
                        entry.views = None

    def space_copy(self, ranges: List[Tuple[int, int, int]]) -> None:
        """Copy ``(dst, src, nbytes)`` ranges through the world's address space, all or nothing."""
        self.memory.copy_ranges(ranges)

    def record(
        self,
        cluster_id: Optional[Union[int, str]],
        op: str,
        outcome: str,
        detail: str = "",
        *,
        args: object = "",
        kind: str = "event",
    ) -> None:
        """Trace one API call (``kind="call"``, from the face) or world event. ``args`` is formatted
        (``str``) when the trace is read."""
        event = TraceEvent(self.clock.now(), cluster_id, op, outcome, detail, args, kind)
        self.trace.record(event)
        _log.world_event(event)

    def __repr__(self) -> str:
        return f"SimWorld(seed={self.seed}, clusters={sorted(self._nodes)}, clock={self.clock!r})"


def store_of(world: SimWorld, node: ClusterNode) -> NodeCaches:
    """The cache store of a live node; a finalized or killed node's calls fail as the engine's do."""
    store = world.caches.get(node.cluster_id)
    if store is None or not node.alive:
        if world.config.legacy_codes and node.cluster_id not in world.killed:
            raise SimError(LLMStatusCode.LLM_ENGINE_FINALIZED, f"cluster {node.cluster_id} is finalized")
        raise SimError(LLMStatusCode.LLM_FAILED, f"cluster {node.cluster_id} is not initialised")
    return store


def _listening(node: ClusterNode, endpoints: List[Endpoint]) -> List[Endpoint]:
    """The endpoints ``node`` accepts connections on. A hixl-backend instance given port 0 is a client
    only: neither of its engines listens then (adxl ``channel_msg_handler.cc:191-194`` starts its daemon
    only for a port above 0; hixl_cs ``hixl_server.cc:96``, ``hixl_engine.h:34``), so it links out and
    nobody can link to it; it keeps the address as its own (``switch_role`` compares it)."""
    if not node.hixl:
        return endpoints
    return [ep for ep in endpoints if ep[1] != 0]
