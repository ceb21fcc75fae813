"""The connect pool of one hixl engine: ``connect_async`` / ``disconnect_async`` as tasks that run on
simulated time, and the status table the engine reports from.

The vendor's pool (hixl ``src/hixl/engine/connect_pool_executor.cc``) has a queue of tasks not yet
started (capacity 128 by default, ``:16-17``; a full queue refuses the submit, ``:83-102``), 2 workers
(``:39-51``), and runs at most one task per remote at a time, letting tasks for other remotes overtake a
blocked one (``:177-186``). The status table holds the latest intent per remote (``:104-126``):

- connect: ``CONNECT_PENDING`` at submit, ``CONNECTING`` when a worker takes it, then ``CONNECTED`` or
  ``CONNECT_FAILED`` (``hixl_impl.cc:150-157``); none of the last two is written while the entry says
  ``DISCONNECT_PENDING`` (a later disconnect was asked for);
- disconnect: ``DISCONNECT_PENDING``, ``DISCONNECTING``, then the entry goes (it reads ``NOT_CONNECT``,
  ``hixl_impl.cc:164-169``); neither of the last two is written while the entry says ``CONNECT_PENDING``.

Here nothing runs in a thread: the pool is a discrete-event model that ``advance(now)`` plays forward to
the world's time whenever the engine is looked at, so the same calls always see the same states. A
worker takes a task ``DISPATCH_S`` after its submit at the earliest (a hand-off between threads); how
long the task then runs is the engine's answer (``start``), and what it leaves behind is applied at its
end (``finish``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Callable, Dict, List, Optional

from datadist_sim._status import LLMStatusCode
from datadist_sim._world.errors import SimError

DISPATCH_S = 1e-5
"""Simulated time from a submit to the earliest moment a worker takes the task."""
DEFAULT_WORKERS = 2
DEFAULT_CAPACITY = 128
EXHAUSTED = LLMStatusCode.LLM_OUT_OF_MEMORY
"""The world's code for a full queue; the hixl face reports it as ``RESOURCE_EXHAUSTED``."""


class ConnectState(IntEnum):
    """The values of ``hixl.AsyncConnectStatus`` (``hixl_types.h:99-107``)."""

    NOT_CONNECT = 0
    CONNECT_PENDING = 1
    CONNECTING = 2
    CONNECTED = 3
    CONNECT_FAILED = 4
    DISCONNECT_PENDING = 5
    DISCONNECTING = 6


@dataclass
class Task:
    remote: str
    connect: bool
    timeout_s: float
    ready_at: float
    end: float = 0.0
    ok: bool = False
    """Set by ``start``: whether the connect succeeded (read at the end)."""
    found: Optional[object] = None
    """Set by ``start``: the engine that answered the connect."""


Start = Callable[[Task, float], float]
"""Run a task taken at the given time; returns how long it takes (sets ``task.ok`` for a connect)."""
Finish = Callable[[Task], None]


class ConnectPool:
    def __init__(self, workers: int = DEFAULT_WORKERS, capacity: int = DEFAULT_CAPACITY) -> None:
        self.workers = workers
        self.capacity = capacity
        self.queue: List[Task] = []
        self.running: List[Task] = []
        self.table: Dict[str, ConnectState] = {}
        self.at = 0.0
        self.closed = False

    def submit(self, remote: str, connect: bool, timeout_s: float, now: float) -> None:
        if self.closed:  # connect_pool_executor.cc:86-89
            raise SimError(LLMStatusCode.LLM_FAILED, "the connect pool is shut down")
        if len(self.queue) >= self.capacity:
            raise SimError(EXHAUSTED, f"the connect pool's queue holds {self.capacity} tasks already")
        state = ConnectState.CONNECT_PENDING if connect else ConnectState.DISCONNECT_PENDING
        self.table[remote] = state
        self.queue.append(Task(remote, connect, timeout_s, now + DISPATCH_S))

    def close(self) -> None:
        """``finalize``: the workers stop and queued tasks never run (``connect_pool_executor.cc:62-81``)."""
        self.closed = True
        self.queue.clear()
        self.running.clear()
        self.table.clear()

    def _next(self) -> tuple[float, float, Optional[Task]]:
        """The earliest end of a running task, and the earliest start of a waiting one (with it)."""
        end = min((t.end for t in self.running), default=float("inf"))
        if len(self.running) < self.workers:
            busy = {t.remote for t in self.running}
            for task in self.queue:
                if task.remote not in busy:
                    return end, max(task.ready_at, self.at), task
        return end, float("inf"), None

    def next_change(self) -> Optional[float]:
        """When the table may next change, if anything is in flight."""
        end, start, _ = self._next()
        when = min(end, start)
        return None if when == float("inf") else when

    def advance(self, now: float, start: Start, finish: Finish) -> None:
        """Play the pool forward to ``now``: ends before starts at the same time (a worker freed)."""
        while self.queue or self.running:
            end, begin, task = self._next()
            when = min(end, begin)
            if when > now:
                return
            self.at = when
            if end <= begin:
                done = min(self.running, key=lambda t: t.end)
                self.running.remove(done)
                self._finished(done)
                finish(done)
            else:
                assert task is not None
                self.queue.remove(task)
                task.end = when + start(task, when)
                self.running.append(task)
                self._write(task, ConnectState.CONNECTING if task.connect else ConnectState.DISCONNECTING)

    def _finished(self, task: Task) -> None:
        if task.connect:
            self._write(task, ConnectState.CONNECTED if task.ok else ConnectState.CONNECT_FAILED)
        elif self.table.get(task.remote) is not ConnectState.CONNECT_PENDING:
            self.table.pop(task.remote, None)

    def _write(self, task: Task, state: ConnectState) -> None:
        """The latest intent wins (``connect_pool_executor.cc:104-126``)."""
        blocked = ConnectState.DISCONNECT_PENDING if task.connect else ConnectState.CONNECT_PENDING
        if self.table.get(task.remote) is not blocked:
            self.table[task.remote] = state
