"""The CLI progress bar: drawn only on a terminal, only after a second, erased at the end."""

from __future__ import annotations

import io
from typing import List

from datadist_sim._progress import Progress, progress


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_nothing_is_drawn_before_the_delay() -> None:
    stream, clock = io.StringIO(), _Clock()
    with Progress(10, "pulls", stream=stream, enabled=True, clock=clock) as bar:
        clock.now = 0.9
        bar.update(5)
    assert stream.getvalue() == ""


def test_after_the_delay_the_bar_is_drawn_in_place_and_erased() -> None:
    stream, clock = io.StringIO(), _Clock()
    with Progress(10, "pulls", stream=stream, enabled=True, clock=clock) as bar:
        clock.now = 1.5
        bar.update(5, "LLM_TIMEOUT x2")
        drawn = stream.getvalue()
    assert drawn == "\rpulls [" + "#" * 15 + "-" * 15 + "] 5/10 LLM_TIMEOUT x2"
    assert stream.getvalue().endswith("\r" + " " * (len(drawn) - 1) + "\r")


def test_not_a_terminal_means_no_bar() -> None:
    stream = io.StringIO()  # isatty() is False, as for a pipe or a log file
    seen: List[int] = list(progress(range(3), 3, "runs", stream=stream))
    assert seen == [0, 1, 2]
    assert stream.getvalue() == ""
