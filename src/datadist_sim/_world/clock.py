"""Simulated time. The virtual clock is the default: a 5 s timeout costs no wall time."""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    """What the world needs of time: read it, and let a duration pass."""

    def now(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...

    def advance_to(self, when: float) -> None: ...


class VirtualClock:
    """Time that moves only when the world says a duration has passed; it never goes backwards.

    Durations advance a shared counter instead of blocking, so simulated minutes of timeouts and
    backoff finish in microseconds of wall time, and the same calls always see the same times.
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = float(start)
        self._lock = threading.Lock()

    def now(self) -> float:
        return self._now

    def sleep(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"seconds must be >= 0, got {seconds}")
        with self._lock:
            self._now += seconds

    def advance_to(self, when: float) -> None:
        with self._lock:
            if when > self._now:
                self._now = when

    def __repr__(self) -> str:
        return f"VirtualClock(now={self._now:.6f})"


class RealClock:
    """Wall time, optionally sped up: ``speed=10`` lets ten simulated seconds pass per wall second."""

    def __init__(self, speed: float = 1.0) -> None:
        if speed <= 0:
            raise ValueError(f"speed must be > 0, got {speed}")
        self.speed = speed
        self._start = time.monotonic()

    def now(self) -> float:
        return (time.monotonic() - self._start) * self.speed

    def sleep(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"seconds must be >= 0, got {seconds}")
        time.sleep(seconds / self.speed)

    def advance_to(self, when: float) -> None:
        delay = when - self.now()
        if delay > 0:
            self.sleep(delay)

    def __repr__(self) -> str:
        return f"RealClock(speed={self.speed})"
