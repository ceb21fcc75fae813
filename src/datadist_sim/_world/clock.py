"""Simulated time. The virtual clock is the default: a 5 s timeout costs no wall time."""

from __future__ import annotations

import _thread
import threading
import time
import weakref
from threading import get_ident
from time import monotonic as _wall  # bound now: timepatch replaces time.monotonic later
from typing import Callable, Dict, Optional, Protocol, Tuple

other_threads: Callable[[], int] = getattr(_thread, "_count", None) or (lambda: threading.active_count() - 1)
"""How many Python threads run besides the main one. Where the simulator asks "is the caller alone?"
(a pull's fast path, a clock that may jump at once) it asks this: the same answer as
``threading.active_count() == 1`` for every thread Python started (``_thread._count``'s docstring: every
thread started through ``_thread`` or ``threading`` and not yet finished), from one C call instead of a
locked Python function (about 3 % of a small pull). A thread a C library started and never
handed to Python is counted by neither."""

Wake = Callable[[], bool]
"""A waiter's early exit: true once what it waits for has happened (polled under the clock's lock)."""

AUTOJUMP_THRESHOLD_S = 0.05
"""Default real-time quiet period after which a thread that is not waiting on the clock stops holding
simulated time back (the idea of trio's ``autojump_threshold``)."""
_RECHECK_S = 0.002
"""How often a waiter looks again, in wall time, for threads that ended or went quiet."""

_first_seen: weakref.WeakKeyDictionary[threading.Thread, float] = weakref.WeakKeyDictionary()
"""When a virtual clock first saw each live thread: a thread that has made no call in a world yet holds
its time back for one threshold from then (it may be about to join), once per thread, not once per
world. Keyed by the thread object, since the OS reuses thread idents."""
_first_seen_lock = threading.Lock()


class Clock(Protocol):
    """What the world needs of time: read it, and let a duration pass. A clock may also have
    ``wait_until(when, wake)`` and ``touch()`` (``VirtualClock``, ``RealClock``); the world falls back
    to ``advance_to`` and to nothing for a clock without them."""

    def now(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...

    def advance_to(self, when: float) -> None: ...


class VirtualClock:
    """Time that moves only when the world says a duration has passed; it never goes backwards.

    Durations (``sleep``, ``advance_to``: the modelled cost of a transfer, a timeout, a link set-up)
    advance a shared counter instead of blocking, so simulated minutes of timeouts and backoff finish in
    microseconds of wall time, and the same calls always see the same times.

    Waits (``wait_until``: a poll of a communicator that is still PREPARING, a client's ``time.sleep``
    under ``timepatch``) are where threads meet. With one thread in the process a wait is a jump, as a
    duration is. With several, a waiting thread blocks until every other live thread is waiting on this
    clock too, or has done nothing with this world (no public call) for ``autojump_threshold`` seconds
    of wall time; then time jumps to the earliest deadline among the waiters, and that waiter wakes. So
    two threads that poll while they link see the simulated time the link needs, not the sum of their
    polls, whichever of them the OS runs first.
    """

    def __init__(self, start: float = 0.0, *, autojump_threshold: float = AUTOJUMP_THRESHOLD_S) -> None:
        if autojump_threshold < 0:
            raise ValueError(f"autojump_threshold must be >= 0, got {autojump_threshold}")
        self._now = float(start)
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self.autojump_threshold = autojump_threshold
        self._waiting: Dict[int, Tuple[float, Optional[Wake]]] = {}
        self._active: Dict[int, float] = {}
        """Wall time of each thread's last public call in this world (``touch``) or wait."""

    def now(self) -> float:
        return self._now

    def sleep(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"seconds must be >= 0, got {seconds}")
        with self._lock:
            self._now += seconds
            if self._waiting:
                self._changed.notify_all()

    def pass_alone(self, seconds: float) -> None:
        """``sleep`` for a caller that is the only thread (``other_threads()`` is 0): no one can wait on
        the clock or move it meanwhile, so it needs no lock (taking one is about 2,000 instructions, 4 % of
        a small pull). ``seconds`` >= 0."""
        self._now += seconds

    def advance_to(self, when: float) -> None:
        with self._lock:
            if when > self._now:
                self._now = when
                if self._waiting:
                    self._changed.notify_all()

    def touch(self) -> None:
        """The calling thread takes part in the world now (the face calls this at each public call)."""
        self._active[get_ident()] = _wall()

    def wait_until(self, when: float, wake: Optional[Wake] = None) -> None:
        """Block until simulated time reaches ``when`` (or ``wake()`` is true), letting it move on only
        as described in the class docstring. Never call it holding a lock another thread may need."""
        if not other_threads():  # nobody else could act meanwhile: time jumps at once
            if wake is None or not wake():
                self.advance_to(when)
            return
        me = get_ident()
        with self._changed:
            self._waiting[me] = (when, wake)
            self._changed.notify_all()  # one more thread waiting: others may now jump
            try:
                while self._now < when and not (wake is not None and wake()):
                    pause = self._held_back(me)
                    if pause > 0:
                        self._changed.wait(min(pause, _RECHECK_S))
                        continue
                    target = min(d for d, _ in self._waiting.values())
                    if target > self._now:
                        self._now = target
                        self._changed.notify_all()
            finally:
                del self._waiting[me]
                self._active[me] = _wall()

    def _held_back(self, me: int) -> float:
        """0 when every other live thread waits on this clock or is quiet; else how long (wall time)
        the busiest of them still holds time back. Under the lock."""
        wall = _wall()
        longest = 0.0
        for thread in threading.enumerate():
            ident = thread.ident
            if ident is None or ident == me:
                continue
            waiting = self._waiting.get(ident)
            if waiting is not None:
                deadline, wake = waiting
                if deadline > self._now and not (wake is not None and wake()):
                    continue  # truly waiting
                longest = max(longest, _RECHECK_S)  # about to wake: let it run first
                continue
            last = max(self._active.get(ident, 0.0), _first_seen_at(thread, wall))
            longest = max(longest, last + self.autojump_threshold - wall)
        return longest

    def __repr__(self) -> str:
        return f"VirtualClock(now={self._now:.6f})"


def _first_seen_at(thread: threading.Thread, wall: float) -> float:
    with _first_seen_lock:
        return _first_seen.setdefault(thread, wall)


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

    def wait_until(self, when: float, wake: Optional[Wake] = None) -> None:
        """Sleep in wall time until ``when``, looking at ``wake`` every few milliseconds."""
        while not (wake is not None and wake()):
            left = when - self.now()
            if left <= 0:
                return
            self.sleep(min(left, 0.01 * self.speed))

    def __repr__(self) -> str:
        return f"RealClock(speed={self.speed})"
