"""Instructions per small pull, counted by valgrind: a figure that does not move with the machine's load.

``bench perf`` times the small ``pull_cache`` against the lean model in CPU seconds, which on shared
machines moves by 10-20 % from run to run. To see what a change does to the pull itself, count the
instructions instead: this script makes N pulls (the simulator's, or the lean model's) after a warm-up,
with the garbage collector off, and ``callgrind`` counts what the process executed. Two runs, N = 1000
and N = 3000, differ by 2000 pulls and nothing else::

    export PYTHONHASHSEED=0 OPENBLAS_NUM_THREADS=1   # same hashes, no BLAS threads spinning
    for n in 1000 3000; do
      valgrind --tool=callgrind --callgrind-out-file=/dev/null \
        python benchmarks/pull_instructions.py v2 sim $n 2>&1 | grep Collected
    done

(instructions per pull = difference / 2000; ``python`` must be the interpreter itself, e.g.
``$(python -c 'import sys; print(sys.executable)')``, not a shell shim). ``v1``/``v2`` picks the face,
``sim``/``lean`` what pulls.
"""

from __future__ import annotations

import gc
import sys

from datadist_sim.bench.perf_lean import LeanPull
from datadist_sim.bench.perf_setup import Pair
from datadist_sim.llm_datadist import CacheDesc, CacheKeyByIdAndIndex, DataType


def main(face: str, which: str, pulls: int) -> None:
    gc.disable()
    v1 = face == "v1"
    with Pair(backed=True, v1=v1) as pair:
        desc = CacheDesc(1, [1, 256], DataType.DT_FLOAT16)
        src, dst = pair.prompt_cm.allocate_cache(desc), pair.decode_cm.allocate_cache(desc)
        key = CacheKeyByIdAndIndex(pair.prompt_id, src.cache_id, 0)
        pull = pair.decode_cm.pull_cache if which == "sim" else LeanPull(512, v1=v1).pull_cache
        for _ in range(200 + pulls):
            pull(key, dst, 0)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
