"""Simulator performance figures, each against a baseline measured in the same run (filled in next)."""

from __future__ import annotations

from pathlib import Path


def main(quick: bool = False, out: Path = Path("bench-results")) -> int:
    print("datadist-sim bench perf: not implemented yet")
    return 1
