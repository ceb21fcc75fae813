"""Where a decided fault changes the world: the one application point of the engine's calls.

The faults floor decides (``faults.plan`` says which rules fired on a call, ``faults.effects`` what they
do to it, as an ``Effect``); the modules that run a call only ask what happens at their fault point and
hand the answer here, where the time passes, the code is raised or returned, the link breaks, the bytes
are poisoned or land. A new call action is a field of ``Effect`` and a few lines in the function below
for each kind of call it acts on:

- ``meet_door_faults``: a plain call (not a transfer, not a link call) at the engine's door. The face
  calls it once per public call, after its own argument checks, where the real engine would start work;
- ``link_outcome``: one remote cluster's entry of ``link_clusters`` / ``unlink_clusters`` (``links``);
- ``meet_transfer_faults``: a transfer, once the rules that fired on it are known (``transfer.run_transfer``);
- ``time_out``: a transfer that never completes, whether a rule or a silent peer made it so.

A world action (a kill, a cut, a capped pool), which fires on the clock rather than on a call, changes
the world in ``world_faults``: the world calls it through its hooks, so it sits under the world, and
this module, which the world never calls, above it. The ``hixl`` engine API's calls meet theirs in
``hixl_faults`` (the same shape).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, List, NoReturn, Optional, Tuple

from datadist_sim._status import LLMStatusCode
from datadist_sim._status_hixl import as_llm
from datadist_sim._world.cluster import ClusterNode, Mode
from datadist_sim._world.errors import SimError
from datadist_sim.faults import engine_codes
from datadist_sim.faults.effects import DOOR_ACTIONS, Effect, Poison, at_door, door_effect
from datadist_sim.faults.plan import Call

if TYPE_CHECKING:
    from datadist_sim._world.world import SimWorld

Range = Tuple[int, int, int]
"""``(dst, src, nbytes)``, as ``ranges.Range``."""


def timeout_code(mode: Mode) -> LLMStatusCode:
    """The code a transfer that times out gives in ``mode``."""
    return LLMStatusCode.LLM_TIMEOUT if mode is Mode.CACHE_MANAGER else LLMStatusCode.LLM_WAIT_PROCESS_TIMEOUT


# -- a plain call, at the engine's door --------------------------------------------------------


def meet_door_faults(world: SimWorld, node: Optional[ClusterNode], op: str) -> None:
    """A cluster a fault killed fails the call (``LLM_FAILED``); then the rules that fire on it act:
    delays pass, a fail raises its code, a timeout waits out the node's ``sync_kv_timeout`` and raises
    the timeout code of its mode."""
    if not at_door(op):
        return
    cluster = None if node is None else node.cluster_id
    if node is not None and not node.alive and cluster in world.killed:
        raise SimError(LLMStatusCode.LLM_FAILED, f"cluster {cluster} was killed by a fault rule")
    if world.config.legacy_codes and node is not None and not node.alive:
        raise SimError(LLMStatusCode.LLM_ENGINE_FINALIZED, f"cluster {cluster} is finalized")
    effect = door_effect(world.faults.on_call(Call(op, cluster), DOOR_ACTIONS))
    for extra in effect.delays:
        world.elapse(extra)
    if effect.fail is not None:
        raise SimError(as_llm(effect.fail), f"injected by fault rule {effect.rule!r}")
    if effect.timeout:
        wait = 1.0 if node is None else node.settings.sync_kv_timeout_ms / 1000.0
        world.elapse(wait)
        # The operation's own timeout code in the caller's mode (``engine_codes``); a rule that says
        # ``any_code`` may time out a call that has none, and gets the mode's transfer timeout code.
        code = LLMStatusCode.LLM_TIMEOUT if node is None else timeout_code(node.mode)
        found = None if node is None else engine_codes.timeout_code(op, node.engine_mode)
        if isinstance(found, LLMStatusCode):
            code = found
        raise SimError(code, f"timed out (fault rule {effect.rule!r})")


# -- one remote cluster of a link call ---------------------------------------------------------


def link_outcome(effect: Effect, seconds: float) -> Tuple[Optional[LLMStatusCode], float]:
    """What ``effect`` does to one remote cluster's entry of a link call that would take ``seconds``:
    the code its entry gets (a ``fail``: nothing else happens), or None and how long the set-up or
    teardown takes now, each delay added in turn, ``inf`` when a timeout makes it never finish (the
    caller compares it with the call's timeout). Link calls return codes, never raise them."""
    if effect.fail is not None:
        return as_llm(effect.fail), seconds
    for extra in effect.delays:
        seconds += extra
    if effect.timeout:
        seconds = float("inf")
    return None, seconds


# -- a transfer --------------------------------------------------------------------------------


def meet_transfer_faults(
    world: SimWorld,
    node: ClusterNode,
    remote_id: int,
    effect: Effect,
    seconds: float,
    ranges: List[Range],
    remote_is_src: bool,
    land: Callable[[], None],
) -> float:
    """What the rules that fired on a transfer do to it, in ``faults.effects``' order: delays lengthen
    its ``seconds`` (returned), poison marks the memory it touches; then a fail raises its code, a cut
    breaks the link halfway through and times the transfer out, and a timeout times it out after
    ``land`` moved the bytes when the rule says they landed."""
    nbytes = sum(r[2] for r in ranges)
    for extra in effect.delays:
        seconds += extra
    if ranges:
        for poison in effect.poison:
            _poison(world, poison, ranges[0], remote_is_src)
    if effect.fail is not None:
        raise SimError(as_llm(effect.fail), f"injected by fault rule {effect.rule!r}")
    if effect.cut:
        half = min(seconds / 2, node.settings.sync_kv_timeout_ms / 1000.0)
        world.elapse(half)
        world.break_link(node.cluster_id, remote_id)
        time_out(world, node, remote_id, nbytes, waited_s=half)
    if effect.timeout:
        if effect.landed:
            land()
        world.record(
            node.cluster_id, "transfer.landed" if effect.landed else "transfer.lost", "ok", kind="event"
        )
        time_out(world, node, remote_id, nbytes)
    return seconds


def _poison(world: SimWorld, poison: Poison, first: Range, remote_is_src: bool) -> None:
    """A poison rule's UCE: the first bytes (at most 64) of the transfer's first range, on the side the
    rule names; the plan remembers the range, to heal it with the rule."""
    dst, src, size = first
    address = src if remote_is_src == poison.remote else dst
    span = max(min(size, 64), 1)
    world.memory.poison(address, span)
    world.faults.note_poison(poison.rule, address, span)


def time_out(
    world: SimWorld, node: ClusterNode, remote_id: int, nbytes: int, waited_s: float = 0.0
) -> NoReturn:
    """The transfer never completes: ``sync_kv_timeout`` passes, nothing more moves, and the link is
    left broken — the documented remedy for a timed-out transfer is to re-establish the link.

    A rank-table link under ``SimConfig(comm_timeout_keeps_link=True)`` stays usable instead, as the
    hixl code does: the timed-out stream is aborted and the comm entity kept (``comm_entity.cc``).
    """
    limit = node.settings.sync_kv_timeout_ms / 1000.0
    world.elapse(max(limit - waited_s, 0.0))
    with world.lock:
        peer = node.peers.get(remote_id)
        if peer is not None and not (peer.via_comm is not None and world.config.comm_timeout_keeps_link):
            peer.broken = True
    world.record(
        node.cluster_id, "transfer.timeout", timeout_code(node.mode).name, f"{nbytes} B", kind="event"
    )
    raise SimError(
        timeout_code(node.mode),
        f"transfer of {nbytes} B to/from {remote_id} did not complete in {limit:.3f} s",
    )
