"""Assertions for tests on the fake: ``assert_llm_error`` (the block raises ``LLMException`` with a
given code, from either package) and ``assert_traced`` (the trace holds a matching event). The pytest
plugin re-exports both (``from datadist_sim.pytest_plugin import assert_llm_error``); they need no pytest.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any, List, Optional, Type, Union

from datadist_sim._status import LLMStatusCode
from datadist_sim._status_hixl import HixlCode
from datadist_sim._world.surface import SimWorld, TraceEvent

__all__ = ["CodeLike", "assert_llm_error", "assert_traced"]

TRACE_LINES = 20
CodeLike = Union[LLMStatusCode, int, str, Any]


def _code_name(code: CodeLike) -> str:
    """The status-code name of a member (ours, the real package's or v1's), an integer or a name."""
    name = getattr(code, "name", None)
    if isinstance(name, str):
        return name
    if isinstance(code, int):
        if code in HixlCode._value2member_map_ and code not in LLMStatusCode._value2member_map_:
            return HixlCode(code).name  # a hixl call's outcome is its code's name
        return LLMStatusCode(code).name
    text = str(code).upper()
    return text if text.startswith("LLM_") else f"LLM_{text}"


class assert_llm_error:
    """``with assert_llm_error(LLMStatusCode.LLM_TIMEOUT) as caught: ...``: the block must raise
    ``LLMException`` with that code (a member, its integer or its name); ``caught.value`` is the
    exception. Works for either package's ``LLMException`` (``llm_datadist`` or ``llm_datadist_v1``,
    whose codes are matched by name) and for the real packages' too."""

    def __init__(self, code: CodeLike) -> None:
        self.expected = _code_name(code)
        self.value: Optional[BaseException] = None

    def __enter__(self) -> assert_llm_error:
        return self

    def __exit__(
        self, kind: Optional[Type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]
    ) -> bool:
        __tracebackhide__ = True
        if exc is None:
            raise AssertionError(f"expected LLMException({self.expected}); nothing was raised")
        named = any(cls.__name__ == "LLMException" for cls in type(exc).__mro__)
        if not named or not hasattr(exc, "status_code"):
            raise AssertionError(
                f"expected LLMException({self.expected}), got {type(exc).__name__}: {exc}"
            ) from exc
        got = _code_name(exc.status_code)
        if got != self.expected:
            raise AssertionError(f"expected LLMException({self.expected}), got {got}: {exc}") from exc
        self.value = exc
        return True


def assert_traced(
    world: SimWorld,
    *,
    op: Optional[str] = None,
    outcome: Optional[CodeLike] = None,
    cluster: Optional[Union[int, str]] = None,
    kind: Optional[str] = None,
    detail: Optional[str] = None,
    count: Optional[int] = None,
) -> List[TraceEvent]:
    """The trace events matching every given field (``detail``: a substring); at least one must match,
    or exactly ``count``. A ``hixl`` call's ``cluster`` is its engine's name, its ``outcome`` a hixl
    code (``hixl.TIMEOUT``, or its name). The failure message lists what the trace did hold for that
    operation."""
    __tracebackhide__ = True
    want = None if outcome is None else (outcome if isinstance(outcome, str) else _code_name(outcome))
    if want is not None and want.startswith("hixl."):  # a rule's label of a hixl code
        want = want[len("hixl.") :]
    wanted = {"op": op, "outcome": want, "cluster_id": cluster, "kind": kind}
    events = list(world.trace)
    found = [
        e
        for e in events
        if all(v is None or getattr(e, k) == v for k, v in wanted.items())
        and (detail is None or detail in e.detail)
    ]
    if (count is None and found) or len(found) == count:
        return found
    asked = ", ".join(f"{k}={v!r}" for k, v in [*wanted.items(), ("detail", detail)] if v is not None)
    same_op = [str(e) for e in events if op is None or e.op == op][-TRACE_LINES:]
    shown = "\n".join(f"  {line}" for line in same_op) or "  (none)"
    expected = "at least one" if count is None else f"exactly {count}"
    raise AssertionError(
        f"expected {expected} trace event with {asked or 'any fields'}; found {len(found)}.\n"
        f"last events{'' if op is None else f' of {op}'} in the trace:\n{shown}"
    )
