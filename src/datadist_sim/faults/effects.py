"""What the rules that fired on a call do to it: the one place where a rule's action becomes an effect.

The plan says which rules fired; the world applies the ``Effect`` returned here and decides nothing
itself. A call meets its faults in one of three places, each reading the same actions its own way:

- a plain call (not a transfer, not a link call), at the engine's door (``door_effect``): a ``delay``
  lets time pass, a ``fail`` fails the call, a ``timeout`` waits out the caller's timeout and fails it;
- a link call, per remote cluster (``link_effect``): a ``fail`` is that cluster's code, a ``delay``
  lengthens the set-up, a ``timeout`` makes the set-up never finish (a ``fail`` still wins);
- a transfer (``transfer_effect``): a ``poison`` marks memory the transfer touches, a ``delay``
  lengthens it, and the first ``fail``, ``cut_link`` or ``timeout`` ends it; rules after that one do
  nothing.

Rules act in the order they fired. The delays stay a sequence, applied one by one as before: time added
a rule at a time is not always the same float as the sum added at once, and the same seed must give
the same trace.
"""

from __future__ import annotations

from typing import Callable, List, NamedTuple, Optional, Sequence, Tuple

from datadist_sim._status_hixl import Code
from datadist_sim.faults.actions import DOOR_ACTIONS as DOOR_ACTIONS
from datadist_sim.faults.actions import LINK_OPS, TRANSFER_OPS
from datadist_sim.faults.rules import Fault


class Poison(NamedTuple):
    """A transfer finds memory it touches poisoned."""

    rule: Fault
    """The rule that poisoned it: the plan heals what it poisoned when the rule heals."""
    remote: bool
    """The peer's memory (the caller sees ``LLM_SUSPECT_REMOTE_ERROR``), else the caller's own."""


class Effect(NamedTuple):
    """What happens to one call because of the rules that fired on it. ``NONE``: nothing."""

    delays: Tuple[float, ...] = ()
    """Seconds the call takes longer, one entry per delay rule, in order."""
    poison: Tuple[Poison, ...] = ()
    """Memory a transfer finds poisoned, in order, before anything ends it."""
    fail: Optional[Code] = None
    """The call fails with this code (a link call: that cluster's entry)."""
    timeout: bool = False
    """The call times out (a link call: its set-up never finishes)."""
    landed: bool = False
    """A transfer that times out delivered its bytes all the same (a pull consumed the key)."""
    cut: bool = False
    """The link is cut halfway through the transfer, which times out."""
    rule: str = ""
    """The name of the rule that ended the call, for its message."""


NONE = Effect()


def at_door(op: str) -> bool:
    """Whether ``op`` meets its faults at the engine's door: transfers and link calls meet theirs
    inside the engine, per remote cluster."""
    return op not in TRANSFER_OPS and op not in LINK_OPS


def door_effect(fired: Sequence[Fault]) -> Effect:
    """A plain call: each delay lets time pass in turn, until a fail or a timeout ends the call."""
    if not fired:
        return NONE
    delays: List[float] = []
    for rule in fired:
        if rule.action == "delay":
            delays.append(rule.seconds)
        elif rule.action == "fail" and rule.code is not None:
            return Effect(tuple(delays), fail=rule.code, rule=rule.name)
        elif rule.action == "timeout":
            return Effect(tuple(delays), timeout=True, rule=rule.name)
    return Effect(tuple(delays))


def link_effect(fired: Sequence[Fault]) -> Effect:
    """A link call's set-up to one remote cluster: the first fail is its code; else delays lengthen the
    set-up and a timeout makes it endless."""
    if not fired:
        return NONE
    delays: List[float] = []
    timeout = False
    for rule in fired:
        if rule.action == "fail" and rule.code is not None:
            return Effect(fail=rule.code, rule=rule.name)
        if rule.action == "delay":
            delays.append(rule.seconds)
        elif rule.action == "timeout":
            timeout = True
    return Effect(tuple(delays), timeout=timeout)


def transfer_effect(fired: Sequence[Fault], coin: Callable[[], bool]) -> Effect:
    """A transfer: poisons and delays in turn, until a fail, a cut or a timeout ends it. A timeout whose
    ``landed`` is None flips ``coin`` (the plan's seeded coin) here, only when it is the rule that ends
    the transfer, as the world asks for the effect only of a transfer that still runs."""
    if not fired:
        return NONE
    delays: List[float] = []
    poison: List[Poison] = []
    for rule in fired:
        if rule.action == "fail" and rule.code is not None:
            return Effect(tuple(delays), tuple(poison), fail=rule.code, rule=rule.name)
        if rule.action == "delay":
            delays.append(rule.seconds)
        elif rule.action == "poison":
            poison.append(Poison(rule, rule.side == "remote"))
        elif rule.action == "cut_link":
            return Effect(tuple(delays), tuple(poison), cut=True, rule=rule.name)
        elif rule.action == "timeout":
            landed = rule.landed if rule.landed is not None else coin()
            return Effect(tuple(delays), tuple(poison), timeout=True, landed=landed, rule=rule.name)
    return Effect(tuple(delays), tuple(poison))


def overridden(op: str, fired: Sequence[Fault]) -> List[Fault]:
    """Rules that fired on one call of ``op`` but whose effect another rule on that call overrode (the
    functions above drop them): after the rule that ends a plain call or a transfer, and beside the
    ``fail`` that decides a link call. The plan reports them as masked, not fired."""
    if len(fired) < 2:
        return []
    if op in LINK_OPS:
        decider = next((r for r in fired if r.action == "fail" and r.code is not None), None)
        return [] if decider is None else [r for r in fired if r is not decider]
    ends = ("fail", "timeout") if at_door(op) else ("fail", "cut_link", "timeout")
    for n, rule in enumerate(fired):
        if rule.action in ends and (rule.action != "fail" or rule.code is not None):
            return list(fired[n + 1 :])
    return []
