"""asyncio face: await the blocking ``llm_datadist`` calls without blocking the loop, on virtual time.

The real API is synchronous, so async clients run its calls in a worker thread. ``to_thread(fn, ...)``
does that for one call; ``wrap(obj)`` makes every method of an ``LLMDataDist`` or ``CacheManager``
awaitable. ``VirtualTimeEventLoop`` is an event loop whose clock is a world's ``VirtualClock``: when
nothing is ready, it jumps simulated time to the next timer instead of waiting, so a client's
``asyncio.sleep`` backoff and ``asyncio.wait_for`` deadlines cost no wall time and agree with the
world's timeouts. ``run(main())`` is ``asyncio.run`` on such a loop.

Limits: calls sent to worker threads run one at a time on a virtual loop (its default executor has one
thread, so the trace order is the order of the awaits); while one is running the loop waits for it in
wall time before it moves simulated time on. Only the loop's own timers follow the virtual clock:
``time.monotonic()`` in the client stays wall time (see ``datadist_sim.timepatch``), and so do the
timeouts of blocking waits done outside the loop. Real I/O does not hold simulated time back: with a
timer pending and no data ready, the loop jumps to the timer.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import selectors
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Coroutine, Mapping, Optional, TypeVar, Union

from datadist_sim._world.surface import SimWorld, VirtualClock, current_world

__all__ = ["VirtualTimeEventLoop", "event_loop_policy", "run", "to_thread", "wrap"]

T = TypeVar("T")
WorldOrClock = Union[SimWorld, VirtualClock, None]

THREAD_WAIT_WALL_S = 60.0
"""Longest wall time the loop waits for a worker-thread call before it lets simulated time move on."""


def _virtual_clock(target: WorldOrClock) -> VirtualClock:
    clock = current_world().clock if target is None else target
    if isinstance(clock, SimWorld):
        clock = clock.clock
    if not isinstance(clock, VirtualClock):
        raise TypeError(f"a virtual-time loop needs a world on the virtual clock, got {clock!r}")
    return clock


class _VirtualSelector(selectors.BaseSelector):
    """Polls real I/O without blocking; where the loop would sleep until a timer, jumps the clock."""

    def __init__(self, loop: VirtualTimeEventLoop, inner: selectors.BaseSelector) -> None:
        self._loop = loop
        self._inner = inner

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._inner.register(fileobj, events, data)

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._inner.unregister(fileobj)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._inner.modify(fileobj, events, data)

    def get_map(self) -> Mapping[Any, selectors.SelectorKey]:
        return self._inner.get_map()

    def close(self) -> None:
        self._inner.close()

    def select(self, timeout: Optional[float] = None) -> list[tuple[selectors.SelectorKey, int]]:
        events = self._inner.select(0)
        if events or (timeout is not None and timeout <= 0):
            return events
        if timeout is None:  # no timer at all: only I/O (or a worker thread) can wake the loop
            return self._inner.select(None)
        if self._loop.threads_running:  # a call is in a worker thread: its result comes first
            events = self._inner.select(THREAD_WAIT_WALL_S)
            if events:
                return events
        self._loop.clock.advance_to(self._loop.clock.now() + timeout)
        return []


class VirtualTimeEventLoop(asyncio.SelectorEventLoop):
    """An event loop on a world's virtual clock (the current world's when none is given).

    Usable wherever a loop factory is: ``asyncio.Runner(loop_factory=VirtualTimeEventLoop)``, the
    ``pytest_asyncio_loop_factories`` hook of pytest-asyncio, or ``datadist_sim.aio.run``.
    Raises ``TypeError`` for a world on the real clock.
    """

    def __init__(self, world: WorldOrClock = None) -> None:
        self.threads_running = 0
        super().__init__(_VirtualSelector(self, selectors.DefaultSelector()))
        try:
            self.clock = _virtual_clock(world)
        except TypeError:
            self.close()
            raise
        self.set_default_executor(ThreadPoolExecutor(max_workers=1, thread_name_prefix="datadist-sim-aio"))

    def time(self) -> float:
        return self.clock.now()

    def run_in_executor(  # type: ignore[override]  # typeshed spells it with TypeVarTuple (3.11+)
        self, executor: Any, func: Callable[..., T], *args: Any
    ) -> asyncio.Future[T]:
        future = super().run_in_executor(executor, func, *args)
        self.threads_running += 1
        future.add_done_callback(self._thread_done)
        return future

    def _thread_done(self, _future: asyncio.Future[Any]) -> None:
        self.threads_running -= 1


async def to_thread(func: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """Run a blocking call in the loop's default executor and await it, as ``asyncio.to_thread`` does.

    On a virtual-time loop that executor has one thread, so calls run in the order they were awaited.
    """
    loop = asyncio.get_running_loop()
    call = functools.partial(contextvars.copy_context().run, func, *args, **kwargs)
    return await loop.run_in_executor(None, call)


class _Awaitable:
    """Every method of the wrapped object as a coroutine function; its cache managers wrapped too; other
    attributes pass through."""

    def __init__(self, target: Any) -> None:
        self._target = target

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if type(value).__name__.endswith("Manager"):  # datadist.cache_manager, .kv_cache_manager
            return _Awaitable(value)
        if not callable(value):
            return value

        @functools.wraps(value)
        async def call(*args: Any, **kwargs: Any) -> Any:
            return await to_thread(value, *args, **kwargs)

        return call

    def __repr__(self) -> str:
        return f"wrap({self._target!r})"


def wrap(target: Any) -> Any:
    """``await wrap(datadist).link_clusters(clusters, 5000)``: the object's methods, awaitable.

    ``wrap(datadist).cache_manager`` (or ``.kv_cache_manager``) is wrapped as well; other attributes and
    the values calls return come back as they are.
    """
    return _Awaitable(target)


def run(main: Coroutine[Any, Any, T], *, world: WorldOrClock = None, debug: bool = False) -> T:
    """``asyncio.run(main)`` on a ``VirtualTimeEventLoop`` of ``world`` (the current world by default)."""
    loop = VirtualTimeEventLoop(world)
    loop.set_debug(debug)
    try:
        asyncio.set_event_loop(loop)
        return loop.run_until_complete(main)
    finally:
        try:
            _cancel_all(loop)
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
        finally:
            asyncio.set_event_loop(None)
            loop.close()


def _cancel_all(loop: asyncio.AbstractEventLoop) -> None:
    tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for task in tasks:
        task.cancel()
    if tasks:
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))


def event_loop_policy(world: WorldOrClock = None) -> asyncio.AbstractEventLoopPolicy:
    """A policy whose new loops are virtual-time loops: the value for pytest-asyncio < 1.0's
    ``event_loop_policy`` fixture. (Newer pytest-asyncio: the ``pytest_asyncio_loop_factories`` hook.)"""

    class _Policy(asyncio.DefaultEventLoopPolicy):
        def new_event_loop(self) -> asyncio.AbstractEventLoop:
            return VirtualTimeEventLoop(world)

    return _Policy()
