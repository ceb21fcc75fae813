"""The faults the ``hixl`` engine API's calls meet, applied to its engines (``hixl_engines``).

Each world operation of a hixl engine calls one function here, once, after its argument checks, where
the real engine would start work: ``meet`` for a plain call, ``connect`` (the cost of a connect),
``transfer_sync``, ``transfer_async``, ``notify`` and ``poll``. With no rule loaded and no connection
failed, each returns at its first line. What the rules that fired do is decided by ``faults.effects``
(as for ``fault_effects.meet_door_faults``, whose style this follows); here the time passes, the bytes
move or not, and the code is raised, with the code hixl gives:

- a rule's ``fail`` gives its own hixl code; a ``timeout`` waits out the call's ``timeout_in_millis``
  and gives ``TIMEOUT`` (``engine_codes``: only the calls that have a timeout);
- a peer that does not answer (a partition, a hang): a connect waits out its timeout and is ``TIMEOUT``
  (``ctrl_msg_plugin.cc:79``: the attempt outlasts the timeout); a ``transfer_sync`` waits out its
  timeout, ``TIMEOUT`` (the stream sync, ``comm_channel.cc:514-531``, ``hixl_cs_client.cc:964-970``); a
  notify's acknowledgement never comes, ``TIMEOUT`` (``adxl_inner_engine.cc:614-623``);
- a killed peer: nobody serves its name, so a connect is refused at once, ``FAILED``
  (``ctrl_msg_plugin.cc:71-85``); a transfer over a connection made before fails, ``FAILED`` (the
  runtime's error for the HCCL op, ``adxl_utils.cc:24-48``);
- a transfer that failed or timed out leaves its connection unusable (comm: the channel is marked
  unavailable, ``comm_channel.cc:209-228``, fail-fast on unless a channel pool is configured,
  ``adxl_inner_engine.cc:191``; hixl_cs: the client latches the failure, ``hixl_cs_client.cc:736-745,
  988-991, 1028``): later transfers on it are ``FAILED`` until the client disconnects and connects
  again. With ``AutoConnect`` the engine drops the connection instead (``adxl_inner_engine.cc:408-415``;
  ``hixl_engine.cc:205-210``), so the next transfer connects again;
- ``transfer_async`` has no timeout: a request under a fault is accepted and reports
  ``TransferStatus.FAILED`` at its end (hixl_cs sets it from the kernel's error flag,
  ``hixl_cs_client.cc:1106-1113``); ``TransferStatus.TIMEOUT`` has no producer in the source
  (``client_handler.h:39-40`` maps a completion status nothing sets), so no fault gives it;
- ``cap_pool`` / ``exhaust_pool`` on an engine fill its connect pool's queue (``world_faults``, with the
  other world actions on engines): ``connect_async`` and ``disconnect_async`` are ``RESOURCE_EXHAUSTED``
  (``connect_pool_executor.cc:83-102``).

Rules name an engine by its ``local_engine`` string (``Fault.kill("10.0.0.1:26000")``); a call's
``remote`` is the ``remote_engine`` string it was given.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple, Optional, Sequence, Tuple

from datadist_sim._status_hixl import Code, HixlCode, as_llm
from datadist_sim._world.errors import SimError
from datadist_sim._world.hixl_state import Desc, EngineKind, HixlEngine, OpState, fail_connection
from datadist_sim._world.ownership import enter_copy, leave_copy
from datadist_sim.faults import engine_codes
from datadist_sim.faults.effects import DOOR_ACTIONS, Effect, door_effect, transfer_effect
from datadist_sim.faults.engine_codes import EngineMode
from datadist_sim.faults.plan import Call

if TYPE_CHECKING:
    from datadist_sim._world.world import SimWorld

_MODE = EngineMode.HIXL_ENGINE


class HixlFault(SimError):
    """A fault's end of a hixl call: ``hixl`` is the code the face reports, ``code`` its
    ``LLMStatusCode`` twin (``as_llm``) for whatever reads it as the world's other errors."""

    def __init__(self, code: Code, message: str) -> None:
        super().__init__(as_llm(code), message)
        self.hixl = code


class AsyncOutcome(NamedTuple):
    """What becomes of a ``transfer_async`` request: its end state (None: ``COMPLETED``), whether its
    bytes move, and how much longer it runs."""

    state: Optional[OpState] = None
    moves: bool = True
    extra_s: float = 0.0


NORMAL = AsyncOutcome()


# -- the calls ------------------------------------------------------------------------------------


def meet(
    world: SimWorld,
    engine: HixlEngine,
    op: str,
    remote: Optional[str] = None,
    timeout_s: Optional[float] = None,
) -> None:
    """A plain call: delays pass, a ``fail`` raises its code, a ``timeout`` waits out ``timeout_s`` and
    raises ``TIMEOUT``."""
    if world.faults.idle:
        return
    _door_on(world, engine, op, remote, timeout_s)


def _door_on(
    world: SimWorld, engine: HixlEngine, op: str, remote: Optional[str], timeout_s: Optional[float]
) -> None:
    """``_door`` for a live engine; a world rule that fired at this call and killed it fails it."""
    _door(world, engine.name, op, remote, timeout_s)
    if not engine.alive:
        raise HixlFault(HixlCode.FAILED, f"engine {engine.name} was killed by a fault rule")


def opening(world: SimWorld, name: str) -> None:
    """``initialize`` of an engine named ``name``, before it exists: its rules act as ``meet``'s."""
    if world.faults.idle:
        return
    _door(world, name, "hixl.initialize", None, None)


def _door(world: SimWorld, name: str, op: str, remote: Optional[str], timeout_s: Optional[float]) -> None:
    effect = door_effect(world.faults.on_call(Call(op, name, remote), DOOR_ACTIONS))
    for extra in effect.delays:
        world.elapse(extra)
    if effect.fail is not None:
        raise HixlFault(effect.fail, f"injected by fault rule {effect.rule!r}")
    if effect.timeout:
        world.elapse(1.0 if timeout_s is None else timeout_s)
        code = engine_codes.timeout_code(op, _MODE) or HixlCode.TIMEOUT
        raise HixlFault(code, f"timed out (fault rule {effect.rule!r})")


def connect(
    world: SimWorld,
    engine: HixlEngine,
    op: Optional[str],
    remote: str,
    server: Optional[HixlEngine],
    cost: float,
) -> float:
    """How long a connect to ``server`` takes: ``inf`` (past any timeout) when it does not answer.
    ``op`` is the public connect (its rules fire), or None for the connect a transfer makes."""
    if world.faults.idle:
        return cost
    if op is not None:
        fired = world.faults.on_call(Call(op, engine.name, remote), DOOR_ACTIONS)
        effect = door_effect(fired)
        cost += sum(effect.delays)
        if effect.fail is not None:
            raise HixlFault(effect.fail, f"injected by fault rule {effect.rule!r}")
        if effect.timeout:
            return float("inf")
    if not engine.alive or (server is not None and not server.alive):  # killed at this call
        raise HixlFault(HixlCode.FAILED, f"the engine at {remote} or {engine.name} is gone")
    if server is not None and _unreachable(world, engine, remote, server):
        return float("inf")
    return cost


def transfer_sync(
    world: SimWorld,
    engine: HixlEngine,
    remote: str,
    write: bool,
    copies: Sequence[Desc],
    duration: float,
    timeout_s: float,
) -> float:
    """The duration of a checked ``transfer_sync``, lengthened by delays; or it ends here: a failed
    connection is ``FAILED``, a rule's ``fail`` its code, a poison ``FAILED``, and a timeout, a cut
    link or a peer that does not answer waits out ``timeout_s`` and is ``TIMEOUT`` (the bytes land
    first when the timeout rule says so). Every such end leaves the connection unusable."""
    if world.faults.idle and not engine.broken:
        return duration
    met = _rules_met(world, engine, remote, "hixl.transfer_sync")
    if met is None:
        return duration
    effect, peer, ends = met
    duration += sum(effect.delays)
    if ends is None and duration <= timeout_s:
        return duration
    if ends is not None and ends.hixl is not HixlCode.TIMEOUT:
        fail_connection(engine, remote, ends.hixl)
        raise ends
    if effect.landed:
        # the engines are the copy's parties, as for any transfer's bytes (``hixl_transfers._copy``):
        # where they live in different processes, each side is its own engine's process's memory
        before = enter_copy(peer, engine) if write else enter_copy(engine, peer)
        try:
            world.space_copy(list(copies))
        finally:
            leave_copy(before)
    world.elapse(timeout_s)
    fail_connection(engine, remote, HixlCode.TIMEOUT)
    raise HixlFault(HixlCode.TIMEOUT, f"transfer to {remote} did not end within {timeout_s} s")


def transfer_async(world: SimWorld, engine: HixlEngine, remote: str) -> AsyncOutcome:
    """What becomes of a checked ``transfer_async``: a failed connection or a rule's ``fail`` refuse it
    here; under any other fault it is accepted and ends ``FAILED`` (its bytes land only when a timeout
    rule says they did), and its connection is unusable from then on."""
    if world.faults.idle and not engine.broken:
        return NORMAL
    met = _rules_met(world, engine, remote, "hixl.transfer_async")
    if met is None:
        return NORMAL
    effect, _, ends = met
    extra = sum(effect.delays)
    if ends is None and not effect.timeout:
        return AsyncOutcome(extra_s=extra)
    if ends is not None and effect.fail is not None:
        fail_connection(engine, remote, effect.fail)
        raise ends
    fail_connection(engine, remote, HixlCode.FAILED)
    return AsyncOutcome(OpState.FAILED, effect.timeout and effect.landed, extra)


def poll(world: SimWorld, engine: HixlEngine, op: str, remote: str) -> Optional[OpState]:
    """A status query of a request on ``remote``'s connection: its rules act (``meet``); on a connection
    a failure made unusable, comm answers ``FAILED`` (``comm_channel.cc:422-427``) and hixl_cs reports the
    request ``FAILED`` (``hixl_cs_client.cc:1102-1108``). None: the request's own state stands."""
    if world.faults.idle and not engine.broken:
        return None
    if not world.faults.idle:
        _door_on(world, engine, op, remote, None)
    if remote not in engine.broken:
        return None
    if engine.settings.kind is EngineKind.COMM:
        raise HixlFault(HixlCode.FAILED, f"the connection to {remote} failed before")
    return OpState.FAILED


def notify(world: SimWorld, engine: HixlEngine, remote: str, peer: HixlEngine, timeout_s: float) -> None:
    """``send_notify``: its rules act; to a peer that does not answer, the acknowledgement never comes
    (``TIMEOUT`` after ``timeout_s``)."""
    if world.faults.idle:
        return
    _door_on(world, engine, "hixl.send_notify", remote, timeout_s)
    if _unreachable(world, engine, remote, peer):
        world.elapse(timeout_s)
        raise HixlFault(HixlCode.TIMEOUT, f"{remote} did not acknowledge the notify")


# -- connections ----------------------------------------------------------------------------------


def _rules_met(
    world: SimWorld, engine: HixlEngine, remote: str, op: str
) -> Optional[Tuple[Effect, HixlEngine, Optional[HixlFault]]]:
    """The opening both transfers share, once past the idle shortcut: a failed connection refuses the
    transfer; with no rule loaded, None (it runs as checked); else the rules that fired at ``op``, the
    peer still there, and how the transfer ends before its bytes would (None: it runs on)."""
    _usable(engine, remote)
    if world.faults.idle:
        return None
    effect = transfer_effect(world.faults.on_call(Call(op, engine.name, remote)), world.faults.coin)
    peer = _peer(engine, remote)
    return effect, peer, _end(world, engine, remote, peer, effect)


def _usable(engine: HixlEngine, remote: str) -> None:
    if remote in engine.broken:
        raise HixlFault(HixlCode.FAILED, f"the connection to {remote} failed before; connect again")


def _peer(engine: HixlEngine, remote: str) -> HixlEngine:
    """The peer of a transfer once its rules fired: a world rule that fired at this very call may have
    killed either side (a dead process's call fails; a dead peer's transfer fails)."""
    peer = engine.peers.get(remote)
    if not engine.alive or peer is None or not peer.alive:
        raise HixlFault(HixlCode.FAILED, f"the engine at {remote} or {engine.name} is gone")
    return peer


def _unreachable(world: SimWorld, engine: HixlEngine, remote: str, peer: HixlEngine) -> bool:
    """No answer comes back from ``peer``: a partition between the two names, or either hangs. The
    engine of an ``llm_datadist`` instance (``hixl_served``) answers to the instance's cluster id too."""
    faults = world.faults
    return (
        faults.partitioned(engine.name, peer.name)
        or (remote != peer.name and faults.partitioned(engine.name, remote))
        or (peer.cluster_id is not None and faults.partitioned(engine.name, peer.cluster_id))
    )


def _end(
    world: SimWorld, engine: HixlEngine, remote: str, peer: HixlEngine, effect: Effect
) -> Optional[HixlFault]:
    """How a transfer under ``effect`` ends before its bytes would: None when it runs on."""
    if effect.fail is not None:
        return HixlFault(effect.fail, f"injected by fault rule {effect.rule!r}")
    if effect.poison:
        for poison in effect.poison:
            world.record(
                engine.name, "fault.poison", "hit", f"{remote} {'remote' if poison.remote else 'local'}"
            )
        return HixlFault(HixlCode.FAILED, f"an uncorrectable memory error under the transfer to {remote}")
    if effect.cut or effect.timeout or _unreachable(world, engine, remote, peer):
        return HixlFault(HixlCode.TIMEOUT, f"{remote} does not answer")
    return None
