"""hixl engines in the world: the operations of ``hixl.Hixl`` objects on their state (``hixl_state``),
each meeting its faults (``hixl_faults``); transfers are ``hixl_transfers``'.

An engine is named by its ``local_engine`` string (``"ip"`` or ``"ip:port"``, hixl ``include/hixl/hixl.h:
39-46``); with a port above 0 it listens there and others can connect to it (``hixl.h:42``), with none
or 0 it is a client only. It has no cluster id and no role, so it lives beside the LLM-DataDist clusters
in a table of its own (``SimWorld.hixl``), under the world's lock and on its clock. Its state:

- registered regions by handle (``register``), checked by every transfer;
- client connections by the remote name as given (``connect``): one direction each, as the engines key
  channels by (client|server, remote) (``channel_manager.cc:442-462``, ``client_manager.cc:66-72``);
- asynchronous transfer requests, in submission order (``transfer_start``);
- notifies received as a server (``notify``), and the connect pool (``hixl_pool``).

Which engine the options pick (``comm`` over adxl channels, or ``hixl_cs``) is the face's reading of the
options (``engine_factory.cc:38-77``); the world is told it and applies each engine's own rules, cited
where they differ. Every refusal is a ``SimError`` with the ``LLMStatusCode`` the vendor's own table pairs
with the hixl code (``adxl_utils.cc:50-63``; ``RESOURCE_EXHAUSTED``, which has no twin there, is
``LLM_OUT_OF_MEMORY``); the face turns it back. A refused call changes nothing and moves no byte.

Bytes: a transfer's every descriptor is checked against both engines' registrations (``hixl_cs``:
``hixl_mem_store.cc:259-279``) and then resolved through the world's address space (simulated memory,
or raw pointers that ``/proc/self/maps`` vouches for) before the first byte moves. An asynchronous
transfer's bytes move when it is submitted; its status says ``WAITING`` until its modelled end.
"""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING, Dict, List, Optional, Tuple

from datadist_sim._status import LLMStatusCode
from datadist_sim._world import hixl_faults
from datadist_sim._world.cluster import Endpoint
from datadist_sim._world.errors import SimError
from datadist_sim._world.hixl_pool import EXHAUSTED, ConnectPool, ConnectState, Task
from datadist_sim._world.hixl_state import (
    EngineKind,
    EngineSettings,
    HixlEngine,
    Region,
    drop_connection,
    tear_down,
)
from datadist_sim._world.trace import node_up
from datadist_sim.faults.engine_codes import EngineMode

if TYPE_CHECKING:
    from datadist_sim._world.world import SimWorld

_P = LLMStatusCode.LLM_PARAM_INVALID
_F = LLMStatusCode.LLM_FAILED
AUTO_CONNECT_ASYNC_S = 3.0
"""The connect an auto-connecting ``transfer_async`` makes waits 3000 ms (``hixl_engine.cc:27, 224``;
``adxl_inner_engine.cc:32, 522``)."""
NOTIFY_QUEUE_MAX = 4096
"""A ``hixl_cs`` server holds at most 4096 notifies (``ctrl_msg.h:20``, ``hixl_server.cc:193-239``)."""
U64 = 1 << 64


def parse_engine(text: str) -> Optional[Tuple[str, int]]:
    """``(ip, port)`` of an engine name, port 0 when none is given; None when the host is not an IP
    literal or the port not a number (``hixl_utils.cc:218-240``: ``[v6]`` or ``[v6]:port``, else the
    text split at ``:``, first part the host, second the port; ``CheckIp``, ``:132-139``)."""
    left, right = text.find("["), text.find("]")
    if 0 <= left < right:
        host = text[left + 1 : right]
        colon = text.find(":", right)
        port_text: Optional[str] = text[colon + 1 :] if colon >= 0 else None
    else:
        parts = text.split(":")
        host, port_text = parts[0], (parts[1] if len(parts) > 1 else None)
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return None
    if port_text is None:
        return host, 0
    try:
        port = int(port_text, 10)
    except ValueError:
        return None
    return (host, port) if -(1 << 31) <= port < (1 << 31) else None


# -- life -----------------------------------------------------------------------------------------


def open_engine(world: SimWorld, name: str, settings: EngineSettings) -> HixlEngine:
    """An engine named ``name``; with a port above 0 it listens there. A port in use (by an engine or
    an LLM-DataDist listener) fails the listen: ``FAILED`` (``ctrl_msg_plugin.cc:176-177``)."""
    parsed = parse_engine(name)
    if parsed is None:
        raise SimError(_P, f"local_engine {name!r} is not ip, ip:port, [ipv6] or [ipv6]:port")
    host, port = parsed
    endpoint = (host, port) if port > 0 else None
    with world.lock:
        hixl_faults.opening(world, name)
        if endpoint is not None and _busy(world, endpoint):
            raise SimError(_F, f"listen endpoint {host}:{port} is already in use")
        engine = HixlEngine(name, endpoint, settings, pool=ConnectPool(settings.workers, settings.capacity))
        if endpoint is not None:
            world.hixl.listeners[endpoint] = engine
        named = world.hixl.named.setdefault(name, [])
        named[:] = [e for e in named if e.alive] + [engine]
        # Keyed by the name: faults.engine_codes.trace_modes reads the engine's mode back from it.
        world.record(name, "hixl.engine.init", "ok", settings.kind.value, kind="event")
        node_up(EngineMode.HIXL_ENGINE.value)
    return engine


def _busy(world: SimWorld, endpoint: Endpoint) -> bool:
    host, port = endpoint
    taken = list(world.hixl.listeners) + list(world.listeners)
    return any(p == port and (h == host or "0.0.0.0" in (h, host)) for h, p in taken)


def close_engine(world: SimWorld, engine: HixlEngine) -> None:
    """``finalize``: the pool stops, the listener closes, connections, memory, requests and notifies go
    (``hixl_engine.cc:311-323``; ``adxl_inner_engine.cc:305-328``)."""
    with world.lock:
        if tear_down(world.hixl, engine):
            world.record(engine.name, "hixl.engine.finalize", "ok", kind="event")


def live(world: SimWorld, engine: HixlEngine) -> None:
    if not engine.alive:
        raise SimError(_F, f"engine {engine.name} is finalized")
    pool = engine.pool
    if pool.queue or pool.running:
        pool.advance(
            world.now(), lambda task, when: _start(world, engine, task), lambda task: _finish(engine, task)
        )


# -- memory ---------------------------------------------------------------------------------------


def register(world: SimWorld, engine: HixlEngine, addr: int, nbytes: int, device: bool) -> int:
    """A handle for ``[addr, addr + nbytes)``. ``hixl_cs``: the same range and type again gives the same
    handle, an overlap with a range of the same type is refused (``hixl_server.cc:111-119``,
    ``hixl_utils.cc:242-264``); ``comm`` checks no overlap (``channel_msg_handler.cc:222-242``)."""
    if addr + nbytes >= U64:  # channel_msg_handler.cc:225-227; hixl_server.cc:106-107
        raise SimError(_P, f"addr {addr:#x} + len {nbytes} overflows 64 bits")
    with world.lock:
        live(world, engine)
        hixl_faults.meet(world, engine, "hixl.register_mem")
        if engine.settings.kind is EngineKind.HIXL_CS:
            for handle, region in engine.regions.items():
                if region.device != device:
                    continue
                if region.addr == addr and region.nbytes == nbytes:
                    return handle
                if region.addr < addr + nbytes and addr < region.addr + region.nbytes:
                    raise SimError(
                        _P,
                        f"[{addr:#x}, +{nbytes}) overlaps [{region.addr:#x}, +{region.nbytes}), registered",
                    )
        handle = world.hixl.next_handle
        world.hixl.next_handle += 0x10
        engine.regions[handle] = Region(addr, nbytes, device)
        engine.layout += 1
        return handle


def deregister(world: SimWorld, engine: HixlEngine, handle: int) -> None:
    """An unknown handle is no error (``channel_msg_handler.cc:244-250``; ``hixl_server.cc:136-140``);
    ``hixl_cs`` refuses while the engine holds a client connection (``hixl_engine.cc:129-133``)."""
    with world.lock:
        live(world, engine)
        hixl_faults.meet(world, engine, "hixl.deregister_mem")
        if handle not in engine.regions:
            return
        if engine.settings.kind is EngineKind.HIXL_CS and engine.peers:
            raise SimError(_F, f"engine {engine.name} still holds connections to {sorted(engine.peers)}")
        del engine.regions[handle]
        engine.layout += 1


# -- connections ----------------------------------------------------------------------------------


def _server(world: SimWorld, engine: HixlEngine, remote: str) -> Tuple[Optional[HixlEngine], float]:
    """Who serves ``remote`` and how long asking takes; a refusal is one round trip."""
    parsed = parse_engine(remote)
    if parsed is None or parsed[1] <= 0:
        if parsed is None:
            raise SimError(_P, f"remote_engine {remote!r} is not ip:port")
        return None, world.config.message_rtt_s
    server = world.hixl.listeners.get(parsed)
    if server is None:
        server = world.hixl.listeners.get(("0.0.0.0", parsed[1]))
    if server is None or not server.alive:
        return None, world.config.message_rtt_s
    return server, world.config.link_setup_s


def _attempt(world: SimWorld, engine: HixlEngine, remote: str) -> Tuple[Optional[HixlEngine], float]:
    """The engine's checks before the network, in its order, then the server found (None: refused)."""
    cs = engine.settings.kind is EngineKind.HIXL_CS
    if cs and remote == engine.name:  # hixl_engine.cc:147-150
        raise SimError(_P, "an engine cannot connect to itself")
    if not cs and remote in engine.peers:  # channel_msg_handler.cc:492-495, before any network step
        raise SimError(LLMStatusCode.LLM_ALREADY_LINK, f"already connected to {remote}")
    server, cost = _server(world, engine, remote)  # hixl_cs parses first: client_manager.cc:49-50
    if cs and remote in engine.peers:  # client_manager.cc:66-72
        raise SimError(LLMStatusCode.LLM_ALREADY_LINK, f"already connected to {remote}")
    return server, cost


def connect_now(
    world: SimWorld, engine: HixlEngine, remote: str, timeout_s: float, op: Optional[str] = None
) -> None:
    """Connect now; ``op`` names the public call (None: the connect a transfer makes)."""
    server, cost = _attempt(world, engine, remote)
    cost = hixl_faults.connect(world, engine, op, remote, server, cost)
    if cost > timeout_s:
        world.elapse(timeout_s)
        raise SimError(LLMStatusCode.LLM_TIMEOUT, f"connect to {remote} took longer than {timeout_s} s")
    world.elapse(cost)
    if server is None:  # the TCP connect is refused at once (ctrl_msg_plugin.cc:71-85; msg_handler_plugin.cc)
        raise SimError(_F, f"nobody serves {remote}")
    engine.peers[remote] = server


def connect(world: SimWorld, engine: HixlEngine, remote: str, timeout_s: float) -> None:
    with world.lock:
        live(world, engine)
        connect_now(world, engine, remote, timeout_s, "hixl.connect")


def disconnect(world: SimWorld, engine: HixlEngine, remote: str, timeout_s: float) -> None:
    """Only this engine's client connection goes; a peer that is down does not fail it
    (``channel_msg_handler.cc:652-673``; ``hixl_engine.cc:170-180``)."""
    with world.lock:
        live(world, engine)
        hixl_faults.meet(world, engine, "hixl.disconnect", remote, timeout_s)
        if engine.settings.kind is EngineKind.COMM and parse_engine(remote) is None:  # :576-579
            raise SimError(_P, f"remote_engine {remote!r} is not ip:port")
        if remote not in engine.peers:  # client_manager.cc:181-204; channel_msg_handler.cc:580-583
            raise SimError(LLMStatusCode.LLM_NOT_YET_LINK, f"not connected to {remote}")
        drop_connection(engine, remote)
        world.elapse(min(world.config.message_rtt_s, timeout_s))


def connect_async(world: SimWorld, engine: HixlEngine, remote: str, timeout_s: float, connect: bool) -> None:
    with world.lock:
        live(world, engine)
        op = "hixl.connect_async" if connect else "hixl.disconnect_async"
        hixl_faults.meet(world, engine, op, remote, timeout_s)
        engine.pool.submit(remote, connect, timeout_s, world.now())


def _start(world: SimWorld, engine: HixlEngine, task: Task) -> float:
    """A worker runs the task at the pool's time; the result is applied at its end (``_finish``)."""
    if not task.connect:
        return world.config.message_rtt_s
    try:
        server, cost = _attempt(world, engine, task.remote)
    except SimError as exc:  # ALREADY_CONNECTED counts as connected (hixl_impl.cc:150-157)
        task.ok = exc.code is LLMStatusCode.LLM_ALREADY_LINK
        return world.config.message_rtt_s
    cost = hixl_faults.connect(world, engine, None, task.remote, server, cost)
    task.ok, task.found = server is not None and cost <= task.timeout_s, server
    return min(cost, task.timeout_s)


def _finish(engine: HixlEngine, task: Task) -> None:
    if not task.connect:
        if task.remote in engine.peers:
            drop_connection(engine, task.remote)
    elif task.ok and isinstance(task.found, HixlEngine) and task.found.alive:
        engine.peers.setdefault(task.remote, task.found)


def poll_wait(world: SimWorld, next_change: Optional[float]) -> None:
    """A poll of something still moving lets one control round trip pass (at most up to its next
    change), so a client that polls in a loop without sleeping still sees it move on the virtual clock."""
    if next_change is not None:
        world.elapse(min(world.config.message_rtt_s, next_change - world.now()))


def connect_status(world: SimWorld, engine: HixlEngine, remote: str) -> ConnectState:
    """The table's entry; none reads ``NOT_CONNECT`` (``connect_pool_executor.cc:128-133``)."""
    with world.lock:
        live(world, engine)
        hixl_faults.meet(world, engine, "hixl.get_async_connect_status", remote)
        state = engine.pool.table.get(remote, ConnectState.NOT_CONNECT)
        if remote in {t.remote for t in engine.pool.queue + engine.pool.running}:
            poll_wait(world, engine.pool.next_change())
        return state


def connect_statuses(world: SimWorld, engine: HixlEngine) -> Dict[str, ConnectState]:
    """Every entry present (``connect_pool_executor.cc:135-140``)."""
    with world.lock:
        live(world, engine)
        hixl_faults.meet(world, engine, "hixl.get_all_async_connect_status")
        table = dict(engine.pool.table)
        poll_wait(world, engine.pool.next_change())
        return table


# -- notifies -------------------------------------------------------------------------------------


def notify(
    world: SimWorld, engine: HixlEngine, remote: str, name: bytes, msg: bytes, timeout_s: float
) -> None:
    """To the peer's server side, over this engine's client connection (``hixl_engine.cc:329-332``;
    ``adxl_inner_engine.cc:602-604``); the sender waits for the acknowledgement."""
    with world.lock:
        live(world, engine)
        peer = engine.peers.get(remote)
        if peer is None:
            raise SimError(LLMStatusCode.LLM_NOT_YET_LINK, f"not connected to {remote}")
        hixl_faults.notify(world, engine, remote, peer, timeout_s)
        if not peer.alive:
            world.elapse(timeout_s)
            raise SimError(LLMStatusCode.LLM_TIMEOUT, f"{remote} did not acknowledge the notify")
        if engine.settings.kind is EngineKind.HIXL_CS and len(peer.notifies) >= NOTIFY_QUEUE_MAX:
            raise SimError(EXHAUSTED, f"{remote} holds {NOTIFY_QUEUE_MAX} notifies already")
        world.elapse(min(world.config.message_rtt_s, timeout_s))
        peer.notifies.append((name, msg))


def drain_notifies(world: SimWorld, engine: HixlEngine) -> List[Tuple[bytes, bytes]]:
    """Every notify received, from any client; the queue empties (``hixl_server.cc:177-182``)."""
    with world.lock:
        live(world, engine)
        hixl_faults.meet(world, engine, "hixl.get_notifies")
        drained, engine.notifies = engine.notifies, []
        return drained
