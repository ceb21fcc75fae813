"""``datadist-sim run SCENARIO --client package.module:function``: the user's own client under a scenario.

The function has the shape ``explore`` takes: it receives the world, already active, with the fake
installed as ``llm_datadist`` and the scenario's rules already in the world's plan; it drives the user's
client and raises (``AssertionError`` or any exception) when a property the user cares about is violated.
The run fails exactly when it raises. The report says what the client saw: codes per operation, faults
fired, and each rule that never fired (a fault the client was never put through).
"""

from __future__ import annotations

import contextlib
import time
import traceback
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Union

from datadist_sim._install import installed
from datadist_sim._world.surface import SimConfig, SimWorld, TraceSummary, open_trace_sink, summarise
from datadist_sim.faults.files import Scenario
from datadist_sim.faults.plan import only_masked, unfired_notes

ClientFunction = Callable[[SimWorld], Any]


@dataclass
class ClientReport:
    """What one run of the user's client showed."""

    scenario: str
    client: str
    seed: int
    failure: str
    faults_fired: int
    simulated_s: float
    wall_s: float
    summary: TraceSummary
    never_fired: List[str] = field(default_factory=list)
    masked: List[str] = field(default_factory=list)
    """Rules that matched calls but whose effect another rule on the same call always overrode."""
    trace_text: str = ""

    @property
    def passed(self) -> bool:
        return not self.failure

    def codes(self) -> Dict[str, int]:
        return dict(self.summary.per_code)

    def as_dict(self) -> Dict[str, Any]:
        return {
            "scenario": self.scenario,
            "client": self.client,
            "seed": self.seed,
            "passed": self.passed,
            "failure": self.failure,
            "faults_fired": self.faults_fired,
            "simulated_s": round(self.simulated_s, 6),
            "wall_s": round(self.wall_s, 4),
            "codes": self.summary.per_code,
            "per_op": self.summary.per_op,
            "never_fired": self.never_fired,
            "masked": self.masked,
        }

    def render(self) -> str:
        verdict = "passed" if self.passed else "RAISED"
        head = (
            f"scenario {self.scenario} (seed {self.seed}), client {self.client}: {verdict}; "
            f"{self.faults_fired} fault(s) fired; simulated {self.simulated_s:.3f} s in {self.wall_s:.3f} s "
            "of wall time"
        )
        unfired = [f"rule never fired: {rule}" for rule in self.never_fired]
        unfired += [f"rule masked (matched, but another rule on the same call won): {r}" for r in self.masked]
        failure = ["", "the client raised:", self.failure] if self.failure else []
        return "\n".join([head, "", "codes seen per operation:", self.summary.table(), *unfired, *failure])


def fake_installed() -> contextlib.ExitStack:
    """The fake as ``llm_datadist`` until the returned stack closes; importing the user's module inside
    it gives their top-level ``import llm_datadist`` the fake. A real package is shadowed without a
    warning: the user asked for the simulator."""
    stack = contextlib.ExitStack()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", r"datadist_sim\.install\(\) shadows the real llm_datadist")
        stack.enter_context(installed(force=True))
    return stack


def describe(exc: BaseException) -> str:
    """The exception and the innermost frames, where the user's property was checked."""
    lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
    return "".join(lines[-6:]).rstrip()


def run_client(
    function: ClientFunction,
    scenario: Scenario,
    *,
    name: str = "client",
    seed: int = 0,
    rate: float = 1.0,
    trace_path: Optional[Union[str, Path]] = None,
    keep_trace: bool = False,
) -> ClientReport:
    """Call ``function(world)`` on a fresh world seeded ``seed`` with the scenario's rules in its plan and
    the fake installed as ``llm_datadist``; every instance it leaves is finalized afterwards."""
    from datadist_sim.llm_datadist.v2.llm_datadist import finalize_all

    wall = time.perf_counter()
    sink = open_trace_sink(trace_path) if trace_path is not None else None
    size = 1_000_000 if keep_trace else 10_000
    world = SimWorld(seed=seed, config=SimConfig(), trace_size=size, trace_sink=sink)
    failure = ""
    try:
        with fake_installed(), world.activate():
            world.faults.load(scenario, rate=rate)
            try:
                function(world)
            except Exception as exc:  # the property the user checks failed (or their client broke)
                failure = describe(exc)
            finally:
                finalize_all(world)
    finally:
        if sink is not None:
            sink.close()
    return ClientReport(
        scenario=scenario.name,
        client=name,
        seed=seed,
        failure=failure,
        faults_fired=world.faults.fired_total,
        simulated_s=world.now(),
        wall_s=time.perf_counter() - wall,
        summary=summarise(world.trace),
        never_fired=unfired_notes(world.faults),
        masked=[repr(rule) for rule in only_masked(world.faults)],
        trace_text="".join(e.to_json() + "\n" for e in world.trace) if keep_trace else "",
    )
