"""What fired rules do to a call (``faults.effects``), and the faults package's floor under the world."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import List

from datadist_sim import Fault
from datadist_sim._status import LLMStatusCode
from datadist_sim.faults import effects
from datadist_sim.faults.effects import NONE, door_effect, link_effect, transfer_effect

S = LLMStatusCode
FAULTS = Path(effects.__file__).resolve().parent


class _Coin:
    """A coin that counts its flips."""

    def __init__(self, side: bool) -> None:
        self.side = side
        self.flips = 0

    def __call__(self) -> bool:
        self.flips += 1
        return self.side


def test_no_rule_fired_is_no_effect_at_any_of_the_three_places() -> None:
    coin = _Coin(True)
    assert door_effect([]) is NONE
    assert link_effect([]) is NONE
    assert transfer_effect([], coin) is NONE
    assert coin.flips == 0


def test_a_transfer_keeps_poisons_and_delays_before_the_fail_that_ends_it_and_nothing_after() -> None:
    poison = Fault.poison(side="local", op="pull_cache")
    fired = [
        poison,
        Fault.delay(0.25, op="pull_cache"),
        Fault.fail(S.LLM_LINK_BUSY, op="pull_cache", name="busy"),
        Fault.delay(9.0, op="pull_cache"),
        Fault.timeout(landed=None, op="pull_cache"),
    ]
    coin = _Coin(True)
    effect = transfer_effect(fired, coin)
    assert [(p.rule, p.remote) for p in effect.poison] == [(poison, False)]
    assert effect.delays == (0.25,)
    assert (effect.fail, effect.rule, effect.timeout) == (S.LLM_LINK_BUSY, "busy", False)
    assert coin.flips == 0


def test_a_transfer_timeout_flips_the_coin_only_when_it_is_the_rule_that_ends_the_transfer() -> None:
    coin = _Coin(True)
    effect = transfer_effect([Fault.timeout(landed=None, op="pull_cache")], coin)
    assert (effect.timeout, effect.landed, coin.flips) == (True, True, 1)
    cut = transfer_effect(
        [Fault.cut_link(op="pull_cache"), Fault.timeout(landed=None, op="pull_cache")], coin
    )
    assert (cut.cut, cut.timeout, coin.flips) == (True, False, 1)
    fixed = transfer_effect([Fault.timeout(landed=True, op="pull_cache")], coin)
    assert (fixed.landed, coin.flips) == (True, 1)


def test_a_link_fail_wins_over_an_earlier_timeout_and_delays_after_a_timeout_still_count() -> None:
    timeout = Fault.timeout(op="link_clusters")
    failed = link_effect([timeout, Fault.fail(S.LLM_LINK_FAILED, op="link_clusters")])
    assert (failed.fail, failed.timeout) == (S.LLM_LINK_FAILED, False)
    slow: List[Fault] = [Fault.delay(0.5, op="link_clusters"), timeout, Fault.delay(0.25, op="link_clusters")]
    effect = link_effect(slow)
    assert (effect.delays, effect.timeout, effect.fail) == ((0.5, 0.25), True, None)


def test_a_plain_call_keeps_the_delays_before_its_timeout_and_none_after() -> None:
    fired = [
        Fault.delay(0.5, op="allocate_cache"),
        Fault.timeout(op="allocate_cache", name="slow"),
        Fault.delay(2.0, op="allocate_cache"),
    ]
    effect = door_effect(fired)
    assert (effect.delays, effect.timeout, effect.rule, effect.fail) == ((0.5,), True, "slow", None)


def _imported(path: Path) -> List[str]:
    names: List[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module is not None and node.level == 0:
            names.append(node.module)
        elif isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
    return names


def test_the_faults_package_imports_of_this_project_only_itself_and_the_status_codes() -> None:
    ours = {
        f"{path.name}: {name}"
        for path in sorted(FAULTS.glob("*.py"))
        for name in _imported(path)
        if name.split(".")[0] == "datadist_sim"
        and name not in ("datadist_sim._status", "datadist_sim._status_hixl")
        and not name.startswith("datadist_sim.faults")
    }
    assert ours == set()
