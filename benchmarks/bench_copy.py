"""Data-plane benchmark: a 64 MiB copy through ``AddressSpace.copy`` versus a bare ``numpy.copyto``.

Both copy the very same bytes (the backing buffers of two simulated allocations) in the same run; the
figure is the best of N of each, and the ratio is numpy's time over ours (1.0 = no overhead; the target
is >= 0.70). A raw-pointer copy into a plain numpy array is measured the same way.

    python benchmarks/bench_copy.py [--mib 64] [--repeat 20]
"""

from __future__ import annotations

import argparse
import time
from typing import Callable

import numpy as np

from datadist_sim._status import LLMStatusCode
from datadist_sim._world.address_space import AddressSpace


def best_of(repeat: int, action: Callable[[], None]) -> float:
    action()  # warm up: fault the pages in
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    nbytes = args.mib << 20

    space = AddressSpace()
    pool = space.create_pool(4 * nbytes, oom_code=LLMStatusCode.LLM_OUT_OF_MEMORY)
    src, dst = pool.allocate_many([nbytes, nbytes])
    src_bytes, dst_bytes = space.view(src, nbytes), space.view(dst, nbytes)
    src_bytes[:] = np.random.default_rng(0).integers(0, 256, nbytes, dtype=np.uint8)
    raw = np.empty(nbytes, dtype=np.uint8)

    plain = best_of(args.repeat, lambda: np.copyto(dst_bytes, src_bytes))
    ours = best_of(args.repeat, lambda: space.copy(dst, src, nbytes))
    plain_raw = best_of(args.repeat, lambda: np.copyto(raw, src_bytes))
    ours_raw = best_of(args.repeat, lambda: space.copy(raw.ctypes.data, src, nbytes))
    assert np.array_equal(dst_bytes, src_bytes)
    assert np.array_equal(raw, src_bytes)

    def line(label: str, baseline: float, measured: float) -> str:
        gbps = nbytes / measured / 1e9
        return (
            f"{label:<28} numpy {baseline * 1e3:7.3f} ms  ours {measured * 1e3:7.3f} ms  "
            f"({gbps:5.2f} GB/s)  ratio {baseline / measured:.3f}"
        )

    print(f"{args.mib} MiB copy, best of {args.repeat}")
    print(line("simulated -> simulated", plain, ours))
    print(line("simulated -> raw pointer", plain_raw, ours_raw))


if __name__ == "__main__":
    main()
