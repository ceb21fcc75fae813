"""The fabric's threads: a pool that runs jobs (the poll's leader, calls, handshakes) on threads that
are reused, started only when every one is busy, and ended when idle."""

from __future__ import annotations

import collections
import logging
import threading
import time
from typing import Callable, Deque, List

_log = logging.getLogger("datadist_sim.fabric")


MAX_THREADS = 256
"""Most threads the pool runs for ordinary jobs; past it they wait for one to be free. A call may block
on another, so the pool grows with the calls in progress, but each connection has at most
``loop.MAX_IN_FLIGHT`` of those, and no process can make the fabric start threads without end (a
container's pid limit would then refuse one, and the fabric with it)."""


class WorkerPool:
    """Threads that run requests. An idle one is reused and a new one starts only when every one is busy
    (a call may block, even on another call, so a small fixed pool could deadlock), up to
    ``max_threads``; one idle for ``idle_s`` ends. Threads follow the calls in progress, not the
    connections or the requests served.

    ``submit`` never fails: a job the pool cannot start a thread for (at the bound, or the system
    refused one) waits for a thread to be free, and the refusal is logged. An urgent job (the poll's
    leader, on which every connection's replies depend) goes first and may pass the bound."""

    def __init__(self, name: str, idle_s: float = 30.0, max_threads: int = MAX_THREADS) -> None:
        self._name = name
        self._idle_s = idle_s
        self._max = max_threads
        self._jobs: Deque[Callable[[], None]] = collections.deque()
        self._cond = threading.Condition(threading.Lock())
        self._waiting = 0
        self._threads = 0
        self._started = 0
        self._workers: List[threading.Thread] = []
        self.refused = 0
        """Threads the system would not start (``status`` and the log show it)."""
        self.short = False
        """The system refused the last thread asked for: jobs may wait that no thread will take, so the
        poll's leader runs them itself (``run_waiting``) until a thread starts again."""
        self._told_full = False

    def submit(self, job: Callable[[], None], *, urgent: bool = False) -> None:
        with self._cond:
            if urgent:
                self._jobs.appendleft(job)
            else:
                self._jobs.append(job)
            if self._waiting >= len(self._jobs):
                self._cond.notify()
                return
            if self._threads >= self._max and not urgent:
                if not self._told_full:
                    self._told_full = True
                    _log.warning("fabric: all %d worker threads are busy; further calls wait", self._max)
                return
            self._threads += 1
            self._started += 1
            self._told_full = False
            self.short = False
            worker = threading.Thread(target=self._work, name=f"{self._name}-{self._started}", daemon=True)
            self._workers = [w for w in self._workers if w.is_alive()]
            self._workers.append(worker)
        try:
            worker.start()
        except RuntimeError as exc:  # the system's thread or pid limit: the job waits for a free thread
            with self._cond:
                self._threads -= 1
                self._workers.remove(worker)
                self.refused += 1
                self.short = True
                alive = self._threads
            _log.warning(
                "fabric: could not start a worker thread (%s); %d running, the job waits for one", exc, alive
            )

    def run_waiting(self, skip: Callable[[Callable[[], None]], bool]) -> None:
        """Run, on the calling thread, the jobs waiting while no thread is idle, except those ``skip``
        names (the leader's own job): with the system refusing threads, the leader must take the
        handshakes and calls no other thread will."""
        kept: List[Callable[[], None]] = []
        while True:
            with self._cond:
                if not self._jobs or self._waiting:
                    self._jobs.extendleft(reversed(kept))
                    return
                job = self._jobs.popleft()
            if skip(job):
                kept.append(job)
                continue
            try:
                job()
            except Exception:  # as a worker does: the job reports its own failures
                _log.exception("fabric worker: unexpected error")

    def close(self, timeout: float = 5.0) -> None:
        """Let every thread end as soon as it has no job, rather than after ``idle_s``, and wait up to
        ``timeout`` for them: a fabric served in-process (or a test's) leaves no thread behind, which
        would otherwise count as another thread of the process for 30 s (``clock.other_threads``). A job
        submitted later still runs, on a thread that ends with it."""
        with self._cond:
            self._idle_s = 0.0
            self._cond.notify_all()
            workers = list(self._workers)
        deadline = time.monotonic() + timeout
        for worker in workers:
            if worker is not threading.current_thread():
                worker.join(max(0.0, deadline - time.monotonic()))

    @property
    def threads(self) -> int:
        with self._cond:
            return self._threads

    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._jobs:
                    self._waiting += 1
                    try:
                        woken = self._cond.wait(self._idle_s)
                    finally:
                        self._waiting -= 1
                    if not woken and not self._jobs:
                        self._threads -= 1
                        return
                job = self._jobs.popleft()
            try:
                job()
            except Exception:  # a job reports its own failures; the thread lives on
                _log.exception("fabric worker: unexpected error")
