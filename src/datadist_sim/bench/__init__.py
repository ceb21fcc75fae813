"""``datadist-sim bench``: the retry-policy benchmark and the simulator's own performance figures.

``main(argv)`` is the command-line entry (``datadist-sim bench [retry|perf] ...``); the CLI wires to it.
"""

from __future__ import annotations

from datadist_sim.bench._main import main as main

__all__ = ["main"]
