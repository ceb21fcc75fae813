"""The fault plan: rules that make calls fail, slow down or time out, and faults of the world itself.

A rule has a *trigger* (which calls it watches, and which of those it fires on) and an *action*.
Call actions (``fail``, ``delay``, ``timeout``, ``cut_link``, ``poison``) act on the call that fired
them. World actions (``partition``, ``hang``, ``kill``, ``cap_pool``, ``exhaust_pool``) change the world
when they fire: at a matching call when ``op`` is given, else as soon as simulated time reaches
``start_s``; ``heal_after_s`` later (or at ``end_s``) they are undone, except ``kill``.

Randomness comes from the plan's own generator, seeded from the world's seed, so adding a rule never
changes the draws of the rest of the world; the same seed and the same calls fire the same rules.
"""

from __future__ import annotations

import contextlib
import random
import threading
from contextvars import ContextVar, Token
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from datadist_sim._status import LLMStatusCode
from datadist_sim._world.fault_checks import check_rule, closest

if TYPE_CHECKING:
    from pathlib import Path

    from datadist_sim._world.world import SimWorld
    from datadist_sim.scenarios import Scenario

CALL_ACTIONS = ("fail", "delay", "timeout", "cut_link", "poison")
WORLD_ACTIONS = ("partition", "hang", "kill", "cap_pool", "exhaust_pool")
ACTIONS = CALL_ACTIONS + WORLD_ACTIONS
_TIMED = (*WORLD_ACTIONS, "cut_link")
"""Actions that can fire on simulated time alone (no ``op``)."""
TRANSFER_OPS = frozenset(
    {"pull_cache", "pull_blocks", "push_cache", "push_blocks", "transfer_cache_async", "transfer_cache"}
)
"""Calls whose faults act inside the transfer engine (time, bytes, the link), not at the call's door."""
LINK_OPS = frozenset({"link_clusters", "unlink_clusters"})
"""Calls whose faults act per remote cluster, on that cluster's entry in the returned list."""

Ops = Union[str, Sequence[str], None]

_CURRENT_OP: ContextVar[Optional[str]] = ContextVar("datadist_sim_op", default=None)


def enter_op(op: str) -> Token[Optional[str]]:
    """The face says which public operation it is serving (rules match on it)."""
    return _CURRENT_OP.set(op)


def leave_op(token: Token[Optional[str]]) -> None:
    _CURRENT_OP.reset(token)


def current_op(default: str) -> str:
    """The public operation being served (``pull_cache`` ...), or ``default`` outside one."""
    op = _CURRENT_OP.get()
    return default if op is None else op


@dataclass(eq=False)
class Fault:
    """One rule of a fault plan. Build it with the constructors (``Fault.fail(...)`` and so on).

    Matching: ``op`` (API method name, or several), ``cluster`` (the calling cluster; for world
    actions the cluster they hit), ``remote`` (the peer of a transfer or link), ``req_id`` (of the key a
    transfer names), ``start_s``/``end_s`` (a window of simulated time). Of the matching calls, it fires
    on the ``nth`` only, the ``first`` N, those ``after`` the Nth, or as ``sequence`` says call by call
    (True fires); then with ``probability``.
    """

    action: str
    code: Optional[LLMStatusCode] = None
    seconds: float = 0.0
    landed: Optional[bool] = False
    nbytes: Optional[int] = None
    side: str = "remote"
    """For ``poison``: whose memory the matched transfer finds poisoned, the peer's or the caller's."""
    op: Optional[Tuple[str, ...]] = None
    cluster: Optional[int] = None
    remote: Optional[int] = None
    req_id: Optional[int] = None
    nth: Optional[int] = None
    first: Optional[int] = None
    after: Optional[int] = None
    sequence: Tuple[bool, ...] = ()
    probability: float = 1.0
    start_s: Optional[float] = None
    end_s: Optional[float] = None
    heal_after_s: Optional[float] = None
    name: str = ""

    def __post_init__(self) -> None:
        self.op = _ops(self.op)
        check_rule(self, ACTIONS)  # a typo'd op, nth=0, a negative window: ValueError naming the field
        if self.action == "fail" and self.code is None:
            raise ValueError("a fail rule needs a status code")
        if self.action in ("partition", "hang", "kill", "cap_pool", "exhaust_pool") and self.cluster is None:
            raise ValueError(f"a {self.action} rule needs a cluster")
        if self.action == "partition" and self.remote is None:
            raise ValueError("a partition rule needs two clusters (cluster and remote)")
        if self.action == "cap_pool" and (self.nbytes is None or self.nbytes < 0):
            raise ValueError(f"a cap_pool rule needs nbytes >= 0, got {self.nbytes!r}")
        self.sequence = tuple(bool(x) for x in self.sequence)
        if not self.name:
            self.name = self.action

    # -- constructors ---------------------------------------------------------------------------

    @classmethod
    def fail(cls, code: Union[LLMStatusCode, int, str], *, op: Ops = None, **when: object) -> Fault:
        """The call fails with ``code``; nothing else changes (a link call reports it per cluster)."""
        return cls("fail", code=to_code(code), op=_ops(op), **when)  # type: ignore[arg-type]

    @classmethod
    def delay(cls, seconds: float, *, op: Ops = None, **when: object) -> Fault:
        """The call takes ``seconds`` longer; a transfer or link pushed past its timeout times out."""
        return cls("delay", seconds=seconds, op=_ops(op), **when)  # type: ignore[arg-type]

    @classmethod
    def timeout(cls, *, landed: Optional[bool] = False, op: Ops = None, **when: object) -> Fault:
        """The call times out. ``landed``: False (the default) the bytes did not arrive; True they did,
        and a pull consumed the Prompt's key as a successful one does (a retry gets
        ``LLM_KV_CACHE_NOT_EXIST``); None a seeded coin decides. A client cannot tell which from the code."""
        return cls("timeout", landed=landed, op=_ops(op), **when)  # type: ignore[arg-type]

    @classmethod
    def cut_link(cls, *, op: Ops = None, **when: object) -> Fault:
        """Cut the link: mid-transfer when ``op`` names a transfer (the destination keeps its old bytes,
        the call times out), else at ``start_s``; later calls fail until the link is made again."""
        return cls("cut_link", op=_ops(op), **when)  # type: ignore[arg-type]

    @classmethod
    def poison(cls, *, side: str = "remote", op: Ops = None, **when: object) -> Fault:
        """A UCE in the memory the matched transfer touches, on the peer's ``side`` ("remote": the caller
        sees ``LLM_SUSPECT_REMOTE_ERROR``) or its own ("local": ``LLM_DEVICE_MEM_ERROR``); healed after
        ``heal_after_s``."""
        return cls("poison", side=side, op=_ops(op), **when)  # type: ignore[arg-type]

    @classmethod
    def partition(cls, a: int, b: int, **when: object) -> Fault:
        """No traffic between ``a`` and ``b``: link set-up fails, transfers time out."""
        return cls("partition", cluster=a, remote=b, **when)  # type: ignore[arg-type]

    @classmethod
    def hang(cls, cluster: int, **when: object) -> Fault:
        """``cluster`` stops answering its peers: their calls to it time out."""
        return cls("hang", cluster=cluster, **when)  # type: ignore[arg-type]

    @classmethod
    def kill(cls, cluster: int, **when: object) -> Fault:
        """The process of ``cluster`` dies: its memory is gone, its peers see link failures."""
        return cls("kill", cluster=cluster, **when)  # type: ignore[arg-type]

    @classmethod
    def cap_pool(cls, cluster: int, nbytes: int, **when: object) -> Fault:
        """The device pool of ``cluster`` gives out at most ``nbytes`` in use."""
        return cls("cap_pool", cluster=cluster, nbytes=nbytes, **when)  # type: ignore[arg-type]

    @classmethod
    def exhaust_pool(cls, cluster: int, **when: object) -> Fault:
        """The device pool of ``cluster`` gives out nothing more than it has already given."""
        return cls("exhaust_pool", cluster=cluster, **when)  # type: ignore[arg-type]

    def copy(self, **changes: object) -> Fault:
        """This rule with some fields changed (e.g. a scenario's probability scaled)."""
        return replace(self, **changes)  # type: ignore[arg-type]

    def __repr__(self) -> str:
        shown = []
        for name, spec in self.__dataclass_fields__.items():
            value = getattr(self, name)
            default = () if name == "sequence" else spec.default
            if name == "action" or value == default or (name == "name" and value == self.action):
                continue
            text = value.name if isinstance(value, LLMStatusCode) else repr(value)
            shown.append(f"{name}={text}")
        return f"Fault.{self.action}({', '.join(shown)})"


def _ops(op: Ops) -> Optional[Tuple[str, ...]]:
    if op is None:
        return None
    return (op,) if isinstance(op, str) else tuple(op)


def to_code(code: Union[LLMStatusCode, int, str]) -> LLMStatusCode:
    """A status code from a member (of either package: a ``llm_datadist_v1`` code is read by its name), its
    integer value or its name (with or without ``LLM_``)."""
    if isinstance(code, LLMStatusCode):
        return code
    if isinstance(code, Enum):
        code = code.name
    if isinstance(code, str):
        name = code if code.startswith("LLM_") else f"LLM_{code}"
        try:
            return LLMStatusCode[name.upper()]
        except KeyError:
            hint = closest(name.upper(), LLMStatusCode.__members__)
            raise ValueError(f"unknown status code {code!r}{hint}") from None
    return LLMStatusCode(code)


@dataclass
class _State:
    seen: int = 0
    fired: int = 0
    fired_at: Optional[float] = None
    healed: bool = False
    undo: List[Any] = field(default_factory=list)
    poisoned: Dict[Tuple[int, int], None] = field(default_factory=dict)
    """Ranges a poison rule poisoned (an ordered set), for healing them with the rule."""
    prune_at: int = 64


@dataclass(frozen=True)
class Call:
    """What a fault rule can see of a call."""

    op: str
    cluster: Optional[int]
    remote: Optional[int] = None
    req_id: Optional[int] = None


class FaultPlan:
    """The rules active in one world. Rules can be added and removed while the world runs."""

    def __init__(self, world: SimWorld) -> None:
        self._world = world
        self._rng = random.Random(f"faults:{world.seed}")
        self._lock = threading.RLock()
        self._rules: Dict[Fault, _State] = {}
        self.fired_total = 0

    # -- managing rules -------------------------------------------------------------------------

    def add(self, *rules: Fault) -> Fault:
        """Add rules (world actions without ``op`` and without ``start_s`` fire at once); returns the last."""
        if not rules:
            raise ValueError("add() needs at least one rule")
        for rule in rules:
            if not isinstance(rule, Fault):
                raise TypeError(f"rule must be a Fault, got {type(rule).__name__}")
            with self._lock:
                self._rules[rule] = _State()
            self._world.record(None, "fault.add", "ok", repr(rule), kind="event")
        self.tick()
        return rules[-1]

    def remove(self, rule: Fault) -> None:
        """Take a rule out; what it did to the world (a partition, a cap) is undone."""
        with self._lock:
            state = self._rules.pop(rule, None)
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
        from datadist_sim.scenarios import Scenario, load

        loaded = scenario if isinstance(scenario, Scenario) else load(scenario)
        rules: List[Fault] = loaded.rules(rate)
        if rules:
            self.add(*rules)
        return rules

    @property
    def rules(self) -> List[Fault]:
        with self._lock:
            return list(self._rules)

    @property
    def idle(self) -> bool:
        """No rule is loaded: no call or transfer can meet a fault (the transfers' fast path)."""
        return not self._rules

    def fired(self, rule: Fault) -> int:
        """How many times ``rule`` has fired."""
        with self._lock:
            state = self._rules.get(rule)
            return 0 if state is None else state.fired

    # -- evaluation -----------------------------------------------------------------------------

    def on_call(self, call: Call, actions: Sequence[str] = CALL_ACTIONS) -> List[Fault]:
        """The rules with one of ``actions`` that fire on this call (each counted once per call)."""
        self.tick()
        if not self._rules:
            return []
        now = self._world.now()
        fired: List[Fault] = []
        world_fired: List[Fault] = []
        with self._lock:
            for rule, state in self._rules.items():
                if state.healed or rule.op is None or call.op not in rule.op:
                    continue
                wanted = rule.action in actions
                is_world = rule.action in WORLD_ACTIONS
                if not (wanted or (is_world and state.fired == 0)) or not _matches(rule, call, now):
                    continue
                state.seen += 1
                if not self._fires(rule, state.seen):
                    continue
                self._mark(rule, state, now)
                (world_fired if is_world else fired).append(rule)
        for rule in world_fired:
            self._apply_world(rule)
        for rule in fired:
            self._world.record(
                call.cluster, f"fault.{rule.action}", "fired", f"{call.op} {rule.name}", kind="event"
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
                elif not state.fired and rule.op is None and rule.action in _TIMED and _in_window(rule, now):
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
                and rule.op is None
                and rule.action in _TIMED
                and rule.start_s is not None
                and after < rule.start_s <= until
            ]
        return min(times, default=None)

    def hung(self, cluster_id: int) -> bool:
        """``cluster_id`` answers nobody now (a hang rule holds)."""
        return self._holds(lambda rule: rule.action == "hang" and rule.cluster == cluster_id)

    def _holds(self, test: Callable[[Fault], bool]) -> bool:
        if not self._rules:
            return False
        self.tick()
        with self._lock:
            return any(s.fired and not s.healed and test(r) for r, s in self._rules.items())

    def partitioned(self, a: int, b: int) -> bool:
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
        state = self._rules.get(rule)
        if rule.action == "kill":
            assert rule.cluster is not None
            world.kill(rule.cluster)
        elif rule.action == "cut_link":
            if rule.cluster is not None and rule.remote is not None:
                world.break_link(rule.cluster, rule.remote)
        elif rule.action in ("cap_pool", "exhaust_pool"):
            assert rule.cluster is not None
            previous = world.cap_pool(rule.cluster, rule.nbytes)
            if state is not None:
                state.undo.append(previous)

    def _heal(self, rule: Fault, state: _State) -> None:
        if state.healed:
            return
        state.healed = True
        if not state.fired:
            return
        world = self._world
        if rule.action in ("cap_pool", "exhaust_pool") and state.undo and rule.cluster is not None:
            world.restore_pool(rule.cluster, state.undo[0])
        elif rule.action == "poison":
            for address, nbytes in state.poisoned:
                world.memory.heal(address, nbytes)
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


def _in_window(rule: Fault, now: float) -> bool:
    return (rule.start_s is None or now >= rule.start_s) and (rule.end_s is None or now < rule.end_s)


def _expired(rule: Fault, state: _State, now: float) -> bool:
    if rule.end_s is not None and now >= rule.end_s:
        return True
    return (
        rule.heal_after_s is not None
        and state.fired_at is not None
        and now >= state.fired_at + rule.heal_after_s
    )
