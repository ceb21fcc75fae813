"""One explore run: a fresh world with a schedule's rules, the target called on it, and a verdict.

A run fails when the target raises, when it hangs (simulated time past ``sim_limit_s``, or wall time past
``wall_limit_s``, both noticed when the client next lets time pass or reads the clock), or when the
world's own books no longer balance afterwards (pool accounting, keys naming freed caches, bytes still
held once every instance is finalized). The verdict is plain data, so it crosses process boundaries.

A hang is noticed in the thread that moves or reads simulated time; a thread blocked on its own lock,
never touching the world, cannot be interrupted from inside the process.
"""

from __future__ import annotations

import copy
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import IO, Any, Callable, Dict, List, Optional

from datadist_sim._world.clock import VirtualClock, Wake
from datadist_sim._world.world import SimConfig, SimWorld
from datadist_sim.explore.schedule import Schedule
from datadist_sim.faults.files import rule_from_spec
from datadist_sim.scenarios.client_run import describe, fake_installed

Target = Callable[[SimWorld], Any]
SIM_LIMIT_S = 600.0
WALL_LIMIT_S = 60.0
TRACE_TAIL = 20
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


def signature_of(exc: BaseException) -> str:
    if isinstance(exc, Hang):
        return "hang"
    code = getattr(exc, "status_code", None)
    name = getattr(code, "name", None)
    return type(exc).__name__ + (f"({name})" if isinstance(name, str) else "")


def run_one(
    target: Target,
    index: int,
    seed: int,
    schedule: Schedule,
    limits: Limits,
    world_out: Any = None,
    trace_sink: Optional[IO[str]] = None,
) -> RunResult:
    """Run ``target`` once on a fresh world seeded ``seed`` with ``schedule`` in its plan (its whole
    trace streamed to ``trace_sink`` when one is given: ``explore --trace``)."""
    clock = BoundedClock(limits.sim_limit_s, limits.wall_limit_s)
    config = None if limits.config is None else copy.deepcopy(limits.config)
    world = SimWorld(seed=seed, clock=clock, config=config, trace_sink=trace_sink)
    result = RunResult(index, seed, schedule)
    rules = [rule_from_spec(spec) for spec in schedule]
    if world_out is not None:
        world_out.append(world)
    with fake_installed(), world.activate():
        try:
            if rules:
                world.faults.add(*rules)
            target(world)
        except BaseException as exc:
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            result.failed, result.signature, result.failure = True, signature_of(exc), describe(exc)
        clock.armed = False
        tail = world.trace.lines(last=TRACE_TAIL)
        broken = _cleanup(world) if result.signature != "hang" else []
    if broken and not result.failed:
        result.failed, result.signature, result.failure = True, "invariant", "; ".join(broken)
    _summarise(world, result)
    if result.failed:
        result.trace_tail = tail
    return result


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
    codes: Counter[str] = Counter()
    for event in world.trace:
        if event.kind == "call":
            codes[event.outcome] += 1
        elif event.outcome == "fired" and event.op.startswith("fault."):
            fired[event.op[len("fault.") :]] += 1
    result.fired, result.codes, result.sim_time = dict(fired), dict(codes), world.now()
