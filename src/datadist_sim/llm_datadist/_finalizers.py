"""Whether a garbage collection is running: a public call made from a finalizer then leaves the call's
context variable alone.

A v1 ``KvCache`` that is garbage-collected deallocates itself, as the real one does (its ``__del__``),
and that deallocation is a public call, which sets the context variable of the call being served
(``faults.rules.SERVING``). A cyclic collection can run inside any allocation, including the ones
CPython makes while it sets or resets a context variable; setting one there replaces the mapping the
interrupted operation is still reading, which it then reads after it was freed (seen as a segfault, or
``LookupError`` from ``ContextVar.reset``, in a long test run). So while a collection runs
(``gc.callbacks`` say when), ``api_call`` serves a call without setting the variable: the call is traced
as any other, but meets no fault rule of the door (a finalizer's errors are swallowed anyway).
"""

from __future__ import annotations

import gc
from typing import Dict

collecting = False
"""A cyclic collection is running (it holds the GIL, so one flag serves every thread)."""


def _track(phase: str, info: Dict[str, int]) -> None:
    global collecting
    collecting = phase == "start"


gc.callbacks.append(_track)
