"""A bounded record of what happened in a world, in simulated-time order."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Iterator, Optional


@dataclass(frozen=True)
class TraceEvent:
    """One world event: when, on which cluster, what, and how it ended."""

    time: float
    cluster_id: Optional[int]
    op: str
    outcome: str
    detail: str = ""


class Trace:
    """Keeps the last ``maxlen`` events so memory stays bounded however long a run lasts."""

    def __init__(self, maxlen: int = 10_000) -> None:
        self._events: deque[TraceEvent] = deque(maxlen=maxlen)
        self.total = 0

    def record(self, event: TraceEvent) -> None:
        self._events.append(event)
        self.total += 1

    def __iter__(self) -> Iterator[TraceEvent]:
        return iter(list(self._events))

    def __len__(self) -> int:
        return len(self._events)
