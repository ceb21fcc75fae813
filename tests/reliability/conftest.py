"""Prints what the reliability suites explored (the README's reliability figures come from here):
headline counts always, each call's outcomes too with ``-v``."""

from __future__ import annotations

from typing import Any

from tests.reliability._common import PROFILE, STATS


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not STATS:
        return
    terminalreporter.section(f"datadist-sim reliability ({PROFILE} profile)")
    verbose = terminalreporter.verbosity > 0
    for name, count in sorted(STATS.items()):
        if verbose or "->" not in name:
            terminalreporter.write_line(f"{name:>40}: {count:,}")
