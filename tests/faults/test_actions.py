"""The fault actions have one home (``faults.actions``): every list of actions is read from it, and every
action in it is applied somewhere, so a new action cannot be listed and then silently do nothing."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, List, Optional, Tuple

from datadist_sim import strategies
from datadist_sim._world import world_faults
from datadist_sim.explore import schedule
from datadist_sim.faults import actions, effects, plan, rules
from datadist_sim.faults.effects import NONE, door_effect, link_effect, transfer_effect
from datadist_sim.faults.rules import Fault

_EXAMPLES = {
    "fail": {"code": "LLM_NOT_YET_LINK"},
    "delay": {"seconds": 1.0},
    "cap_pool": {"nbytes": 0},
    "partition": {"remote": 2},
}


def _rule(action: str, **extra: Any) -> Fault:
    spec = {"action": action, **_EXAMPLES.get(action, {}), **extra}
    if action in actions.WORLD_ACTIONS:
        spec.setdefault("cluster", 1)
    from datadist_sim.faults.files import rule_from_spec

    return rule_from_spec(spec)


def test_every_list_of_actions_is_the_tables() -> None:
    assert rules.ACTIONS is actions.ACTIONS
    assert rules.CALL_ACTIONS is actions.CALL_ACTIONS
    assert rules.WORLD_ACTIONS is actions.WORLD_ACTIONS
    assert effects.DOOR_ACTIONS is actions.DOOR_ACTIONS
    assert schedule.CALL_KINDS is actions.CALL_ACTIONS
    assert schedule.WORLD_KINDS is actions.WORLD_ACTIONS
    assert strategies.ACTIONS is actions.ACTIONS
    assert set(actions.ACTIONS) == set(actions.CALL_ACTIONS) | set(actions.WORLD_ACTIONS)


def test_every_call_action_has_an_effect_where_its_calls_meet_it() -> None:
    for name in actions.CALL_ACTIONS:
        row = actions.ACTION_TABLE[name]
        rule = _rule(name, op="pull_cache")
        assert transfer_effect([rule], lambda: False) != NONE, name
        if row.at_door:
            assert door_effect([rule]) != NONE, name
            assert link_effect([rule]) != NONE, name


class _Pool:
    """A device pool that records the limits it is given."""

    def __init__(self, calls: List[Tuple[str, Tuple[Any, ...]]]) -> None:
        self.calls = calls
        self.limit: Optional[int] = None
        self.used = 0

    def set_limit(self, nbytes: Optional[int]) -> None:
        self.calls.append(("set_limit", (nbytes,)))


class _World:
    """The hooks a plan needs, applied where the world applies world actions (``world_faults``) to a
    world that records what was done to it."""

    def __init__(self) -> None:
        self.calls: List[Tuple[str, Tuple[Any, ...]]] = []
        self.memory = self
        self.caches = {1: SimpleNamespace(device_pool=_Pool(self.calls))}

    def heal(self, address: Optional[int] = None, nbytes: int = 1) -> None:
        self.calls.append(("heal", (address, nbytes)))

    def is_poisoned(self, address: int, nbytes: int) -> bool:
        return False

    def now(self) -> float:
        return 0.0

    def engine_mode(self, cluster_id: Optional[int]) -> None:
        return None

    def record(self, *args: Any, **kwargs: Any) -> None:
        pass

    def start_fault(self, rule: Fault) -> object:
        return world_faults.start_world_fault(self, rule)  # type: ignore[arg-type]

    def heal_fault(self, rule: Fault, undo: object, poisoned: Any) -> None:
        world_faults.heal_world_fault(self, rule, undo, poisoned)  # type: ignore[arg-type]

    def kill(self, cluster_id: int) -> None:
        self.calls.append(("kill", (cluster_id,)))

    def break_link(self, a: int, b: int) -> None:
        self.calls.append(("break_link", (a, b)))


def test_every_world_action_changes_the_world_when_it_fires() -> None:
    for name in actions.WORLD_ACTIONS:
        world = _World()
        faults = plan.FaultPlan(world, seed=0)  # type: ignore[arg-type]
        rule = faults.add(_rule(name))  # no op, no start_s: fires at once
        assert world.calls or faults.hung(1) or faults.partitioned(1, 2), name
        if actions.ACTION_TABLE[name].heals and world.calls:
            done = len(world.calls)
            faults.remove(rule)
            assert len(world.calls) > done, f"{name} is undone when it heals"


def test_a_transfer_only_action_applies_to_transfers_only() -> None:
    assert actions.applies_to("poison", "pull_cache")
    assert not actions.applies_to("cut_link", "allocate_cache")
    assert actions.applies_to("fail", "allocate_cache")
