"""Retry-policy benchmark: every policy against the bundled fault scenarios, on simulated time.

Same as ``datadist-sim bench retry``; prints the policy x scenario table and the work-vs-clients table,
writes ``retry.json`` and (with matplotlib) ``retry_timelines.png`` and ``retry_clients.png``.

    python benchmarks/bench_retry.py [--seed 0] [--out benchmarks/results] [--scenarios flaky_link:0.5/1/2]
"""

from __future__ import annotations

import sys

from datadist_sim.bench import main

if __name__ == "__main__":
    args = sys.argv[1:]
    sys.exit(main(["retry", *args, *([] if "--out" in args else ["--out", "benchmarks/results"])]))
