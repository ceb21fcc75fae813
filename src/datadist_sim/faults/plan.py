"""The fault plan: which rules fire on a call or at a moment of simulated time, and the world faults
they start and undo.

The plan decides; it does not act on calls (``effects`` turns the rules that fired on a call into what
happens to it). World actions (a kill, a partition, a capped pool) it starts and heals through
``WorldHooks``, the few things it needs of a world, which ``SimWorld`` has (``start_fault`` and
``heal_fault``, applied in ``_world/world_faults.py``): the plan sits on a floor under the world and
never imports it.

Randomness comes from the plan's own generator, seeded from the world's seed, so adding a rule never
changes the draws of the rest of the world; the same seed and the same calls fire the same rules.
"""

from __future__ import annotations

import contextlib
import random
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Protocol, Sequence, Tuple, Union

from datadist_sim.faults.effects import overridden
from datadist_sim.faults.engine_codes import OUTSIDE, EngineMode
from datadist_sim.faults.files import Scenario, load
from datadist_sim.faults.rules import (
    CALL_ACTIONS,
    CODED_ACTIONS,
    TIMED_ACTIONS,
    WORLD_ACTIONS,
    Fault,
    refusal,
)

ClusterRef = Union[int, str]
"""What a rule hits: a cluster id, or the name of a ``hixl`` engine."""

__all__ = ["Call", "FaultPlan", "PoisonHooks", "WorldHooks", "never_fired", "only_masked", "unfired_notes"]


class PoisonHooks(Protocol):
    """The memory a poison rule poisoned, healed with the rule (``WorldHooks.heal_fault``)."""

    def is_poisoned(self, address: int, nbytes: int) -> bool: ...


class WorldHooks(Protocol):
    """What the plan needs of the world it runs in (``SimWorld`` has each of these)."""

    @property
    def memory(self) -> PoisonHooks: ...

    def now(self) -> float: ...

    def engine_mode(self, cluster_id: Optional[ClusterRef]) -> Optional[EngineMode]: ...

    def record(
        self,
        cluster_id: Optional[ClusterRef],
        op: str,
        outcome: str,
        detail: str = "",
        *,
        args: object = "",
        kind: str = "event",
    ) -> None: ...

    def start_fault(self, rule: Fault) -> object:
        """A world action of ``rule`` fired: change the world; returns what ``heal_fault`` needs."""

    def heal_fault(self, rule: Fault, undo: object, poisoned: Sequence[Tuple[int, int]]) -> None:
        """``rule`` healed: undo what ``start_fault`` did (``undo``: what it returned; None when it
        never started) and clear the ``(address, nbytes)`` ranges a poison rule poisoned."""


@dataclass
class _State:
    seen: int = 0
    fired: int = 0
    masked: int = 0
    """Calls it matched and fired on, whose effect another rule on the same call overrode."""
    fired_at: Optional[float] = None
    healed: bool = False
    undo: List[Any] = field(default_factory=list)
    poisoned: Dict[Tuple[int, int], None] = field(default_factory=dict)
    """Ranges a poison rule poisoned (an ordered set), for healing them with the rule."""
    prune_at: int = 64
    refused: Dict[str, None] = field(default_factory=dict)
    """Why the rule did not fire on calls it matched (the caller's mode cannot give its code), once each."""


@dataclass(frozen=True)
class Call:
    """What a fault rule can see of a call."""

    op: str
    cluster: Optional[ClusterRef]
    remote: Optional[ClusterRef] = None
    req_id: Optional[int] = None
    force: bool = False
    """The call is the ``force=True`` form of its operation, whose codes may be fewer
    (``engine_codes.FORCE_OPS``): a coded rule is checked against that form's row."""


class FaultPlan:
    """The rules active in one world. Rules can be added and removed while the world runs."""

    def __init__(self, world: WorldHooks, seed: int) -> None:
        self._world = world
        self._rng = random.Random(f"faults:{seed}")
        self._lock = threading.RLock()
        self._rules: Dict[Fault, _State] = {}
        self.idle = True
        """No rule is loaded: no call or transfer can meet a fault. A plain attribute, kept as
        ``add`` and ``remove`` change the rules, since every transfer's fast path reads it."""
        self.fired_total = 0

    # -- managing rules -------------------------------------------------------------------------

    def add(self, *rules: Fault) -> Fault:
        """Add rules (world actions without ``op`` and without ``start_s`` fire at once); returns the last."""
        if not rules:
            raise ValueError("add() needs at least one rule")
        for rule in rules:
            if not isinstance(rule, Fault):
                raise TypeError(f"rule must be a Fault, got {type(rule).__name__}")
            self._check_caller_mode(rule)
        for rule in rules:
            with self._lock:
                self._rules[rule] = _State()
                self.idle = False
            self._world.record(None, "fault.add", "ok", repr(rule), kind="event")
        self.tick()
        return rules[-1]

    def _check_caller_mode(self, rule: Fault) -> None:
        """A call rule that names its caller, an instance already up: the caller's mode is known, so a
        code that mode cannot give on any of the rule's operations is a ValueError now."""
        if rule.action not in CODED_ACTIONS or rule.cluster is None or not rule.op:
            return
        mode = self._world.engine_mode(rule.cluster)
        if mode is None:
            return
        reasons = [refusal(rule, op, mode) for op in rule.op]
        if all(reasons):
            raise ValueError(f"cluster {rule.cluster}: {'; '.join(r for r in reasons if r)} ({OUTSIDE})")

    def refused(self, rule: Fault) -> List[str]:
        """Why ``rule`` did not fire on calls it matched: the callers' modes cannot give its code."""
        with self._lock:
            state = self._rules.get(rule)
            return [] if state is None else list(state.refused)

    def remove(self, rule: Fault) -> None:
        """Take a rule out; what it did to the world (a partition, a cap) is undone."""
        with self._lock:
            state = self._rules.pop(rule, None)
            self.idle = not self._rules
        if state is None:
            raise ValueError(f"{rule!r} is not in this plan")
        self._heal(rule, state)

    def clear(self) -> None:
        """Remove every rule."""
        for rule in self.rules:
            self.remove(rule)

    @contextlib.contextmanager
    def injected(self, *rules: Fault) -> Iterator[Tuple[Fault, ...]]:
        """``with world.faults.injected(rule, ...):`` the rules hold inside the block only."""
        self.add(*rules)
        try:
            yield rules
        finally:
            for rule in rules:
                if rule in self._rules:
                    self.remove(rule)

    def load(self, scenario: Union[str, Path, Scenario], *, rate: float = 1.0) -> List[Fault]:
        """Add every rule of a scenario (a bundled name, a TOML path, or a ``Scenario``)."""
        loaded = scenario if isinstance(scenario, Scenario) else load(scenario)
        rules: List[Fault] = loaded.rules(rate)
        if rules:
            self.add(*rules)
        return rules

    @property
    def rules(self) -> List[Fault]:
        with self._lock:
            return list(self._rules)

    def watches(self, op: str) -> bool:
        """Some rule watches calls of ``op`` (it may fire on one); no time-triggered rule is fired or
        healed by asking, as ``on_call`` does."""
        with self._lock:
            return any(rule.op is not None and op in rule.op for rule in self._rules)

    def fired(self, rule: Fault) -> int:
        """How many times ``rule`` has fired (masked calls not counted)."""
        with self._lock:
            state = self._rules.get(rule)
            return 0 if state is None else state.fired

    def fired_at(self, rule: Fault) -> Optional[float]:
        """The simulated time ``rule`` first fired (or was masked) at, or None."""
        with self._lock:
            state = self._rules.get(rule)
            return None if state is None else state.fired_at

    def masked(self, rule: Fault) -> int:
        """How many calls ``rule`` fired on while another rule on the same call overrode its effect."""
        with self._lock:
            state = self._rules.get(rule)
            return 0 if state is None else state.masked

    # -- evaluation -----------------------------------------------------------------------------

    def on_call(self, call: Call, actions: Sequence[str] = CALL_ACTIONS) -> List[Fault]:
        """The rules with one of ``actions`` that fire on this call (each counted once per call)."""
        self.tick()
        if not self._rules:
            return []
        now = self._world.now()
        fired: List[Fault] = []
        world_fired: List[Fault] = []
        refused: List[Tuple[Fault, str]] = []
        with self._lock:
            for rule, state in self._rules.items():
                if state.healed or rule.op is None or call.op not in rule.op:
                    continue
                wanted = rule.action in actions
                is_world = rule.action in WORLD_ACTIONS
                if not (wanted or (is_world and state.fired == 0)) or not _matches(rule, call, now):
                    continue
                if wanted and rule.action in CODED_ACTIONS and not rule.any_code:
                    # The caller's mode is known only now: a code it cannot give is not injected.
                    mode = self._world.engine_mode(call.cluster)
                    reason = None if mode is None else refusal(rule, call.op, mode, call.force)
                    if reason is not None:
                        if reason not in state.refused:
                            state.refused[reason] = None
                            refused.append((rule, reason))
                        continue
                state.seen += 1
                if not self._fires(rule, state.seen):
                    continue
                self._mark(rule, state, now)
                (world_fired if is_world else fired).append(rule)
        for rule, reason in refused:
            self._world.record(call.cluster, f"fault.{rule.action}", "refused", f"{rule.name}: {reason}")
        for rule in world_fired:
            self._apply_world(rule)
        masked = overridden(call.op, fired)
        if masked:
            with self._lock:
                for rule in masked:
                    state = self._rules[rule]
                    state.fired, state.masked = state.fired - 1, state.masked + 1
                    self.fired_total -= 1
        for rule in fired:
            outcome = "masked" if rule in masked else "fired"
            self._world.record(
                call.cluster, f"fault.{rule.action}", outcome, f"{call.op} {rule.name}", kind="event"
            )
        return fired

    def tick(self) -> None:
        """Fire time-triggered rules that are due and heal those whose time is over."""
        if not self._rules:
            return
        now = self._world.now()
        due: List[Fault] = []
        heal: List[Tuple[Fault, _State]] = []
        with self._lock:
            for rule, state in self._rules.items():
                if state.healed:
                    continue
                if state.fired and _expired(rule, state, now):
                    heal.append((rule, state))
                elif not state.fired and _timed(rule) and _in_window(rule, now):
                    self._mark(rule, state, now)
                    due.append(rule)
        for rule in due:
            self._apply_world(rule)
        for rule, state in heal:
            self._heal(rule, state)

    def next_due(self, after: float, until: float) -> Optional[float]:
        """The earliest simulated time in ``(after, until]`` at which a timed rule (``start_s``, no
        ``op``) fires, or None. A transfer running over that span stops there, so a world fault takes
        effect at its own moment, mid-transfer, not at the next call."""
        if not self._rules:
            return None
        with self._lock:
            times = [
                rule.start_s
                for rule, state in self._rules.items()
                if not state.fired
                and not state.healed
                and _timed(rule)
                and rule.start_s is not None
                and after < rule.start_s <= until
            ]
        return min(times, default=None)

    def hung(self, cluster_id: ClusterRef) -> bool:
        """``cluster_id`` answers nobody now (a hang rule holds)."""
        return self._holds(lambda rule: rule.action == "hang" and rule.cluster == cluster_id)

    def hang_ends(self, cluster_id: ClusterRef) -> Optional[float]:
        """While ``cluster_id`` is hung: when the last hang rule holding it heals, or None if one never
        does (no ``end_s`` and no ``heal_after_s``)."""
        ends: List[float] = []
        with self._lock:
            for rule, state in self._rules.items():
                if rule.action == "hang" and rule.cluster == cluster_id and state.fired and not state.healed:
                    end = _heals_at(rule, state)
                    if end is None:
                        return None
                    ends.append(end)
        return max(ends, default=None)

    def _holds(self, test: Callable[[Fault], bool]) -> bool:
        if not self._rules:
            return False
        self.tick()
        with self._lock:
            return any(s.fired and not s.healed and test(r) for r, s in self._rules.items())

    def partitioned(self, a: ClusterRef, b: ClusterRef) -> bool:
        """No traffic flows between ``a`` and ``b`` now (a partition, or either side hung)."""
        pair = {a, b}
        return self._holds(
            lambda rule: (
                (rule.action == "hang" and rule.cluster in pair)
                or (rule.action == "partition" and {rule.cluster, rule.remote} == pair)
            )
        )

    def coin(self) -> bool:
        """One seeded coin flip (an indeterminate timeout's "did the bytes land")."""
        with self._lock:
            return self._rng.random() < 0.5

    def _fires(self, rule: Fault, n: int) -> bool:
        if rule.nth is not None and n != rule.nth:
            return False
        if rule.first is not None and n > rule.first:
            return False
        if rule.after is not None and n <= rule.after:
            return False
        if rule.sequence and (n > len(rule.sequence) or not rule.sequence[n - 1]):
            return False
        return rule.probability >= 1.0 or self._rng.random() < rule.probability

    def _mark(self, rule: Fault, state: _State, now: float) -> None:
        state.fired += 1
        if state.fired_at is None:
            state.fired_at = now
        self.fired_total += 1

    # -- world actions --------------------------------------------------------------------------

    def _apply_world(self, rule: Fault) -> None:
        world = self._world
        world.record(rule.cluster, f"fault.{rule.action}", "fired", rule.name, kind="event")
        undo = world.start_fault(rule)
        state = self._rules.get(rule)
        if state is not None:
            state.undo.append(undo)

    def _heal(self, rule: Fault, state: _State) -> None:
        if state.healed:
            return
        state.healed = True
        if not state.fired:
            return
        world = self._world
        if state.undo or state.poisoned:  # it changed the world when it fired, or poisoned memory
            world.heal_fault(rule, state.undo[0] if state.undo else None, list(state.poisoned))
            state.poisoned.clear()
        world.record(rule.cluster, f"fault.{rule.action}", "healed", rule.name, kind="event")

    def note_poison(self, rule: Fault, address: int, nbytes: int) -> None:
        """Remember a range a poison rule poisoned, so healing the rule heals it.

        Bounded by the poison still live: memory that was freed since is clean again (the address
        space drops poison on free), so whenever the list doubles, ranges no longer poisoned leave it.
        """
        memory = self._world.memory
        with self._lock:
            state = self._rules.get(rule)
            if state is None:
                return
            state.poisoned[(address, nbytes)] = None
            if len(state.poisoned) >= state.prune_at:
                live = [r for r in state.poisoned if memory.is_poisoned(*r)]
                state.poisoned = dict.fromkeys(live)
                state.prune_at = max(64, 2 * len(live))


def _matches(rule: Fault, call: Call, now: float) -> bool:
    if rule.action in CALL_ACTIONS:
        if rule.cluster is not None and call.cluster != rule.cluster:
            return False
        if rule.remote is not None and call.remote != rule.remote:
            return False
    if rule.req_id is not None and call.req_id != rule.req_id:
        return False
    if rule.start_s is not None and now < rule.start_s:
        return False
    return rule.end_s is None or now < rule.end_s


def _timed(rule: Fault) -> bool:
    """The rule fires on simulated time alone (no ``op``)."""
    return rule.op is None and rule.action in TIMED_ACTIONS


def _in_window(rule: Fault, now: float) -> bool:
    return (rule.start_s is None or now >= rule.start_s) and (rule.end_s is None or now < rule.end_s)


def _heals_at(rule: Fault, state: _State) -> Optional[float]:
    """The simulated time a fired rule heals at, or None if it holds for good."""
    ends = [rule.end_s] if rule.end_s is not None else []
    if rule.heal_after_s is not None and state.fired_at is not None:
        ends.append(state.fired_at + rule.heal_after_s)
    return min(ends, default=None)


def _expired(rule: Fault, state: _State, now: float) -> bool:
    end = _heals_at(rule, state)
    return end is not None and now >= end


def never_fired(plan: FaultPlan) -> List[Fault]:
    """The plan's rules that have not fired once: a run that ends with any did not test what they
    describe (a window the run never reached, an ``op`` the client never calls, a cluster id that is
    not in the run), and its summary says so."""
    return [rule for rule in plan.rules if plan.fired(rule) == 0 and plan.masked(rule) == 0]


def only_masked(plan: FaultPlan) -> List[Fault]:
    """The plan's rules that matched calls but never acted: each time, another rule on the same call
    overrode them (a ``timeout`` after a ``fail`` on one pull). Reported as masked, not fired."""
    return [rule for rule in plan.rules if plan.fired(rule) == 0 and plan.masked(rule) > 0]


def unfired_notes(plan: FaultPlan) -> List[str]:
    """Each rule that never fired, as its repr, with why it did not where the plan knows: the callers
    it matched run a mode whose engine cannot give its code."""
    notes = []
    for rule in never_fired(plan):
        refused = plan.refused(rule)
        notes.append(repr(rule) + (f" (refused: {'; '.join(refused)})" if refused else ""))
    return notes
