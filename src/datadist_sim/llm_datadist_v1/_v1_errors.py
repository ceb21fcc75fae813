"""The v1 package's errors at its face: a ``KvCacheManager`` raises ``llm_datadist_v1.LLMException`` with
v1 codes, and its ``CacheTask`` answers v1 codes, as GE's ``kv_cache_manager.py`` and ``llm_utils.py`` do.

The manager shares the engine with the ``llm_datadist`` face, whose errors are ``llm_datadist`` ones; the
translation happens here, outermost, so the trace still records the code by name.
``SimConfig(unified_exceptions=True)`` keeps ``llm_datadist`` codes and raises ``UnifiedLLMException``
(caught by both names) instead.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, List, Optional, TypeVar

from datadist_sim._status import LLMException as HixlLLMException
from datadist_sim._status_v1 import LLMStatusCode, to_v1, v1_error
from datadist_sim._world.door import current_world
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


def _v1_method(method: F) -> F:
    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            result = method(self, *args, **kwargs)
        except HixlLLMException as exc:
            raise v1_error(exc, unified=_unified(self)) from None
        if type(result) is CacheTask and not _unified(self):
            # Same object, the v1 package's class (its answers are v1 codes); nothing else differs.
            result.__class__ = V1CacheTask
        return result

    return wrapper  # type: ignore[return-value]


def v1_errors(*names: str) -> Callable[[type], type]:
    """Class decorator: the named public methods raise (and their tasks answer) as the v1 package."""

    def decorate(cls: type) -> type:
        for name in names:
            attr = cls.__dict__[name]
            if isinstance(attr, staticmethod):
                setattr(cls, name, staticmethod(_v1_static(attr.__func__)))
            else:
                setattr(cls, name, _v1_method(attr))
        return cls

    return decorate


def _v1_static(func: Callable[..., T]) -> Callable[..., T]:
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        try:
            return func(*args, **kwargs)
        except HixlLLMException as exc:
            raise v1_error(exc, unified=current_world().config.unified_exceptions) from None

    return wrapper
