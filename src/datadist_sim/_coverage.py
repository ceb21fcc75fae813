"""Error-path coverage: which status codes reached client code, from which operations, and which codes
of the status table never did. ``pytest --datadist-coverage`` and ``datadist-sim exec --coverage`` both
print ``CodeCoverage.report()``.

Nothing is recorded twice: the face already traces every public call with its outcome (``api_call`` in
``llm_datadist/_engine.py``), and a ``CodeCoverage`` started here sees each such trace event as it is
recorded, in every world of the process (``observe_calls``), before the bounded trace buffer can
drop it. One call counts once for each distinct code it gave the client: the code it raised or returned, plus
the per-cluster codes ``link_clusters``/``unlink_clusters`` return and the per-config results of
``CacheTask.get_results``. Outcomes that are Python exceptions (``TypeError``, ``ValueError``...) are
counted apart: they are not status codes.

Calls of the ``hixl`` engine API (``hixl.<method>``) give hixl's own codes (``SUCCESS``, ``TIMEOUT`` ...,
``HixlCode``); they are counted apart, in a table of their own, against the codes the ``hixl-engine``
rows of the code table give.

It also notes the engine mode of every instance brought up (``observe_nodes``), and measures the
codes received against those the real engine can give in those modes (``faults.engine_codes``): a code
no operation can give in ``v2`` mode is no gap of a ``v2`` client's tests.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Set

from datadist_sim._status import LLMStatusCode
from datadist_sim._status_hixl import HixlCode
from datadist_sim._status_table import STATUS_TABLE
from datadist_sim._world.surface import TraceEvent, observe_calls, observe_nodes
from datadist_sim.faults import engine_codes

__all__ = ["CodeCoverage"]

_CODES: Set[str] = set(LLMStatusCode.__members__)
_HIXL_CODES: Set[str] = set(HixlCode.__members__)
_HIXL = engine_codes.EngineMode.HIXL_ENGINE
_SUCCESS = LLMStatusCode.LLM_SUCCESS.name
_OPS_SHOWN = 4


class CodeCoverage:
    """Counts of the status codes client code received, per code and per operation; mergeable, so the
    counts of several worlds, tests or processes add up."""

    def __init__(self) -> None:
        self.calls = 0
        self.per_code: Counter[str] = Counter()
        self.per_op: Dict[str, Counter[str]] = {}
        self.exceptions: Counter[str] = Counter()
        self.modes: Counter[str] = Counter()
        """Instances brought up, per engine mode (``engine_codes.EngineMode`` value)."""
        self.hixl_calls = 0
        self.hixl_per_op: Dict[str, Counter[str]] = {}
        """Per hixl code name (``TIMEOUT``), the ``hixl.<method>`` calls that gave it."""
        self._lock = threading.Lock()
        self._stop: Optional[Callable[[], None]] = None
        self._stop_nodes: Optional[Callable[[], None]] = None

    # -- counting ------------------------------------------------------------------------------------

    def observe(self, event: TraceEvent) -> None:
        """Count one trace event if it is a public call (world events are not what the client saw)."""
        if event.kind == "call":
            self.count(event.op, event.outcome, event.detail)

    def count(self, op: str, outcome: str, detail: str) -> None:
        """Count one public call: ``op`` gave the client ``outcome`` (and the codes named in ``detail``)."""
        if op.startswith("hixl."):
            with self._lock:
                self.hixl_calls += 1
                if outcome in _HIXL_CODES:
                    self.hixl_per_op.setdefault(outcome, Counter())[op] += 1
                else:
                    self.exceptions[outcome] += 1
            return
        codes = received(outcome, detail)
        with self._lock:
            self.calls += 1
            if not codes:
                self.exceptions[outcome] += 1
            for code in codes:
                self.per_code[code] += 1
                ops = self.per_op.get(code)
                if ops is None:
                    ops = self.per_op[code] = Counter()
                ops[op] += 1

    def note_mode(self, mode: str) -> None:
        """An instance of engine mode ``mode`` came up."""
        with self._lock:
            self.modes[mode] += 1

    def start(self) -> CodeCoverage:
        """Count every call of every world from now on (until ``stop``); returns self."""
        if self._stop is None:
            self._stop = observe_calls(self.count)
            self._stop_nodes = observe_nodes(self.note_mode)
        return self

    def stop(self) -> None:
        if self._stop is not None:
            self._stop()
            self._stop = None
        if self._stop_nodes is not None:
            self._stop_nodes()
            self._stop_nodes = None

    def reset(self) -> None:
        """Forget the counts (a forked child starts from none; its parent keeps its own)."""
        self.calls = 0
        self.per_code.clear()
        self.per_op.clear()
        self.exceptions.clear()
        self.modes.clear()
        self.hixl_calls = 0
        self.hixl_per_op.clear()
        self._lock = threading.Lock()  # the parent's lock may have been held at the fork

    def merge(self, other: CodeCoverage) -> None:
        """Add ``other``'s counts to these (another process's, read back with ``load``)."""
        with self._lock:
            self.calls += other.calls
            self.per_code.update(other.per_code)
            self.exceptions.update(other.exceptions)
            self.modes.update(other.modes)
            self.hixl_calls += other.hixl_calls
            for code, ops in other.hixl_per_op.items():
                self.hixl_per_op.setdefault(code, Counter()).update(ops)
            for code, ops in other.per_op.items():
                self.per_op.setdefault(code, Counter()).update(ops)

    # -- what the counts say ---------------------------------------------------------------------------

    def failure_codes(self) -> List[str]:
        """The distinct codes other than ``LLM_SUCCESS`` that reached client code, in table order."""
        return [
            info.name for info in STATUS_TABLE.values() if info.name != _SUCCESS and self.per_code[info.name]
        ]

    def used_modes(self) -> List[engine_codes.EngineMode]:
        """The ``llm_datadist`` engine modes of the instances brought up while counting, in table order
        (hixl engines are counted apart: ``hixl_report``)."""
        return [mode for mode in engine_codes.modes() if self.modes[mode.value] and mode is not _HIXL]

    # -- hixl codes --------------------------------------------------------------------------------

    def hixl_received(self) -> List[str]:
        """The hixl codes other than ``SUCCESS`` that reached client code, in value order."""
        return [code.name for code in HixlCode if code.name != "SUCCESS" and self.hixl_per_op.get(code.name)]

    def hixl_reachable(self) -> List[str]:
        """The hixl codes other than ``SUCCESS`` the engine gives some ``hixl.<method>``."""
        codes = engine_codes.union(engine_codes.OPS, [_HIXL])
        return [code.name for code in HixlCode if code in codes and code is not HixlCode.SUCCESS]

    def hixl_report(self) -> str:
        """The hixl table: per code received, how often and from which operations; the codes the engine
        gives that none did; the verdict."""
        lines = [f"hixl codes that reached client code, over {self.hixl_calls} hixl API calls:"]
        rows = [
            [f"hixl.{code.name}", str(int(code)), str(sum(ops.values())), _ops_text(ops)]
            for code in HixlCode
            for ops in [self.hixl_per_op.get(code.name)]
            if ops
        ]
        lines.append(_table(rows, ["code", "integer", "calls", "operations"]) if rows else "  (none)")
        reachable, got = self.hixl_reachable(), self.hixl_received()
        missing = [name for name in reachable if name not in got]
        if missing:
            shown = ", ".join(f"hixl.{name}" for name in missing)
            lines.append(f"hixl codes the engine gives never exercised ({len(missing)}): {shown}")
        inside = len([name for name in got if name in reachable])
        lines.append(
            f"hixl error-path coverage: {inside} of {len(reachable)} codes the engine gives in "
            f"hixl-engine mode reached client code"
        )
        return "\n".join(lines)

    def reachable(self) -> List[str]:
        """The codes other than ``LLM_SUCCESS`` the real engine can give some operation in the modes
        used (every code of the status table when no instance was seen), in table order."""
        used = self.used_modes()
        if not used:
            return [info.name for info in STATUS_TABLE.values() if info.name != _SUCCESS]
        codes = engine_codes.union(engine_codes.OPS, used)
        return [info.name for info in STATUS_TABLE.values() if info.code in codes and info.name != _SUCCESS]

    def never_received(self) -> List[str]:
        """The codes the engine can give in the modes used (``reachable``) that never reached client
        code, in table order (with no instance seen: every code of the status table)."""
        if not self.used_modes():
            return [info.name for info in STATUS_TABLE.values() if not self.per_code[info.name]]
        return [name for name in self.reachable() if not self.per_code[name]]

    def meets(self, fail_under: int) -> bool:
        """At least ``fail_under`` distinct codes other than success reached client code (those of
        ``llm_datadist`` and of the ``hixl`` engine API together)."""
        return len(self.failure_codes()) + len(self.hixl_received()) >= fail_under

    def report(self, fail_under: Optional[int] = None) -> str:
        """The table: per code received, how often and from which operations; then every code the
        engine gives in the modes used (every documented condition of the status table, when no
        instance was seen) that no call exercised; then the verdict."""
        used = self.used_modes()
        got = self.failure_codes()
        lines = [f"status codes that reached client code, over {self.calls} API calls:"]
        rows = [
            [info.name, str(info.value), str(self.per_code[info.name]), self._ops(info.name)]
            for info in STATUS_TABLE.values()
            if self.per_code[info.name]
        ]
        lines.append(_table(rows, ["code", "integer", "calls", "operations"]) if rows else "  (none)")
        if self.exceptions:
            shown = ", ".join(f"{name} {n}" for name, n in sorted(self.exceptions.items()))
            lines.append(f"Python exceptions (argument checks, not status codes): {shown}")
        missing = [STATUS_TABLE[LLMStatusCode[name]] for name in self.never_received()]
        lines.append("")
        where = ", ".join(f"{mode.value} ({self.modes[mode.value]} instances)" for mode in used)
        if used:
            lines.append(f"engine modes used: {where}")
        if missing:
            what = "codes the engine gives in these modes" if used else "documented conditions"
            lines.append(f"{what} never exercised ({len(missing)} codes):")
            lines.append(
                _table(
                    [[info.name, info.retryable, info.description] for info in missing],
                    ["code", "retryable", "condition (status table)"],
                )
            )
        else:
            lines.append(
                "every code the engine gives in these modes was exercised"
                if used
                else "every documented condition of the status table was exercised"
            )
        reachable = self.reachable()
        if used:
            outside = [name for name in got if name not in reachable]
            if outside:
                lines.append(
                    f"received but not given by the engine in these modes (a rule with any_code, or a "
                    f"documented reading the simulator offers): {', '.join(outside)}"
                )
            inside = len([name for name in got if name in reachable])
            modes_text = ", ".join(mode.value for mode in used)
            verdict = (
                f"error-path coverage: {inside} of {len(reachable)} codes the engine gives in "
                f"{modes_text} mode{'s' if len(used) > 1 else ''} reached client code"
            )
        else:
            others = len(STATUS_TABLE) - 1
            verdict = (
                f"error-path coverage: {len(got)} of {others} codes other than {_SUCCESS} reached client code"
            )
        if fail_under is not None:
            verdict += f" (required: {fail_under}; {'met' if self.meets(fail_under) else 'NOT met'})"
        lines.append(verdict)
        if self.hixl_calls or self.modes[_HIXL.value]:
            if not self.calls and not used:  # a hixl-only client: its table alone
                return self.hixl_report()
            lines += ["", self.hixl_report()]
        return "\n".join(lines)

    def _ops(self, code: str) -> str:
        return _ops_text(self.per_op.get(code, Counter()))

    # -- across processes ------------------------------------------------------------------------------

    def as_dict(self) -> Dict[str, object]:
        with self._lock:
            return {
                "calls": self.calls,
                "per_op": {code: dict(ops) for code, ops in sorted(self.per_op.items())},
                "exceptions": dict(self.exceptions),
                "modes": dict(self.modes),
                "hixl_calls": self.hixl_calls,
                "hixl_per_op": {code: dict(ops) for code, ops in sorted(self.hixl_per_op.items())},
            }

    def dump(self, path: Path) -> None:
        """Write the counts as JSON (``exec --coverage``: one file per process, read back by the parent)."""
        path.write_text(json.dumps(self.as_dict(), sort_keys=True), encoding="utf-8")

    @classmethod
    def load(cls, path: Path) -> CodeCoverage:
        return cls.from_dict(json.loads(path.read_text(encoding="utf-8")))

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> CodeCoverage:
        """The counts ``as_dict`` gave (from a file, or from a fabric's count for one process)."""
        coverage = cls()
        coverage.calls = int(data["calls"])
        for code, ops in data["per_op"].items():
            coverage.per_op[code] = Counter({op: int(n) for op, n in ops.items()})
            coverage.per_code[code] = sum(coverage.per_op[code].values())
        coverage.exceptions = Counter({name: int(n) for name, n in data["exceptions"].items()})
        coverage.modes = Counter({mode: int(n) for mode, n in data.get("modes", {}).items()})
        coverage.hixl_calls = int(data.get("hixl_calls", 0))
        for code, ops in data.get("hixl_per_op", {}).items():
            coverage.hixl_per_op[code] = Counter({op: int(n) for op, n in ops.items()})
        return coverage

    @classmethod
    def load_all(cls, paths: Iterable[Path]) -> CodeCoverage:
        total = cls()
        for path in paths:
            total.merge(cls.load(path))
        return total


def received(outcome: str, detail: str) -> List[str]:
    """The distinct status codes a traced call gave the client: its outcome, and the per-cluster or
    per-config codes the face wrote in ``detail``. Empty when it raised a Python exception."""
    codes = [outcome] if outcome in _CODES else []
    if detail and codes:
        for name in detail.split(","):
            if name in _CODES and name not in codes:
                codes.append(name)
    return codes


def _ops_text(counts: Counter[str]) -> str:
    """The operations of a count, most first: ``pull_cache 3, link_clusters 1, +2 more``."""
    ops = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    text = ", ".join(f"{op} {n}" for op, n in ops[:_OPS_SHOWN])
    return text + (f", +{len(ops) - _OPS_SHOWN} more" if len(ops) > _OPS_SHOWN else "")


def _table(rows: List[List[str]], headers: List[str]) -> str:
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]
    lines = ["  " + "  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip()]
    lines += ["  " + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    return "\n".join(lines)
