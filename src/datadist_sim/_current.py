"""Which world a new ``LLMDataDist`` joins: the innermost activated one, else the default world."""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator, List, Optional

from datadist_sim._world.world import SimWorld

_lock = threading.Lock()
_stack: List[SimWorld] = []
_default: Optional[SimWorld] = None


def default_world() -> SimWorld:
    """The world that serves drop-in use (a client that only does ``import llm_datadist``)."""
    global _default
    with _lock:
        if _default is None:
            _default = SimWorld()
        return _default


def reset_default_world(world: Optional[SimWorld] = None) -> SimWorld:
    """Replace the default world (a fresh one unless given) and return it."""
    global _default
    with _lock:
        _default = world if world is not None else SimWorld()
        return _default


def current_world() -> SimWorld:
    """The innermost activated world, else the default one. Process-wide, so client threads share it."""
    with _lock:
        if _stack:
            return _stack[-1]
    return default_world()


@contextlib.contextmanager
def activate(world: SimWorld) -> Iterator[SimWorld]:
    """Make ``world`` current for the block: instances constructed inside it join ``world``."""
    with _lock:
        _stack.append(world)
    try:
        yield world
    finally:
        with _lock:
            _stack.remove(world)
