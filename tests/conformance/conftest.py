"""Fresh worlds for the status-code matrix: default fidelity, and the opt-in legacy codes."""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator

import pytest

from datadist_sim import SimConfig, SimWorld, VirtualClock
from datadist_sim.llm_datadist.v2.llm_datadist import finalize_all


@contextlib.contextmanager
def fresh(clock: object = None, **config: object) -> Iterator[SimWorld]:
    """A new activated world; on exit every instance is finalized and no memory is left behind."""
    cfg = SimConfig(pause_wall_limit_s=0.05, **config)  # type: ignore[arg-type]
    w = SimWorld(seed=5, clock=clock, config=cfg)  # type: ignore[arg-type]
    with w.activate():
        yield w
    finalize_all(w)
    assert not w.nodes
    assert w.memory.backed_bytes == 0


@pytest.fixture
def world() -> Iterator[SimWorld]:
    with fresh() as w:
        yield w


@pytest.fixture
def legacy_world() -> Iterator[SimWorld]:
    with fresh(legacy_codes=True) as w:
        yield w


class GateClock(VirtualClock):
    """A virtual clock whose next duration, once ``arm()``-ed, blocks until ``release`` is set.

    A transfer lets its time pass outside the world lock, so the call that hits the gate is held
    mid-transfer, in flight, while the test makes a second call: concurrency without wall-time races.
    """

    def __init__(self) -> None:
        super().__init__()
        self._armed = False
        self.entered = threading.Event()
        self.release = threading.Event()

    def arm(self) -> None:
        self._armed = True

    def sleep(self, seconds: float) -> None:
        if self._armed:
            self._armed = False
            self.entered.set()
            if not self.release.wait(30):  # hang guard only; the test sets it
                raise RuntimeError("gate never released")
        super().sleep(seconds)
