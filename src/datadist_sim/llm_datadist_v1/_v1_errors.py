"""The v1 package's errors at its face: a ``KvCacheManager`` raises ``llm_datadist_v1.LLMException`` with
v1 codes, and its ``CacheTask`` answers v1 codes, as GE's ``kv_cache_manager.py`` and ``llm_utils.py`` do.

The manager shares the engine with the ``llm_datadist`` face, whose errors are ``llm_datadist`` ones; its
public methods are ``v1_call``s, which ``api_call`` translates on the way out, after the trace recorded
the code by name (one wrapper per call, not two).
``SimConfig(unified_exceptions=True)`` keeps ``llm_datadist`` codes and raises ``UnifiedLLMException``
(caught by both names) instead.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, List, Optional, TypeVar

from datadist_sim._status import LLMException as HixlLLMException
from datadist_sim._status_v1 import LLMStatusCode, to_v1, v1_error
from datadist_sim._world.door import current_world
from datadist_sim.llm_datadist._engine import api_call
from datadist_sim.llm_datadist.v2._transfer import CacheTask

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


def _unified(manager: Any) -> bool:
    world = getattr(manager, "_world", None)
    return bool(world is not None and world.config.unified_exceptions)


class V1CacheTask(CacheTask):
    """A ``CacheTask`` of the v1 package: ``synchronize`` / ``get_results`` answer v1 codes."""

    def synchronize(self, timeout_in_millis: Optional[int] = None) -> LLMStatusCode:  # type: ignore[override]
        return to_v1(super().synchronize(timeout_in_millis))

    def get_results(  # type: ignore[override]
        self, timeout_in_millis: Optional[int] = None
    ) -> List[Optional[LLMStatusCode]]:
        return [None if code is None else to_v1(code) for code in super().get_results(timeout_in_millis)]


class _V1Errors:
    """The v1 package's exceptions and task class, which ``api_call`` gives a v1 manager's callers
    (``FaceErrors``); the trace has already recorded the engine's code by name."""

    def raise_own(self, face: Any, exc: BaseException) -> None:
        if isinstance(exc, HixlLLMException):  # else already the v1 package's (a call inside another)
            raise v1_error(exc, unified=_unified(face)) from None

    def result(self, face: Any, result: Any) -> Any:
        if type(result) is CacheTask and not _unified(face):
            # Same object, the v1 package's class (its answers are v1 codes); nothing else differs.
            result.__class__ = V1CacheTask
        return result


_V1_ERRORS = _V1Errors()


def v1_call(method: F) -> F:
    """A public method of a v1 manager: traced (``api_call``) and raising (its tasks answering) as the
    v1 package, in one wrapper."""
    return api_call(method, _V1_ERRORS)


def v1_static(func: Callable[..., T]) -> Callable[..., T]:
    """A static method of a v1 manager: raising as the v1 package."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        try:
            return func(*args, **kwargs)
        except HixlLLMException as exc:
            raise v1_error(exc, unified=current_world().config.unified_exceptions) from None

    return wrapper
