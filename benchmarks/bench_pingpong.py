"""What a cross-process round trip costs on this machine when the answering side thinks first.

A Unix-socket ping-pong between this process and an echo child, with the echo spinning ``think`` µs of
CPU before it answers: the round trip minus the think time is what the two wake-ups cost. With no think
time that is the ping-pong ``bench perf`` divides by; a fabric answering a small pull thinks for some
100-200 µs, and on a virtual machine whose idle cores halt, the wake-ups then cost several times more
(``benchmarks/README.md``, issue 15's cross-process row). Nothing of the simulator runs here.

    python benchmarks/bench_pingpong.py [--think 0,20,50,100,150,200,300] [--rounds 7] [--calls 300]
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import time
from typing import List, Tuple

_ECHO = """
import os, sys, time
fd, think = int(sys.argv[1]), float(sys.argv[2]) / 1e6
clock = time.perf_counter
while True:
    data = os.read(fd, 4096)
    if not data:
        break
    end = clock() + think
    while clock() < end:
        pass
    os.write(fd, data)
"""


def round_trip(think_us: float, rounds: int, calls: int) -> float:
    """Best seconds per 64-byte ping-pong, the echo thinking ``think_us`` µs before each answer."""
    mine, theirs = socket.socketpair()
    fd = theirs.fileno()
    echo = subprocess.Popen([sys.executable, "-c", _ECHO, str(fd), str(think_us)], pass_fds=(fd,))
    theirs.close()

    def ping() -> None:
        mine.sendall(b"x" * 64)
        got = 0
        while got < 64:
            got += len(mine.recv(4096))

    try:
        for _ in range(100):
            ping()
        best = float("inf")
        for _ in range(rounds):
            start = time.perf_counter()
            for _ in range(calls):
                ping()
            best = min(best, (time.perf_counter() - start) / calls)
    finally:
        mine.close()
        echo.wait(timeout=30)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--think", default="0,20,50,100,150,200,300", help="µs, comma-separated")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    rows: List[Tuple[float, float]] = []
    for think in (float(t) for t in args.think.split(",")):
        rows.append((think, round_trip(think, args.rounds, args.calls) * 1e6))
    print("| echo thinks (µs) | round trip (µs) | round trip - think (µs) |")
    print("|---|---|---|")
    for think, took in rows:
        print(f"| {think:g} | {took:.1f} | {took - think:.1f} |")


if __name__ == "__main__":
    main()
