"""A ``KvCache`` freed by the garbage collector frees its memory after the collection, not during it.

A v1 ``KvCache`` that is garbage-collected deallocates itself, as the real one does (its ``__del__``).
That deallocation is a public call: it sets the context variable of the call being served
(``faults.rules.SERVING``). A cyclic collection can run inside any allocation, including the one
CPython makes while it sets or resets a context variable; a finalizer that sets a context variable
there replaces the mapping the interrupted operation is still reading, which it then reads after it was
freed (seen as a segfault, or ``LookupError`` from ``ContextVar.reset``, in a long test run).

So a finalizer that runs inside a collection (``gc.callbacks`` say when one runs) leaves its action
here, and the next public call of the face runs it first (``api_call``), outside any collection. A
finalizer run by a plain reference drop (``del cache``) acts at once, as before.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from typing import Any, Callable, Dict, List, Tuple

_collecting = False
"""A cyclic collection is running (it holds the GIL, so one flag serves every thread)."""
deferred: List[Tuple[Callable[[Any], object], Any]] = []
"""What finalizers left during a collection (``api_call`` looks at it on every call; never rebound)."""
_lock = threading.Lock()


def _track(phase: str, info: Dict[str, int]) -> None:
    global _collecting
    _collecting = phase == "start"


gc.callbacks.append(_track)


def run_or_defer(action: Callable[[Any], object], arg: Any) -> None:
    """``action(arg)`` now, or after the running garbage collection (at the next public call)."""
    if _collecting:
        with _lock:
            deferred.append((action, arg))
        return
    action(arg)


def run_deferred() -> None:
    """Run the actions finalizers left during a collection; one that fails is dropped, as an error in a
    finalizer would be."""
    while deferred:
        with _lock:
            if not deferred:
                return
            action, arg = deferred.pop(0)
        with contextlib.suppress(Exception):
            action(arg)
