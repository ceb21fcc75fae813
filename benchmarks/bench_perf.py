"""Simulator performance against same-run baselines: control plane, data plane, scale and memory.

Same as ``datadist-sim bench perf``; prints the figures table and writes ``perf.json``.

    python benchmarks/bench_perf.py [--quick] [--out benchmarks/results]
"""

from __future__ import annotations

import sys

from datadist_sim.bench import main

if __name__ == "__main__":
    args = sys.argv[1:]
    sys.exit(main(["perf", *args, *([] if "--out" in args else ["--out", "benchmarks/results"])]))
