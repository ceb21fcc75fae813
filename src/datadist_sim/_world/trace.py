"""A bounded record of what happened in a world, in simulated-time order, exportable as JSON lines.

Two kinds of event: ``call`` — one public API call, with its arguments in short and its outcome (a
status-code name, or the Python exception type) — and ``event`` — something the world did (a link cut,
a fault fired, a cluster killed). The same seed, scenario and client give a byte-identical export.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections import Counter, deque
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple, Union

from datadist_sim import _log
from datadist_sim._log import world_logger as _WORLD_LOG
from datadist_sim._outputs import open_output, write_output
from datadist_sim._world.clock import other_threads

_DEBUG = logging.DEBUG
PathOrFile = Union[str, Path, IO[str]]
CallObserver = Callable[[str, str, str], None]
"""Told of a public call as it is recorded: its ``op``, ``outcome`` and ``detail``."""

_observers: Tuple[CallObserver, ...] = ()
"""Called at every public call of every world (``observe_calls``); replaced whole, never mutated, so
``record_call`` reads it without a lock."""
_observers_lock = threading.Lock()


def observe_calls(callback: CallObserver) -> Callable[[], None]:
    """Have ``callback`` told of every public call recorded by any world from now on, before the bounded
    buffer can drop it (tools that count, like the error-path coverage report); returns the function
    that stops it. It is told the call's fields, not a ``TraceEvent``: making one per call costs more
    than the rest of a small pull's bookkeeping, and a fabric always counts. It runs on the
    calling thread, under no lock of the trace: keep it short, never record from it."""
    global _observers
    with _observers_lock:
        _observers = (*_observers, callback)

    def stop() -> None:
        global _observers
        with _observers_lock:
            _observers = tuple(o for o in _observers if o is not callback)

    return stop


_node_observers: Tuple[Callable[[str], None], ...] = ()
"""Told the engine mode of every instance any world brings up (``observe_nodes``)."""


def observe_nodes(callback: Callable[[str], None]) -> Callable[[], None]:
    """Have ``callback`` told the engine mode (``faults.engine_codes.EngineMode`` value) of every
    instance any world brings up from now on; returns the function that stops it."""
    global _node_observers
    with _observers_lock:
        _node_observers = (*_node_observers, callback)

    def stop() -> None:
        global _node_observers
        with _observers_lock:
            _node_observers = tuple(o for o in _node_observers if o is not callback)

    return stop


def node_up(mode: str) -> None:
    """An instance of engine mode ``mode`` came up (the world calls this once per ``init``)."""
    for observer in _node_observers:
        observer(mode)


def expand_trace_path(template: Union[str, Path], pid: Optional[int] = None) -> str:
    """A ``--trace`` argument with ``{pid}`` replaced by the writing process's id (``t-{pid}.jsonl``), so
    several processes given one argument each write their own file. Every command that takes ``--trace``
    expands it here, so they agree."""
    return str(template).replace("{pid}", str(os.getpid() if pid is None else pid))


def open_trace_sink(template: Union[str, Path], mode: str = "w") -> IO[str]:
    """The file a world streams its trace into: ``{pid}`` expanded, line-buffered so every event is on
    disk as soon as it is recorded (the trace is complete when the process, or a fabric serving it, has
    not yet exited, and is not cut to the in-memory buffer's size). A symbolic link at the name is
    refused (``UnsafeOutput``), never written through: traces go to shared directories."""
    return open_output(expand_trace_path(template), mode, line_buffered=True)


_FIELDS = ("time", "cluster_id", "op", "outcome", "detail", "args", "kind")
ArgsFormat = Callable[[Tuple[Any, ...], Optional[Dict[str, Any]]], str]
ClusterRef = Union[int, str]
"""Where an event happened: a cluster id, or the name of a ``hixl`` engine."""
_Call = Tuple[
    float, Optional[ClusterRef], str, str, str, ArgsFormat, Tuple[Any, ...], Optional[Dict[str, Any]]
]
"""A call's fields as ``Trace.record_call`` keeps them until the trace is read."""


class _ShownArgs:
    """A call's arguments, formatted the first time the event's ``args`` is read."""

    __slots__ = ("args", "kwargs", "shown")

    def __init__(self, shown: ArgsFormat, args: Tuple[Any, ...], kwargs: Optional[Dict[str, Any]]) -> None:
        self.shown, self.args, self.kwargs = shown, args, kwargs

    def __str__(self) -> str:
        return self.shown(self.args, self.kwargs)


def call_event(fields: _Call) -> TraceEvent:
    """The ``TraceEvent`` of a call kept as its fields."""
    time, cluster_id, op, outcome, detail, shown, args, kwargs = fields
    return TraceEvent(time, cluster_id, op, outcome, detail, _ShownArgs(shown, args, kwargs), "call")


class TraceEvent:
    """One call or world event: when, on which cluster, what, with which arguments, how it ended.

    ``args`` may be given as any object whose ``str()`` is the arguments in short (the face passes its
    arguments unformatted): it is formatted the first time someone reads it, so recording a call costs
    no formatting. Read-only after construction, compared and hashed by its fields.
    """

    __slots__ = ("_args", "cluster_id", "detail", "kind", "op", "outcome", "time")

    def __init__(
        self,
        time: float,
        cluster_id: Optional[ClusterRef],
        op: str,
        outcome: str,
        detail: str = "",
        args: object = "",
        kind: str = "event",
    ) -> None:
        self.time = time
        self.cluster_id = cluster_id
        self.op = op
        self.outcome = outcome
        self.detail = detail
        self._args = args
        self.kind = kind

    @property
    def args(self) -> str:
        args = self._args
        if type(args) is not str:
            args = self._args = str(args)
        return args

    def as_dict(self) -> Dict[str, object]:
        return {name: getattr(self, name) for name in _FIELDS}

    def _key(self) -> Tuple[object, ...]:
        return tuple(getattr(self, name) for name in _FIELDS)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TraceEvent) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in _FIELDS)
        return f"TraceEvent({inner})"

    def __reduce__(self) -> Tuple[object, Tuple[object, ...]]:
        return (TraceEvent, self._key())  # formatted: the face's argument objects never travel

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), sort_keys=True)

    def __str__(self) -> str:
        where = "-" if self.cluster_id is None else str(self.cluster_id)
        call = f"{self.op}({self.args})" if self.kind == "call" else self.op
        tail = f"  {self.detail}" if self.detail else ""
        return f"{self.time:12.6f}  {where:>6}  {call}  -> {self.outcome}{tail}"


class Trace:
    """Keeps the last ``maxlen`` events so memory stays bounded however long a run lasts; a ``sink``
    (an open text file) also receives every event as a JSON line, so nothing is lost in long runs."""

    def __init__(
        self, maxlen: int = 10_000, sink: Optional[IO[str]] = None, now: Callable[[], float] = float
    ) -> None:  # ``float()`` is 0.0: a trace without a clock stamps its calls at time 0
        self._now = now
        """Simulated time now (the world's clock), which ``record_call`` stamps a call with."""
        self._events: deque[Union[TraceEvent, _Call]] = deque(maxlen=maxlen)
        self._lock = threading.Lock()
        self._sink = sink
        self.total = 0
        self._kept_as_fields = False
        """Some calls are still kept as fields (``record_call``)."""

    def record(self, event: TraceEvent) -> None:
        with self._lock:
            self._events.append(event)
            self.total += 1
            if self._sink is not None:
                self._sink.write(event.to_json() + "\n")

    def record_call(
        self,
        cluster_id: Optional[ClusterRef],
        op: str,
        outcome: str,
        detail: str,
        shown: ArgsFormat,
        args: Tuple[Any, ...],
        kwargs: Optional[Dict[str, Any]],
    ) -> None:
        """One API call (``kind="call"``) now, its arguments shown by ``shown(args, kwargs)`` when read.
        Kept as its fields until someone reads the trace, which makes its ``TraceEvent`` then (one per
        call costs more than the rest of a small pull's bookkeeping); made at once when a sink or the
        DEBUG log (as ``SimWorld.record`` logs an event) is there to see it. Call observers are told its
        fields."""
        for observer in _observers:
            observer(op, outcome, detail)
        fields = (self._now(), cluster_id, op, outcome, detail, shown, args, kwargs)
        if self._sink is not None or _WORLD_LOG.isEnabledFor(_DEBUG):
            event = call_event(fields)
            self.record(event)
            _log.world_event(event)
            return
        if other_threads():
            with self._lock:
                self._keep(fields)
            return
        # alone: nothing reads or writes the trace meanwhile, so no lock (4 % of a small pull), and
        # ``_keep``'s three steps in line (the call would be another 1 %)
        self._events.append(fields)
        self.total += 1
        self._kept_as_fields = True

    def _keep(self, fields: _Call) -> None:
        self._events.append(fields)
        self.total += 1
        self._kept_as_fields = True

    def stream_to(self, sink: Optional[IO[str]]) -> None:
        """Stream further events to ``sink`` instead (a forked child's own ``{pid}`` file)."""
        with self._lock:
            self._sink = sink

    def __iter__(self) -> Iterator[TraceEvent]:
        with self._lock:
            made = [e if isinstance(e, TraceEvent) else call_event(e) for e in self._events]
            if self._kept_as_fields:  # keep what was made: each call's arguments are formatted once
                self._events = deque(made, maxlen=self._events.maxlen)
                self._kept_as_fields = False
            return iter(made)

    def __len__(self) -> int:
        return len(self._events)

    @property
    def dropped(self) -> int:
        """Events that fell out of the buffer (still in the sink, if there is one)."""
        return self.total - len(self._events)

    def calls(self) -> List[TraceEvent]:
        return [e for e in self if e.kind == "call"]

    def lines(self, last: Optional[int] = None) -> List[str]:
        """Readable lines of the last ``last`` events (all when None)."""
        events = list(self)
        if last is not None:
            events = events[-last:] if last > 0 else []
        return [str(e) for e in events]

    def to_jsonl(self, target: PathOrFile) -> int:
        """Write the buffered events as JSON lines to a path or an open text file; returns the count."""
        events = list(self)
        text = "".join(e.to_json() + "\n" for e in events)
        if isinstance(target, (str, Path)):
            write_output(target, text)
        else:
            target.write(text)
        return len(events)

    def summary(self) -> TraceSummary:
        return summarise(self)


def read_jsonl(source: PathOrFile) -> List[TraceEvent]:
    """The events of a JSON-lines trace written by ``to_jsonl`` or a sink."""
    text = Path(source).read_text(encoding="utf-8") if isinstance(source, (str, Path)) else source.read()
    return [TraceEvent(**json.loads(line)) for line in text.splitlines() if line.strip()]


@dataclass(frozen=True)
class TraceSummary:
    """Counts of a trace's calls: per outcome code, and per operation per outcome."""

    calls: int
    events: int
    per_code: Dict[str, int]
    per_op: Dict[str, Dict[str, int]]
    faults_fired: int

    def table(self) -> str:
        """A readable table: one row per operation, one column per outcome seen."""
        codes = sorted(self.per_code)
        if not codes:
            return "(no calls)"
        width = max([len("operation"), *(len(op) for op in self.per_op)])
        head = "  ".join(["operation".ljust(width), *codes])
        rows = [
            "  ".join([op.ljust(width), *(str(counts.get(c, 0)).rjust(len(c)) for c in codes)])
            for op, counts in sorted(self.per_op.items())
        ]
        total = "  ".join(["total".ljust(width), *(str(self.per_code[c]).rjust(len(c)) for c in codes)])
        return "\n".join([head, *rows, total])


def summarise(events: Iterable[TraceEvent]) -> TraceSummary:
    """Counts per code and per operation, over the calls of a trace (a ``Trace`` or read events)."""
    per_code: Counter[str] = Counter()
    per_op: Dict[str, Counter[str]] = {}
    calls = other = fired = 0
    for event in events:
        if event.kind != "call":
            other += 1
            fired += event.outcome == "fired"
            continue
        calls += 1
        per_code[event.outcome] += 1
        per_op.setdefault(event.op, Counter())[event.outcome] += 1
    return TraceSummary(
        calls=calls,
        events=other,
        per_code=dict(sorted(per_code.items())),
        per_op={op: dict(sorted(c.items())) for op, c in sorted(per_op.items())},
        faults_fired=fired,
    )
