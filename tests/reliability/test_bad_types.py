"""Wrong types, out-of-range integers and ``None`` for every checked argument of every public method of a
live pair, in both modes.

For each call: the error type is the one reference §2.4 documents for that check (``TypeError`` for a
wrong type, ``ValueError`` for an out-of-range integer, ``LLMException`` with the named code for a semantic
or engine check), the message names the argument, and the world's books and bytes are unchanged.

``None`` is its own case: the real checks let ``None`` through wherever ``allow_none`` is left at its
default (§2.4), and the real code then dereferences it; :data:`NONE_LEAKS` lists where that gives a bare
``AttributeError``/``TypeError`` that names nothing, exactly as the real package does.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import pytest
from tests.reliability._bad_env import Env, make_env
from tests.reliability._bad_methods import (
    _INT_BOUNDS,
    ALL_METHODS,
    NONE_LEAKS,
    NONE_LEAKS_V1,
    Method,
    bad_values,
)
from tests.reliability._common import STATS

from datadist_sim._status_v1 import LLM_ERRORS
from datadist_sim._world.current import activate
from datadist_sim.llm_datadist.status import LLMException
from datadist_sim.llm_datadist.v2.llm_datadist import finalize_all
from datadist_sim.llm_datadist_v1.status import LLMException as V1LLMException


def _call(e: Env, method: Method, kwargs: Dict[str, Any]) -> Optional[BaseException]:
    try:
        getattr(method.target(e), method.name)(**kwargs)
    except Exception as exc:  # the type is what is being checked
        return exc
    return None


_GOOD = object()


def _call_fresh(method: Method, arg: str, value: Any) -> Tuple[Optional[BaseException], bool]:
    """Call on a fresh pair with ``arg=value`` (the good value for ``_GOOD``); did the world change?"""
    fresh = make_env(method.v1)
    with activate(fresh.world):
        before = fresh.state()
        kwargs = method.good(fresh)
        if value is not _GOOD:
            kwargs[arg] = value
        exc = _call(fresh, method, kwargs)
        changed = fresh.state() != before
        finalize_all(fresh.world)
    return exc, changed


def _id(method: Method) -> str:
    return f"{'v1' if method.v1 else 'v2'}-{method.name}"


@pytest.mark.parametrize("method", ALL_METHODS, ids=_id)
def test_wrong_types_and_out_of_range_values(method: Method) -> None:
    env = make_env(method.v1)
    with activate(env.world):
        _wrong_types(env, method)
    finalize_all(env.world)
    assert env.world.memory.backed_bytes == 0


def _wrong_types(env: Env, method: Method) -> None:
    problems: List[str] = []
    before = env.state()
    for arg, kind in method.kinds.items():
        for label, value, want in bad_values(kind):
            if method.v1 and want is LLMException:
                want = V1LLMException  # a KvCacheManager raises the v1 package's class
            kwargs = {**method.good(env), arg: value}
            exc = _call(env, method, kwargs)
            STATS["bad inputs tried"] += 1
            where = f"{method.name}({arg}={label})"
            if type(exc) is not want:
                problems.append(f"{where}: {type(exc).__name__}: {exc} (want {want.__name__})")
            elif not method.named(exc, arg):
                problems.append(f"{where}: message does not name {arg!r}: {exc}")
            if env.state() != before:
                problems.append(f"{where}: the world changed")
                before = env.state()
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("method", ALL_METHODS, ids=_id)
def test_none_for_each_argument(method: Method) -> None:
    """``None`` is rejected with a ``TypeError`` naming the argument, accepted where the argument is
    optional, or (``NONE_LEAKS``) fails as the real code does; the world never changes."""
    problems: List[str] = []
    for arg, kind in method.kinds.items():
        if kind in _INT_BOUNDS:
            continue  # covered above: None is a TypeError of the range check
        exc, changed = _call_fresh(method, arg, None)
        good, _ = _call_fresh(method, arg, _GOOD)
        STATS["bad inputs tried"] += 1
        where = f"{method.name}({arg}=None)"
        if type(exc) is type(good) and getattr(exc, "status_code", None) == getattr(
            good, "status_code", None
        ):
            continue  # an optional argument: None is a valid value, and the call did what a good call does
        if changed:
            problems.append(f"{where}: the world changed")
        leaks = NONE_LEAKS_V1 if method.v1 else NONE_LEAKS
        if (method.name, arg) in leaks:
            want = leaks[(method.name, arg)]
            if type(exc) is not want:
                problems.append(f"{where}: {type(exc).__name__}: {exc} (want the real {want.__name__})")
        elif not (isinstance(exc, (TypeError, *LLM_ERRORS)) and method.named(exc, arg)):
            problems.append(f"{where}: {type(exc).__name__}: {exc}")
    assert not problems, "\n".join(problems)
