"""A progress bar on stderr for command-line work that runs longer than a second; silent otherwise.

It draws only on a terminal (never into a pipe or a log a harness greps) and only once the work has
taken ``delay_s`` of wall time, then erases itself, so short runs and machine output stay clean.
"""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import IO, Callable, Iterable, Iterator, Optional, Type, TypeVar

T = TypeVar("T")
WIDTH = 30


class Progress:
    """``with Progress(total, "pulls") as bar: ... bar.update(done)``."""

    def __init__(
        self,
        total: int,
        label: str = "",
        *,
        stream: Optional[IO[str]] = None,
        enabled: Optional[bool] = None,
        delay_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total = max(total, 0)
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.delay_s = delay_s
        self._clock = clock
        self._start = clock()
        self._drawn = 0

    def update(self, done: int, note: str = "") -> None:
        """Show ``done`` of ``total`` (redrawn in place) once the delay has passed."""
        if not self.enabled or self._clock() - self._start < self.delay_s:
            return
        filled = WIDTH if self.total == 0 else min(WIDTH, WIDTH * done // self.total)
        text = f"{self.label} [{'#' * filled}{'-' * (WIDTH - filled)}] {done}/{self.total} {note}".strip()
        self.stream.write("\r" + text.ljust(self._drawn))
        self.stream.flush()
        self._drawn = len(text)

    def close(self) -> None:
        """Erase the bar, if it was drawn."""
        if self._drawn:
            self.stream.write("\r" + " " * self._drawn + "\r")
            self.stream.flush()
            self._drawn = 0

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self, kind: Optional[Type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        self.close()


def progress(
    items: Iterable[T], total: int, label: str = "", *, stream: Optional[IO[str]] = None
) -> Iterator[T]:
    """Yield ``items``, keeping a ``Progress`` bar on ``stream`` (stderr) up to date."""
    with Progress(total, label, stream=stream) as bar:
        for done, item in enumerate(items, 1):
            yield item
            bar.update(done)
