"""The stack of activated worlds, below ``world`` so that ``SimWorld.activate`` and ``current`` share it
without importing each other: it holds worlds but knows nothing of them."""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator, List, Optional, TypeVar

T = TypeVar("T")

lock = threading.Lock()
_stack: List[object] = []


def innermost() -> Optional[object]:
    """The innermost activated world, or None."""
    with lock:
        return _stack[-1] if _stack else None


@contextlib.contextmanager
def activated(world: T) -> Iterator[T]:
    """Make ``world`` the innermost activated one for the block. Process-wide, so client threads share it."""
    with lock:
        _stack.append(world)
    try:
        yield world
    finally:
        with lock:
            _stack.remove(world)
