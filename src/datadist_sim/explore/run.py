"""One explore run: a fresh world with a schedule's rules, the target called on it, and a verdict.

A run fails when the target raises, when it hangs (simulated time past ``sim_limit_s``, or wall time past
``wall_limit_s``, both noticed when the client next lets time pass or reads the clock), or when the
world's own books no longer balance afterwards (pool accounting, keys naming freed caches, bytes still
held once every instance is finalized). The verdict is plain data, so it crosses process boundaries.

A hang is noticed in the thread that moves or reads simulated time; a thread blocked outside the world
(a socket read, its own lock) cannot be interrupted from inside the process, so explore runs targets in
a process of their own (``worker``), which is stopped when the wall bound passes.

Each failure names *where* it happened: the innermost frame of the target's own code (not the
simulator's, not the standard library's) in the traceback, or for a hang the frame the client waited in.
Failures with the same signature and place are one bug (``RunResult.group``).
"""

from __future__ import annotations

import copy
import sysconfig
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from datadist_sim._world.surface import BlocksForever, SimConfig, SimWorld, VirtualClock, Wake
from datadist_sim.explore.schedule import Baseline, Schedule
from datadist_sim.faults.files import rule_from_spec
from datadist_sim.scenarios.client_run import describe, fake_installed

Target = Callable[[SimWorld], Any]
SIM_LIMIT_S = 600.0
WALL_LIMIT_S = 60.0
TRACE_TAIL = 20
TRACE_BEFORE = 5
"""Events shown before the first fault that fired; the rest of ``TRACE_TAIL`` is the client's reaction."""
_wall = time.perf_counter  # bound before any time patch a target may apply


class Hang(BaseException):
    """Raised out of the client's own call when a run passes its time bound. A ``BaseException``, so a
    client's ``except Exception`` retry loop does not swallow it."""


class BoundedClock(VirtualClock):
    """The virtual clock with a simulated and a wall deadline (checked when time moves or is read)."""

    def __init__(self, sim_limit_s: float, wall_limit_s: float) -> None:
        super().__init__()
        self.sim_limit_s = sim_limit_s
        self.wall_deadline = _wall() + wall_limit_s
        self.armed = True
        self._reads = 0

    def _check(self) -> None:
        if not self.armed:
            return
        if self._now > self.sim_limit_s:
            self.armed = False
            raise Hang(f"hang: simulated time passed {self.sim_limit_s:g} s")
        if _wall() > self.wall_deadline:
            self.armed = False
            raise Hang("hang: wall time bound passed")

    def now(self) -> float:
        self._reads += 1
        if self.armed and not self._reads & 0x3FF:
            self._check()
        return self._now

    def sleep(self, seconds: float) -> None:
        super().sleep(seconds)
        self._check()

    def advance_to(self, when: float) -> None:
        super().advance_to(when)
        self._check()

    def wait_until(self, when: float, wake: Optional[Wake] = None) -> None:
        super().wait_until(when, wake)
        self._check()


@dataclass
class Limits:
    sim_limit_s: float = SIM_LIMIT_S
    wall_limit_s: float = WALL_LIMIT_S
    config: Optional[SimConfig] = None


@dataclass
class RunResult:
    """What one run showed. ``signature`` names the failure (exception type and code, ``hang`` or
    ``invariant``) so shrinking keeps the same bug rather than any failure."""

    index: int
    seed: int
    schedule: Schedule
    failed: bool = False
    signature: str = ""
    failure: str = ""
    fired: Dict[str, int] = field(default_factory=dict)
    codes: Dict[str, int] = field(default_factory=dict)
    sim_time: float = 0.0
    trace_tail: List[str] = field(default_factory=list)
    """Trace lines around the first fault that fired (the last ones when none fired)."""
    where: str = ""
    """``file:line in function`` of the target's own frame that raised or waited (empty: not known)."""
    masked: Dict[str, int] = field(default_factory=dict)
    """Rules that matched a call but whose effect another rule on that call overrode, per action."""
    readings: Dict[str, bool] = field(default_factory=dict)
    """Whether the run fails under each reading of a contested engine rule (``readings``), once
    explore has replayed it under each; empty before."""
    baseline: Optional[Baseline] = None
    """What the run called, for the fault-free baseline run only."""
    fired_at: List[Optional[float]] = field(default_factory=list)
    """The simulated time each rule of the schedule first fired at (None: never), for the shrinker."""

    @property
    def group(self) -> str:
        """One bug: the same signature at the same place."""
        return f"{self.signature} at {self.where}" if self.where else self.signature


def signature_of(exc: BaseException) -> str:
    """``hang`` for a run past its bound and for a call the real engine never returns from (the client
    would hang there); else the exception's type, with its status code's name."""
    if isinstance(exc, (Hang, BlocksForever)):
        return "hang"
    code = getattr(exc, "status_code", None)
    name = getattr(code, "name", None)
    return type(exc).__name__ + (f"({name})" if isinstance(name, str) else "")


def config_of(limits: Limits, overrides: Optional[Dict[str, Any]] = None) -> Optional[SimConfig]:
    """The world's configuration for one run: ``limits.config`` (a copy) with ``overrides`` set."""
    if not overrides:
        return None if limits.config is None else copy.deepcopy(limits.config)
    config = copy.deepcopy(limits.config) if limits.config is not None else SimConfig()
    for name, value in overrides.items():
        if not hasattr(config, name):
            raise ValueError(f"config: SimConfig has no field {name!r}")
        setattr(config, name, value)
    return config


def run_one(
    target: Target,
    index: int,
    seed: int,
    schedule: Schedule,
    limits: Limits,
    *,
    overrides: Optional[Dict[str, Any]] = None,
    trace_sink: Optional[IO[str]] = None,
    want_baseline: bool = False,
) -> RunResult:
    """Run ``target`` once on a fresh world seeded ``seed`` with ``schedule`` in its plan, configured by
    ``limits.config`` with ``overrides`` (its whole trace streamed to ``trace_sink`` when one is given:
    ``explore --trace``). ``want_baseline``: also say what the run called (``RunResult.baseline``)."""
    clock = BoundedClock(limits.sim_limit_s, limits.wall_limit_s)
    world = SimWorld(seed=seed, clock=clock, config=config_of(limits, overrides), trace_sink=trace_sink)
    result = RunResult(index, seed, schedule)
    rules = [rule_from_spec(spec) for spec in schedule]
    with fake_installed(), world.activate():
        try:
            if rules:
                world.faults.add(*rules)
            target(world)
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt):
                raise
            result.failed, result.signature, result.failure = True, signature_of(exc), describe(exc)
            result.where = where_raised(exc)
        clock.armed = False
        result.fired_at = [world.faults.fired_at(rule) for rule in rules]
        events = list(world.trace) if result.failed or want_baseline else []
        broken = _cleanup(world) if result.signature != "hang" else []
    if broken and not result.failed:
        result.failed, result.signature, result.failure = True, "invariant", "; ".join(broken)
        events = list(world.trace)
    _summarise(world, result)
    if result.failed:
        result.trace_tail = excerpt(events)
    if want_baseline:
        result.baseline = Baseline.from_trace(events, result.sim_time, world.config.message_rtt_s)
    return result


def excerpt(events: Sequence[Any], size: int = TRACE_TAIL) -> List[str]:
    """Lines around the first fault that fired (a few before, the client's reaction after), or the last
    ``size`` events when no fault fired."""
    first = next(
        (i for i, e in enumerate(events) if e.outcome == "fired" and e.op.startswith("fault.")), None
    )
    if first is None:
        shown = list(events[-size:])
    else:
        start = max(0, first - TRACE_BEFORE)
        shown = list(events[start : start + size])
    return [str(e) for e in shown]


_OURS = str(Path(__file__).resolve().parents[1])
_STDLIB = tuple(
    str(Path(p).resolve()) for p in {sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"]}
)


def own_frame(frames: Iterable[Tuple[str, int, str]]) -> str:
    """The first of ``frames`` (innermost first: file, line, function) in the target's own code."""
    for filename, line, function in frames:
        if filename.startswith("<"):
            continue
        path = str(Path(filename).resolve())
        if path.startswith(_OURS) or (path.startswith(_STDLIB) and "site-packages" not in path):
            continue
        return f"{_short(path)}:{line} in {function}"
    return ""


def _short(path: str) -> str:
    try:
        return str(Path(path).relative_to(Path.cwd()))
    except ValueError:
        return path


def where_raised(exc: BaseException) -> str:
    """Where in the target's own code ``exc`` was raised (or, for a call into the simulator, made)."""
    frames = traceback.extract_tb(exc.__traceback__)
    return own_frame((f.filename, f.lineno or 0, f.name) for f in reversed(frames))


def _cleanup(world: SimWorld) -> List[str]:
    """Check the world's books, finalize every instance, and check nothing is still held."""
    from datadist_sim.llm_datadist.v2.llm_datadist import finalize_all

    broken = invariants(world)
    world.faults.clear()
    try:
        finalize_all(world)
    except Exception as exc:
        broken.append(f"finalize after the run raised {signature_of(exc)}: {exc}")
    if world.memory.backed_bytes:
        broken.append(f"{world.memory.backed_bytes} bytes still held after every instance was finalized")
    return broken


def invariants(world: SimWorld) -> List[str]:
    """The world's own books: each pool's live blocks add up to what it says it uses (within capacity),
    and each key names a live cache and a batch inside it."""
    broken: List[str] = []
    for cluster, store in sorted(world.caches.items()):
        for pool in (store.device_pool, store.host_pool):
            if pool is None:
                continue
            live = sum(pool.allocations().values())
            if live != pool.used or pool.used > pool.capacity:
                broken.append(f"cluster {cluster} {pool.name} pool: used {pool.used}, blocks {live}")
        for key, (cache_id, batch) in store.key_table.items():
            entry = store.caches.get(cache_id)
            if entry is None or batch >= max(1, entry.batch_size):
                broken.append(f"cluster {cluster}: key {key} names cache {cache_id} batch {batch}")
    return broken


def _summarise(world: SimWorld, result: RunResult) -> None:
    fired: Counter[str] = Counter()
    masked: Counter[str] = Counter()
    codes: Counter[str] = Counter()
    for event in world.trace:
        if event.kind == "call":
            codes[event.outcome] += 1
        elif event.op.startswith("fault."):
            if event.outcome == "fired":
                fired[event.op[len("fault.") :]] += 1
            elif event.outcome == "masked":
                masked[event.op[len("fault.") :]] += 1
    result.fired, result.masked, result.codes = dict(fired), dict(masked), dict(codes)
    result.sim_time = world.now()
