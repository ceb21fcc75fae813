"""Which world a new ``LLMDataDist`` joins: the innermost activated one, else the default world."""

from __future__ import annotations

import contextlib
import threading
from typing import Optional, cast

from datadist_sim._world import active
from datadist_sim._world.world import SimWorld

_lock = threading.Lock()
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
    world = active.innermost()
    return default_world() if world is None else cast(SimWorld, world)


def activate(world: SimWorld) -> contextlib.AbstractContextManager[SimWorld]:
    """Make ``world`` current for the block: instances constructed inside it join ``world``."""
    return active.activated(world)
