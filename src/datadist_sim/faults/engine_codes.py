"""The codes each public operation of the real library can give, per engine mode: the fault model.

A fault rule may only make a call give a code the real engine could give it in the caller's mode, or a
correct client fails on an outcome that cannot happen (a false alarm) and learns to ignore the tool.
This module is the one table of those codes (its rows, with their sources, are ``code_rows``);
``Fault`` checks its codes against it, and explore, the hypothesis strategies, the bundled scenarios and
the error-path coverage all read it.

Five modes (``EngineMode``):

- ``v2``: ``llm_datadist`` with ``llm.EnableCacheManager`` (hixl's C++ engine, ``LLMDataDistV2``), the
  default (HCCL) transfer backend;
- ``hixl``: the same with ``llm.TransferBackend = "hixl"`` (``HixlTransferEngine``);
- ``v2-kv``: ``llm_datadist``'s ``LLMDataDist`` in KvCacheManager mode, which builds GE's v1 engine
  (hixl ``src/python/llm_datadist/llm_datadist/v2/llm_datadist.py:112-125``);
- ``v1``: the ``llm_datadist_v1`` package, GE's engine itself;
- ``hixl-engine``: the ``hixl`` engine API (``import hixl``), whose operations are ``hixl.<method>`` and
  whose codes are hixl's own (``HixlCode``); it has rows for those operations only, and they have rows
  in it only.

``v2-kv`` and ``v1`` run the same engine (GE's flow functions behind GE's ``llm_wrapper``), so their rows
are the same; only the exception class differs (``_status_v1``). Each row gives its source (file:line of
hicann/hixl at 9ed283b, ``GE`` = hicann/ge at ffdcbc9f7); docs/vendor_facts.md, "Codes each operation can
give, per mode", explains them. Two facts shape every row: the Python layer maps any engine status it
does not know (a raw ACL or HCCL error) to ``LLM_FAILED`` (hixl ``status.py:103-104``, GE
``status.py`` ``code_2_status``), and argument checks raise ``LLM_PARAM_INVALID`` (``raise_if_false``).

Each row orders its codes: the first is the one a systematic fault pass injects. ``args_only`` are the
codes only a bad argument or a call in the wrong mode gets: a correct client never meets them, so the
fault searches (``fault_codes``) leave them out, while a user's own ``Fault.fail`` may still name them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Dict, FrozenSet, Iterable, Optional, Protocol, Tuple, Union

from datadist_sim._status_hixl import Code, HixlCode, label
from datadist_sim.faults.code_rows import FORCE_SPECS, SPECS, Spec
from datadist_sim.faults.hixl_code_rows import HIXL_SPECS

__all__ = [
    "can_time_out",
    "fault_labels",
    "CodeRow",
    "HixlCode",
    "EngineMode",
    "OPS",
    "check_code",
    "codes_for",
    "describe",
    "FORCE_OPS",
    "fault_codes",
    "mode_of",
    "modes",
    "modes_giving",
    "row",
    "timeout_code",
    "to_mode",
    "trace_modes",
]


class EngineMode(str, Enum):
    """The engine a call runs on; the value is how reports, scenario files and explore name it."""

    V2 = "v2"
    HIXL = "hixl"
    V2_KV = "v2-kv"
    V1 = "v1"
    HIXL_ENGINE = "hixl-engine"

    def __str__(self) -> str:
        return self.value


Mode = EngineMode
"""Short name of ``EngineMode``."""


@dataclass(frozen=True)
class CodeRow:
    """What one operation can give in one mode."""

    op: str
    mode: EngineMode
    codes: Tuple[Code, ...]
    """Every code the real library can return or raise for this call, the systematic pass's first."""
    args_only: FrozenSet[Code]
    """The codes of ``codes`` that only a bad argument or the wrong mode gets."""
    timeout: Optional[Code]
    """The code the call gives when it times out in this mode; None: it has no timeout to run out."""
    source: str
    """Where the codes come from (vendor file:line)."""
    silent: str = ""
    """What the source leaves open, if anything."""

    @property
    def fault_codes(self) -> Tuple[Code, ...]:
        """The codes a correct client can meet here, in order: what fault searches draw from."""
        return tuple(code for code in self.codes if code not in self.args_only)


_ELSEWHERE = ((), (), None, "no such operation in this mode's API", "")


def _rows(specs: Dict[str, Dict[str, Spec]]) -> Dict[Tuple[str, EngineMode], CodeRow]:
    table: Dict[Tuple[str, EngineMode], CodeRow] = {}
    for op, per_mode in specs.items():
        for mode in EngineMode:
            key = "kv" if mode in (EngineMode.V2_KV, EngineMode.V1) else mode.value
            spec = _ELSEWHERE if mode is EngineMode.HIXL_ENGINE else per_mode.get(key) or per_mode["v2"]
            codes, args_only, timeout, source, silent = spec
            table[op, mode] = CodeRow(op, mode, codes, frozenset(args_only), timeout, source, silent)
    return table


def _build() -> Dict[Tuple[str, EngineMode], CodeRow]:
    table = _rows(SPECS)
    for op, spec in HIXL_SPECS.items():
        for mode in EngineMode:
            codes, args_only, timeout, source, silent = spec if mode is EngineMode.HIXL_ENGINE else _ELSEWHERE
            table[op, mode] = CodeRow(op, mode, codes, frozenset(args_only), timeout, source, silent)
    return table


_TABLE = _build()
_FORCE_TABLE = _rows(FORCE_SPECS)
"""The rows of an operation's ``force=True`` form (``unlink_clusters``), asked instead of ``_TABLE`` when
the call is forced; an operation without such rows gives the same codes either way."""
OPS: FrozenSet[str] = frozenset(SPECS) | frozenset(HIXL_SPECS)
"""Every operation the table has rows for (the face's traced operations, ``faults.checks.API_OPS``)."""
FORCE_OPS: FrozenSet[str] = frozenset(FORCE_SPECS)
"""The operations whose ``force=True`` form has rows of its own (``row(..., force=True)``)."""


def _get(op: str, mode: Union[EngineMode, str], force: bool) -> Optional[CodeRow]:
    m = to_mode(mode)
    found = _FORCE_TABLE.get((op, m)) if force else None
    return found if found is not None else _TABLE.get((op, m))


# -- the API --------------------------------------------------------------------------------------


def modes() -> Tuple[EngineMode, ...]:
    """The five modes, in table order."""
    return tuple(EngineMode)


def to_mode(mode: Union[EngineMode, str]) -> EngineMode:
    """A mode from itself or its name (``"v2"``, ``"hixl"``, ``"v2-kv"``, ``"v1"``, ``"hixl-engine"``);
    ValueError else."""
    if isinstance(mode, EngineMode):
        return mode
    try:
        return EngineMode(mode)
    except ValueError:
        names = ", ".join(m.value for m in EngineMode)
        raise ValueError(f"unknown engine mode {mode!r}; modes: {names}") from None


def mode_of(cache_manager: bool, hixl: bool = False) -> EngineMode:
    """The mode of an instance: CacheManager or not, and its transfer backend. A KvCacheManager-mode
    instance is ``v2-kv``: ``llm_datadist_v1.LLMDataDist`` is the same combined class here, and the two
    run the same engine, so their rows agree."""
    if not cache_manager:
        return EngineMode.V2_KV
    return EngineMode.HIXL if hixl else EngineMode.V2


class _Event(Protocol):
    """What ``trace_modes`` reads of a trace event."""

    cluster_id: Optional[Union[int, str]]
    op: str
    detail: str


def trace_modes(events: Iterable[_Event]) -> Dict[Union[int, str], EngineMode]:
    """The mode of each instance a trace shows coming up: the world records ``node.init`` with the
    detail ``"<role> v1|v2[ hixl]"`` (the engine, KvCacheManager or CacheManager, and the backend), and
    ``hixl.engine.init`` for an engine of the ``hixl`` API (keyed by its name)."""
    found: Dict[Union[int, str], EngineMode] = {}
    for event in events:
        if event.op == "hixl.engine.init" and event.cluster_id is not None:
            found[event.cluster_id] = EngineMode.HIXL_ENGINE
            continue
        if event.op != "node.init" or event.cluster_id is None:
            continue
        words = event.detail.split()
        if "v1" in words or "v2" in words:
            found[event.cluster_id] = mode_of(cache_manager="v2" in words, hixl="hixl" in words)
    return found


def row(op: str, mode: Union[EngineMode, str], force: bool = False) -> CodeRow:
    """The row of ``op`` in ``mode`` (of its ``force=True`` form with ``force``, where it has one);
    KeyError for an operation the table does not know."""
    found = _get(op, mode, force)
    if found is None:
        raise KeyError((op, to_mode(mode)))
    return found


def codes_for(op: str, mode: Union[EngineMode, str], force: bool = False) -> FrozenSet[Code]:
    """Every code the real library can give ``op`` in ``mode`` (with ``force``: its ``force=True``
    form), empty for an unknown operation."""
    found = _get(op, mode, force)
    return frozenset(found.codes) if found is not None else frozenset()


def fault_codes(op: str, mode: Union[EngineMode, str], force: bool = False) -> Tuple[Code, ...]:
    """The codes a correct client can meet from ``op`` in ``mode``, the systematic pass's first."""
    found = _get(op, mode, force)
    return found.fault_codes if found is not None else ()


def timeout_code(op: str, mode: Union[EngineMode, str], force: bool = False) -> Optional[Code]:
    """The code ``op`` gives when it times out in ``mode``, or None when it cannot time out there."""
    found = _get(op, mode, force)
    return found.timeout if found is not None else None


def fault_labels(
    op: str, modes_: Optional[Iterable[Union[EngineMode, str]]] = None, force: bool = False
) -> Tuple[str, ...]:
    """The codes a correct client of ``modes_`` (of any mode when None) can meet from ``op`` (with
    ``force``: its ``force=True`` form), by name (``label``), each once, in table order: the first is the
    one a systematic fault pass injects. What explore and the hypothesis strategies draw a ``fail``
    rule's code from."""
    out: Dict[str, None] = {}
    for mode in modes_ if modes_ is not None else EngineMode:
        out.update(dict.fromkeys(label(code) for code in fault_codes(op, mode, force)))
    return tuple(out)


def can_time_out(
    op: str, modes_: Optional[Iterable[Union[EngineMode, str]]] = None, force: bool = False
) -> bool:
    """Whether ``op`` (with ``force``: its ``force=True`` form) has a timeout to run out in some mode of
    ``modes_`` (of any mode when None): where explore and the strategies may draw a ``timeout`` rule."""
    modes_ = modes_ if modes_ is not None else EngineMode
    return any(timeout_code(op, mode, force) is not None for mode in modes_)


def modes_giving(op: str, code: Code) -> Tuple[EngineMode, ...]:
    """The modes in which ``op`` can give ``code``."""
    return tuple(mode for mode in EngineMode if code in codes_for(op, mode))


def _listing(op: str, mode: EngineMode, force: bool = False) -> str:
    found = _get(op, mode, force)
    return ", ".join(label(code) for code in found.codes) if found is not None and found.codes else "no code"


def describe(op: str, modes_: Optional[Iterable[Union[EngineMode, str]]] = None, force: bool = False) -> str:
    """The codes ``op`` (with ``force``: its ``force=True`` form) can give, per mode, modes with the
    same codes together: ``LLM_OUT_OF_MEMORY, ... (v2, hixl); LLM_DEVICE_OUT_OF_MEMORY, ... (v2-kv, v1)``."""
    groups: Dict[str, list[str]] = {}
    for mode in modes_ if modes_ is not None else EngineMode:
        m = to_mode(mode)
        groups.setdefault(_listing(op, m, force), []).append(m.value)
    return "; ".join(f"{codes} ({', '.join(names)})" for codes, names in groups.items())


OUTSIDE = "any_code=True injects it anyway, outside the engine's behaviour"


def impossible(op: str, code: Code, mode: Union[EngineMode, str]) -> Optional[str]:
    """None when ``op`` can give ``code`` in ``mode``; else the reason, naming the codes it can give."""
    m = to_mode(mode)
    if code in codes_for(op, m):
        return None
    return f"{op} cannot give {label(code)} in {m.value} mode; it gives {_listing(op, m)}"


def check_code(op: str, code: Code, mode: Optional[Union[EngineMode, str]] = None) -> None:
    """ValueError unless ``op`` can give ``code`` in ``mode`` (in some mode, when ``mode`` is None); the
    message names the codes the operation can give."""
    if mode is not None:
        reason = impossible(op, code, mode)
        if reason is not None:
            raise ValueError(f"{reason} ({OUTSIDE})")
        return
    if op not in OPS or modes_giving(op, code):
        return
    raise ValueError(f"{op} cannot give {label(code)} in any mode; it gives {describe(op)} ({OUTSIDE})")


def union(ops: Iterable[str], modes_: Iterable[Union[EngineMode, str]]) -> FrozenSet[Code]:
    """Every code any of ``ops`` can give in any of ``modes_`` (what a client of those modes can meet)."""
    out: set[Code] = set()
    for op in ops:
        for mode in modes_:
            out |= codes_for(op, mode)
    return frozenset(out)
