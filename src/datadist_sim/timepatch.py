"""Opt-in: make a blocking client's ``time.sleep`` and ``time.monotonic`` follow a world's virtual clock.

A client that backs off with ``time.sleep(2 ** n)`` and keeps deadlines with ``time.monotonic()`` then
runs its retry loop in simulated time: seconds of backoff cost no wall time, and its deadlines agree
with the world's timeouts.

Limits:
- the patch is process-wide and covers every thread while it lasts (an asyncio loop running meanwhile
  reads ``time.monotonic`` too: use ``datadist_sim.aio`` for async clients instead);
- a name bound before the patch (``from time import sleep``) is not reached unless its module is
  passed in ``modules``;
- ``time.time``, ``perf_counter`` and C extensions keep wall time;
- sleeping threads share one clock and each wakes at its own deadline: a sleep waits on the clock
  (``VirtualClock.wait_until``), which moves on once every other thread sleeps too or has made no call
  in the world for ``autojump_threshold`` of wall time, so two threads sleeping at once overlap rather
  than add up, whichever of them the OS runs first;
- when the patch ends ``time.monotonic`` is wall time again and may read lower than the last patched
  value (the virtual clock can run ahead of the wall).
"""

from __future__ import annotations

import contextlib
import threading
import time
from types import ModuleType
from typing import Callable, Dict, Iterator, List, Sequence, Tuple, Union

from datadist_sim._world.surface import SimWorld, VirtualClock, current_world

__all__ = ["is_patched", "patch_time"]

_NAMES = ("sleep", "monotonic", "monotonic_ns")
_lock = threading.Lock()
_active = False


def _virtual_clock(target: Union[SimWorld, VirtualClock, None]) -> VirtualClock:
    clock = current_world().clock if target is None else target
    if isinstance(clock, SimWorld):
        clock = clock.clock
    if not isinstance(clock, VirtualClock):
        raise TypeError(f"patch_time needs a world on the virtual clock, got {clock!r}")
    return clock


def _replacements(clock: VirtualClock) -> Dict[str, Callable[..., object]]:
    offset = time.monotonic() - clock.now()

    def sleep(seconds: float) -> None:
        if seconds < 0:
            raise ValueError("sleep length must be non-negative")
        clock.wait_until(clock.now() + seconds)

    def monotonic() -> float:
        return offset + clock.now()

    def monotonic_ns() -> int:
        return int(monotonic() * 1e9)

    return {"sleep": sleep, "monotonic": monotonic, "monotonic_ns": monotonic_ns}


@contextlib.contextmanager
def patch_time(
    world: Union[SimWorld, VirtualClock, None] = None, *, modules: Sequence[ModuleType] = ()
) -> Iterator[VirtualClock]:
    """For the block, ``time.sleep``/``monotonic``/``monotonic_ns`` follow ``world``'s virtual clock
    (the current world when None); yields that clock.

    ``modules``: client modules that bound those functions by name (``from time import sleep``); their
    bindings are swapped too. Raises ``TypeError`` for a world on the real clock, ``RuntimeError`` if
    the time is patched already.
    """
    global _active
    clock = _virtual_clock(world)
    fakes = _replacements(clock)
    originals = {name: getattr(time, name) for name in _NAMES}
    saved: List[Tuple[ModuleType, str, object]] = [(time, name, originals[name]) for name in _NAMES]
    for module in modules:
        saved += [(module, n, getattr(module, n)) for n in _NAMES if getattr(module, n, None) is originals[n]]
    with _lock:
        if _active:
            raise RuntimeError("time is already patched (patch_time blocks do not nest)")
        _active = True
        for module, name, _ in saved:
            setattr(module, name, fakes[name])
    try:
        yield clock
    finally:
        with _lock:
            for module, name, original in saved:
                setattr(module, name, original)
            _active = False


def is_patched() -> bool:
    """Whether a ``patch_time`` block is in force."""
    return _active
