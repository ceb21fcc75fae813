"""Cross-process hixl cost: a connected 4 KiB ``transfer_sync`` READ and a 64 MiB one between two
processes of one fabric, the large one against a memcpy of the same bytes in the same run.

    datadist-sim exec --fabric -- python benchmarks/hixl_crossproc.py

Starts the serving process itself (a second ``python`` of this file with ``serve``); prints two lines.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

import hixl
import numpy as np

SERVER, CLIENT = "127.0.0.1:16201", "127.0.0.1:16200"
SIZE = 64 << 20


def _register(engine: hixl.Hixl, buf: np.ndarray) -> int:
    addr = int(buf.__array_interface__["data"][0])
    assert engine.register_mem(hixl.MemDesc(addr, buf.nbytes), hixl.MemType.MEM_HOST)[0] == hixl.SUCCESS
    return addr


def serve(folder: str) -> None:
    engine = hixl.Hixl()
    assert engine.initialize(SERVER, {}) == hixl.SUCCESS
    buf = np.full(SIZE, 0xAA, np.uint8)
    with open(os.path.join(folder, "addr.tmp"), "w") as handle:
        handle.write(str(_register(engine, buf)))
    os.rename(os.path.join(folder, "addr.tmp"), os.path.join(folder, "addr"))
    sys.stdin.readline()  # until the measuring process is done
    engine.finalize()


def measure() -> None:
    folder = tempfile.mkdtemp()
    server = subprocess.Popen([sys.executable, __file__, "serve", folder], stdin=subprocess.PIPE, text=True)
    path = os.path.join(folder, "addr")
    while not os.path.exists(path):
        time.sleep(0.05)
    with open(path) as handle:
        remote = int(handle.read())
    engine = hixl.Hixl()
    assert engine.initialize(CLIENT, {}) == hixl.SUCCESS
    buf = np.zeros(SIZE, np.uint8)
    local = _register(engine, buf)
    assert engine.connect(SERVER) == hixl.SUCCESS
    small = [hixl.TransferOpDesc(local, remote, 4096)]
    for _ in range(50):
        engine.transfer_sync(SERVER, hixl.TransferOp.READ, small)
    calls = 500
    start = time.perf_counter()
    for _ in range(calls):
        assert engine.transfer_sync(SERVER, hixl.TransferOp.READ, small) == hixl.SUCCESS
    print(f"4 KiB READ across processes: {(time.perf_counter() - start) / calls * 1e6:.0f} us/call")
    big = [hixl.TransferOpDesc(local, remote, SIZE)]
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        assert engine.transfer_sync(SERVER, hixl.TransferOp.READ, big, timeout_in_millis=60000) == 0
        best = min(best, time.perf_counter() - start)
    assert bool((buf == 0xAA).all())
    source = np.full(SIZE, 0x55, np.uint8)
    start = time.perf_counter()
    np.copyto(buf, source)
    memcpy = time.perf_counter() - start
    print(
        f"64 MiB READ across processes: {best * 1e3:.1f} ms; "
        f"memcpy {memcpy * 1e3:.1f} ms; ratio {memcpy / best:.2f}"
    )
    engine.finalize()
    assert server.stdin is not None
    server.stdin.write("end\n")
    server.stdin.close()
    server.wait()


if __name__ == "__main__":
    serve(sys.argv[2]) if sys.argv[1:2] == ["serve"] else measure()
