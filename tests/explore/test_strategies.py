"""``datadist_sim.strategies``: hypothesis strategies whose draws are valid rules of the asked kinds,
and which, used with ``@given``, find and shrink the planted bug like ``explore`` does."""

from __future__ import annotations

from typing import Dict, List

from hypothesis import HealthCheck, find, given, settings
from tests.explore import clients

from datadist_sim import Fault, SimWorld
from datadist_sim.explore import Limits
from datadist_sim.explore.run import run_one
from datadist_sim.scenarios import rule_from_spec
from datadist_sim.strategies import fault_rules, rule_specs, schedules


@given(spec=rule_specs(ops=["pull_cache", "link_clusters"], clusters=[1, 2]))
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_drawn_specs_are_valid_rules_on_the_given_ops(spec: Dict[str, object]) -> None:
    rule = rule_from_spec(spec)
    assert rule.op is not None
    assert set(rule.op) <= {"pull_cache", "link_clusters"}
    assert rule.nth != 0


@given(rule=fault_rules(kinds=["fail", "timeout"]))
@settings(max_examples=50, deadline=None)
def test_fault_rules_keep_to_the_given_kinds(rule: Fault) -> None:
    assert rule.action in ("fail", "timeout")


@given(rules=schedules(max_rules=2))
@settings(max_examples=50, deadline=None)
def test_schedules_are_lists_of_rules_a_world_accepts(rules: List[Fault]) -> None:
    assert len(rules) <= 2
    world = SimWorld(seed=0)
    if rules:
        world.faults.add(*rules)
    assert len(world.faults.rules) == len(rules)


def test_hypothesis_finds_and_shrinks_the_planted_bug_to_one_rule() -> None:
    def breaks(specs: List[Dict[str, object]]) -> bool:
        return run_one(clients.buggy, 0, 0, specs, Limits()).failed

    strategy = rule_specs(ops=["pull_cache"], clusters=[2], kinds=["timeout", "delay"]).map(lambda s: [s])
    found = find(strategy, breaks, settings=settings(max_examples=200, database=None, deadline=None))
    assert len(found) == 1
    assert found[0]["op"] == "pull_cache"


# -- codes from the engine's table ---------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(rule=fault_rules(ops=["pull_cache", "allocate_cache", "query_register_mem_status"], modes=["v2"]))
def test_drawn_codes_are_ones_the_engine_gives_in_the_modes_asked_for(rule: Fault) -> None:
    from datadist_sim.faults.engine_codes import EngineMode
    from datadist_sim.faults.rules import refusal

    assert rule.op is not None
    assert all(refusal(rule, op, EngineMode.V2) is None for op in rule.op)
