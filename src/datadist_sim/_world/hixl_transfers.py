"""hixl transfers: ``transfer_sync``, ``transfer_async`` and the status of its requests, between the
engines of ``hixl_engines`` (``hixl_state`` describes what an engine holds).

Every descriptor is checked against both engines' registrations (``hixl_cs``: ``hixl_mem_store.cc:
259-279``) and then resolved through the world's address space (simulated memory, or raw pointers
``/proc/self/maps`` vouches for) before the first byte moves, so a refused transfer writes nothing. The
open-source ``comm`` engine checks no registration (ranges outside registered memory go through its
staging buffers, ``adxl_inner_engine.cc:379-406``); here it is held to the same rule, since in one
simulated process an unregistered address may be anyone's memory. An asynchronous transfer's bytes move
when it is submitted; its status says ``WAITING`` until its modelled end (one round trip plus the bytes
at the link's bandwidth).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, List, Sequence, Tuple

from datadist_sim._status import LLMStatusCode
from datadist_sim._world import hixl_faults
from datadist_sim._world.clock import VirtualClock, other_threads
from datadist_sim._world.errors import SimError
from datadist_sim._world.hixl_engines import AUTO_CONNECT_ASYNC_S, U64, connect_now, live, poll_wait
from datadist_sim._world.hixl_state import (
    Desc,
    EngineKind,
    HixlEngine,
    OpState,
    Region,
    Request,
    Vetted,
    fail_connection,
)
from datadist_sim._world.ownership import enter_copy, leave_copy

if TYPE_CHECKING:
    from datadist_sim._world.world import SimWorld

_P = LLMStatusCode.LLM_PARAM_INVALID
_F = LLMStatusCode.LLM_FAILED
VETTED_MAX = 1024
"""Descriptor lists whose range check an engine keeps (then it starts again)."""


def _peer_for_transfer(world: SimWorld, engine: HixlEngine, remote: str, timeout_s: float) -> HixlEngine:
    """The connection a transfer uses. With ``AutoConnect`` the engine connects first: ``comm`` ignores
    the connect's result and answers ``NOT_CONNECTED`` if still unconnected (``adxl_inner_engine.cc:
    486-491``), ``hixl_cs`` returns the connect's own code (``hixl_engine.cc:199-201, 383-413``)."""
    peer = engine.peers.get(remote)
    if peer is None and engine.settings.auto_connect:
        try:
            connect_now(world, engine, remote, timeout_s)
        except SimError:
            if engine.settings.kind is EngineKind.HIXL_CS:
                raise
        peer = engine.peers.get(remote)
    if peer is None:  # adxl_inner_engine.cc:489-491; hixl_engine.cc:383-391
        raise SimError(LLMStatusCode.LLM_NOT_YET_LINK, f"not connected to {remote}")
    return peer


def _inside(regions: Dict[int, Region], addr: int, nbytes: int) -> bool:
    """Whether the range lies in registered memory; adjacent registrations count as one
    (``hixl_mem_store.cc:171, 176-217``)."""
    end = addr + nbytes
    for region in regions.values():
        if region.addr <= addr and end <= region.addr + region.nbytes:
            return True
    spans = sorted((r.addr, r.addr + r.nbytes) for r in regions.values())
    cursor = addr
    for low, high in spans:
        if low <= cursor < high:
            cursor = high
            if cursor >= end:
                return True
    return False


def _plan(engine: HixlEngine, peer: HixlEngine, write: bool, descs: Sequence[Desc]) -> List[Desc]:
    """The ``(dst, src, len)`` copies of a descriptor list, once every range is checked: ``len > 0``,
    the local range in this engine's registered memory, the remote one in the peer's
    (``hixl_mem_store.cc:259-279``). A READ writes only local ranges, a WRITE only remote ones."""
    if not engine.alive or not peer.alive:
        raise SimError(_F, f"the engine at {peer.name} is gone")
    key = tuple(descs)
    seen = engine.vetted.get(key)
    # the same ranges, the same way, against the same registrations of the same peer: still good
    if (
        seen is not None
        and seen.peer is peer
        and seen.write is write
        and (seen.layout, seen.peer_layout) == (engine.layout, peer.layout)
    ):
        return seen.copies
    copies = []
    for index, (local, remote, nbytes) in enumerate(descs):
        if nbytes == 0 or local + nbytes > U64 or remote + nbytes > U64:
            raise SimError(_P, f"op_descs[{index}]: len {nbytes} is 0 or overflows")
        if not _inside(engine.regions, local, nbytes):
            raise SimError(_P, f"op_descs[{index}]: local [{local:#x}, +{nbytes}) is not registered memory")
        if not _inside(peer.regions, remote, nbytes):
            raise SimError(
                _P, f"op_descs[{index}]: remote [{remote:#x}, +{nbytes}) is not memory {peer.name} registered"
            )
        copies.append((remote, local, nbytes) if write else (local, remote, nbytes))
    if len(engine.vetted) >= VETTED_MAX:
        engine.vetted.clear()
    engine.vetted[key] = Vetted(peer, engine.layout, peer.layout, write, copies)
    return copies


def _checked(engine: HixlEngine, remote: str, write: bool, descs: Sequence[Desc]) -> List[Desc]:
    """The copies, once every descriptor checks out. With ``AutoConnect`` any failure from here on
    drops the connection, so the next call connects again (``hixl_engine.cc:205-210``;
    ``adxl_inner_engine.cc:408-415``)."""
    try:
        if engine.settings.kind is EngineKind.HIXL_CS and not descs:  # hixl_client.cc:173
            raise SimError(_P, "op_descs is empty")
        return _plan(engine, engine.peers[remote], write, descs)
    except SimError as exc:
        fail_connection(engine, remote, exc.code)
        raise


def _copy(world: SimWorld, engine: HixlEngine, remote: str, write: bool, copies: List[Desc]) -> None:
    """Move the bytes, all or nothing (``AddressSpace.copy_ranges``); memory the address space cannot
    vouch for is refused as it refuses it, a poisoned range is ``FAILED``. The two engines are named as
    the copy's parties: where engines live in different processes (the fabric), a pointer means memory
    only of the process whose engine registered it, so each side is read or written by its engine's
    process (a READ writes the caller's, a WRITE the peer's), never one chosen by the number alone."""
    peer = engine.peers[remote]
    before = enter_copy(peer, engine) if write else enter_copy(engine, peer)
    try:
        world.space_copy(copies)
    except SimError as exc:
        code = exc.code if exc.code is LLMStatusCode.LLM_PARAM_INVALID else _F
        fail_connection(engine, remote, code)
        if code is LLMStatusCode.LLM_PARAM_INVALID:
            raise
        raise SimError(_F, exc.message) from None
    finally:
        leave_copy(before)


def _duration(world: SimWorld, copies: List[Desc]) -> float:
    """One round trip plus the bytes at the link's bandwidth."""
    total = copies[0][2] if len(copies) == 1 else sum(nbytes for _, _, nbytes in copies)
    config = world.config
    return config.message_rtt_s + total / config.bandwidth_bytes_per_s


def _check_empty(engine: HixlEngine, descs: Sequence[Desc]) -> None:
    if engine.settings.kind is EngineKind.COMM and not descs:  # comm_engine.cc:60, before the connection
        raise SimError(_P, "op_descs is empty")


def transfer(
    world: SimWorld, engine: HixlEngine, remote: str, write: bool, descs: Sequence[Desc], timeout_s: float
) -> None:
    """``transfer_sync``. One that would outlast its timeout moves nothing and answers ``TIMEOUT`` at
    the deadline (``hixl_cs_client.cc:964-970``)."""
    if not other_threads() and _again(world, engine, remote, write, descs, timeout_s):
        return  # alone, nothing else can touch the world meanwhile: no lock is needed
    with world.lock:
        if other_threads() and _again(world, engine, remote, write, descs, timeout_s):
            return
        live(world, engine)
        if not descs or remote not in engine.peers:  # the empty list's code and auto-connect come first
            _check_empty(engine, descs)
            _peer_for_transfer(world, engine, remote, timeout_s)
        copies = _checked(engine, remote, write, descs)
        duration = hixl_faults.transfer_sync(
            world, engine, remote, write, copies, _duration(world, copies), timeout_s
        )
        if duration > timeout_s:
            fail_connection(engine, remote, LLMStatusCode.LLM_TIMEOUT)
            world.elapse(timeout_s)
            raise SimError(
                LLMStatusCode.LLM_TIMEOUT, f"transfer of {len(copies)} ranges outlasts {timeout_s} s"
            )
        _copy(world, engine, remote, write, copies)
        _pass(world, duration)
        if len(copies) == 1:
            _remember(world, engine, descs, copies[0])


def _again(
    world: SimWorld, engine: HixlEngine, remote: str, write: bool, descs: Sequence[Desc], timeout_s: float
) -> bool:
    """Run a ``transfer_sync`` of one small raw range that moved before, the same way over the same
    connection, at once: True when it ran; False, with nothing done, where the full path must decide.

    It runs again only where every step of the full path would give what it gave then: both engines
    with the registrations they had (``layout``, which an engine's end moves too), the connection to
    the same peer and usable, no connect pending in the pool, no fault rule loaded, no poison, the
    maps not re-read; the kernel still vouches for every page of both ranges
    (``AddressSpace.copy_again``), and the transfer ends within its timeout (the config's link, read
    now). Most of a small transfer's cost is the path's steps, not its work: this is one step."""
    seen = engine.vetted.get(descs if type(descs) is tuple else tuple(descs))
    if seen is None or seen.again is None:
        return False
    peer = seen.peer
    pool = engine.pool
    if (
        seen.write is not write
        or engine.peers.get(remote) is not peer
        or seen.layout != engine.layout
        or seen.peer_layout != peer.layout
        or engine.broken
        or pool.queue
        or pool.running
        or not world.faults.idle
    ):
        return False
    config = world.config
    duration = config.message_rtt_s + seen.copies[0][2] / config.bandwidth_bytes_per_s
    if duration > timeout_s or not world.memory.copy_again(seen.again):
        return False
    _pass(world, duration)
    return True


def _remember(world: SimWorld, engine: HixlEngine, descs: Sequence[Desc], copy: Desc) -> None:
    """Keep, with the vetted descriptor list, what runs its one range again at once (``_again``)."""
    key = descs if type(descs) is tuple else tuple(descs)
    seen = engine.vetted.get(key)
    if seen is not None and seen.again is None:
        again = world.memory.small_pair(*copy)
        if again is not None:
            seen.again = again


def _pass(world: SimWorld, duration: float) -> None:
    clock = world.clock
    if type(clock) is VirtualClock and not other_threads():
        clock.pass_alone(duration)  # no one can wait on the clock: it needs no lock of its own
    else:
        world.elapse(duration)


def transfer_start(
    world: SimWorld, engine: HixlEngine, remote: str, write: bool, descs: Sequence[Desc], user_data: int
) -> int:
    """``transfer_async``: a request numbered from 1 (``adxl_inner_engine.cc:527-528``), recorded with
    its ``user_data`` (``client_manager.cc:126-134``)."""
    with world.lock:
        live(world, engine)
        _check_empty(engine, descs)
        _peer_for_transfer(world, engine, remote, AUTO_CONNECT_ASYNC_S)
        copies = _checked(engine, remote, write, descs)
        outcome = hixl_faults.transfer_async(world, engine, remote)
        if outcome.moves:
            _copy(world, engine, remote, write, copies)
        duration = _duration(world, copies) + outcome.extra_s
        req = engine.next_req
        engine.next_req += 1
        engine.requests[req] = Request(
            remote, user_data, world.now() + duration, outcome.state or OpState.COMPLETED
        )
        return req


def _state(world: SimWorld, engine: HixlEngine, req: int, request: Request) -> OpState:
    """A request's state now; one that is no longer ``WAITING`` is forgotten: it reports its end once
    (``hixl_engine.cc:257-259``; ``adxl_inner_engine.cc:585-595``)."""
    if world.now() < request.done_at:
        return OpState.WAITING
    del engine.requests[req]
    return request.state


def transfer_poll(world: SimWorld, engine: HixlEngine, req: int) -> OpState:
    with world.lock:
        live(world, engine)
        request = engine.requests.get(req)
        if request is None:  # hixl_engine.cc:241-247; adxl_inner_engine.cc:557-562
            raise SimError(_P, f"request {req:#x} is unknown or already reported")
        if request.remote not in engine.peers:  # comm: adxl_inner_engine.cc:563-572
            del engine.requests[req]
            raise SimError(LLMStatusCode.LLM_NOT_YET_LINK, f"the connection of request {req:#x} is gone")
        try:
            failed = hixl_faults.poll(world, engine, "hixl.get_transfer_status", request.remote)
        except SimError:
            engine.requests.pop(req, None)  # an error reading it forgets it (adxl_inner_engine.cc:574-584)
            raise
        if failed is not None:
            del engine.requests[req]
            return failed
        state = _state(world, engine, req, request)
        if state is OpState.WAITING:
            poll_wait(world, request.done_at)
        return state


def transfer_poll_all(
    world: SimWorld, engine: HixlEngine, max_count: int, skip_waiting: bool
) -> List[Tuple[int, int, OpState]]:
    """``get_all_transfer_status`` of ``hixl_cs`` (``hixl_engine.cc:263-309``); ``comm`` has none
    (``comm_engine.cc:90-94``). Requests are walked in submission order and the walk stops once
    ``max_count`` results are held; with ``skip_waiting`` a waiting one is left out and stays."""
    with world.lock:
        live(world, engine)
        if engine.settings.kind is EngineKind.COMM:
            raise SimError(
                LLMStatusCode.LLM_FEATURE_NOT_ENABLED, "the comm engine has no get_all_transfer_status"
            )
        hixl_faults.meet(world, engine, "hixl.get_all_transfer_status")
        results: List[Tuple[int, int, OpState]] = []
        waiting: List[float] = []
        for req, request in list(engine.requests.items()):
            if len(results) >= max_count:
                break
            if request.remote in engine.broken:  # a latched failure (hixl_cs_client.cc:1102-1108)
                del engine.requests[req]
                results.append((req, request.user_data, OpState.FAILED))
                continue
            state = _state(world, engine, req, request)
            if state is OpState.WAITING:
                waiting.append(request.done_at)
                if skip_waiting:
                    continue
            results.append((req, request.user_data, state))
        if waiting:
            poll_wait(world, min(waiting))
        return results
