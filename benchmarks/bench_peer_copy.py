"""What one kernel copy between two processes can reach on this machine, beside a ``memcpy``.

A forked child holds 64 MiB; this process reads them with ``process_vm_readv`` (the call the fabric's
raw-pointer pulls use, ``fabric/transport/peer_memory.py``) on one thread and split among two, reads
the same bytes from a shared-memory file with ``pread`` (another kernel copy, with no peer involved),
and copies them with ``np.copyto`` between two shared-memory mappings (the baseline of ``bench perf``'s
cross-process 64 MiB row). Best of ``--repeat`` each, wall clock. Linux only.

    python benchmarks/bench_peer_copy.py [--mib 64] [--repeat 15]
"""

from __future__ import annotations

import argparse
import mmap
import os
import shutil
import tempfile
import threading
import time
from typing import Callable, List, Tuple

import numpy as np

from datadist_sim.fabric.host.shm import shm_directory
from datadist_sim.fabric.transport.peer_memory import read_once


def best(action: Callable[[], object], repeat: int) -> float:
    action()
    found = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        found = min(found, time.perf_counter() - start)
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    nbytes = args.mib << 20
    source = np.ones(nbytes, dtype=np.uint8)
    ready, told = os.pipe()
    done, finish = os.pipe()
    pid = os.fork()
    if pid == 0:  # the peer: holds the source until told to go
        os.write(told, b"go")
        os.read(done, 1)
        os._exit(0)
    os.read(ready, 2)
    address = source.ctypes.data  # the same in the forked child
    target = np.zeros(nbytes, dtype=np.uint8)
    base = target.ctypes.data

    def read(pairs: List[Tuple[int, int]]) -> None:
        for low, high in pairs:
            while low < high:
                got = read_once(pid, base + low, address + low, high - low)
                if got <= 0:
                    raise OSError(-got, "process_vm_readv failed")
                low += got

    def split(ways: int) -> Callable[[], None]:
        step = nbytes // ways
        plans = [[(i * step, (i + 1) * step)] for i in range(ways)]

        def run() -> None:
            helpers = [threading.Thread(target=read, args=(plan,)) for plan in plans[1:]]
            for helper in helpers:
                helper.start()
            read(plans[0])
            for helper in helpers:
                helper.join()

        return run

    folder = tempfile.mkdtemp(dir=shm_directory())
    try:
        maps = []
        for name in ("a", "b"):
            with open(os.path.join(folder, name), "wb+") as handle:
                handle.truncate(nbytes)
                maps.append(np.frombuffer(mmap.mmap(handle.fileno(), nbytes), dtype=np.uint8))
        maps[0][...] = 1
        fd = os.open(os.path.join(folder, "a"), os.O_RDONLY)
        figures = {
            "memcpy between two shared mappings (np.copyto)": best(
                lambda: np.copyto(maps[1], maps[0]), args.repeat
            ),
            "process_vm_readv, one thread": best(split(1), args.repeat),
            "process_vm_readv, split between two threads": best(split(2), args.repeat),
            "pread of a shared-memory file (a kernel copy, no peer)": best(
                lambda: os.preadv(fd, [memoryview(target)], 0), args.repeat
            ),
        }
        os.close(fd)
        maps.clear()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        os.write(finish, b"x")
        os.waitpid(pid, 0)
    baseline = next(iter(figures.values()))
    for name, seconds in figures.items():
        print(f"{name}: {seconds * 1e3:.2f} ms, {baseline / seconds:.2f} of memcpy")


if __name__ == "__main__":
    main()
