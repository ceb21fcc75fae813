"""The faults a plain call meets at the engine's door, applied to the world.

A plain call is any public call but a transfer or a link call (those meet their faults inside the
engine, per remote cluster: ``transfer``, ``links``). The face calls ``meet_door_faults`` once per
public call, after its own argument checks, where the real engine would start work. What the rules that
fired do is decided by ``faults.effects``; this module only lets the time pass and raises the code.
"""

from __future__ import annotations

from typing import Optional

from datadist_sim._status import LLMStatusCode
from datadist_sim._status_hixl import as_llm
from datadist_sim._world.cluster import ClusterNode
from datadist_sim._world.errors import SimError
from datadist_sim._world.transfer import timeout_code
from datadist_sim._world.world import SimWorld
from datadist_sim.faults import engine_codes
from datadist_sim.faults.effects import DOOR_ACTIONS, at_door, door_effect
from datadist_sim.faults.plan import Call


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
