"""Prints what the reliability suites explored (the README's reliability figures come from here)."""

from __future__ import annotations

from typing import Any

from tests.reliability._common import PROFILE, STATS


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not STATS:
        return
    terminalreporter.section(f"datadist-sim reliability ({PROFILE} profile)")
    for name, count in sorted(STATS.items()):
        terminalreporter.write_line(f"{name:>32}: {count:,}")
