"""A small ``hixl`` ``transfer_sync`` READ, and WRITE, between two client processes of one fabric (4 KiB
and 16 KiB; the vendor's two-process sample reads 512 blocks of 16 KiB: hicann/hixl
``examples/python/hixl/hixl_d2rd_multiproc_sample.py:28-30``), against one fabric round trip measured in
the same process, in turns with it: a call the fabric answers without the simulator (``now``, the
world's time), which is the least any call across the fabric costs. The ratio is the median of the
rounds' own ratios; the times are wall clock (the work spans three processes), each the best of its
rounds. Both sides' bytes are checked once the timing is done.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from typing import List, NamedTuple

from datadist_sim.bench.perf_setup import Figure

SIZES = (4 << 10, 16 << 10)

_PROGRAM = r"""
import ctypes, statistics, sys, time
import datadist_sim
datadist_sim.install()
import hixl
SERVER, CLIENT = "127.0.0.1:16201", "127.0.0.1:16200"
side, repeat, inner = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
sizes = [int(s) for s in sys.argv[4].split(",")]
total = max(sizes)
engine = hixl.Hixl()
assert engine.initialize(SERVER if side == "server" else CLIENT, {}) == hixl.SUCCESS
# READs fill the client's first half from the server's; WRITEs the server's second half from the client's
buf = (ctypes.c_uint8 * (2 * total))()
ctypes.memset(buf, 0xAA if side == "server" else 0x55, total)
ctypes.memset(ctypes.addressof(buf) + total, 0x00 if side == "server" else 0x77, total)
addr = ctypes.addressof(buf)
code, handle = engine.register_mem(hixl.MemDesc(addr, 2 * total), hixl.MemType.MEM_HOST)
assert code == hixl.SUCCESS, code
if side == "server":
    print("addr", addr, flush=True)
    sys.stdin.readline()
    print("same", bytes(buf) == b"\xaa" * total + b"\x77" * total, flush=True)
else:
    remote = int(sys.stdin.readline())
    assert engine.connect(SERVER, timeout_in_millis=5000) == hixl.SUCCESS
    from datadist_sim.fabric.client.client import current_client
    client = current_client()
    def best(action):
        action()
        start = time.perf_counter()
        for _ in range(inner):
            action()
        return (time.perf_counter() - start) / inner
    def transfer(op, n):
        local, far = (addr, remote) if op == hixl.TransferOp.READ else (addr + total, remote + total)
        descs = [hixl.TransferOpDesc(local, far, n)]
        def run():
            code = engine.transfer_sync(SERVER, op, descs, timeout_in_millis=30000)
            assert code == hixl.SUCCESS, code
        return run
    cases = [transfer(hixl.TransferOp.READ, n) for n in sizes]
    cases += [transfer(hixl.TransferOp.WRITE, n) for n in sizes]
    noops, times = [], [[] for _ in cases]
    for _ in range(repeat):
        noops.append(best(lambda: client.function("now")))
        for found, case in zip(times, cases):
            found.append(best(case))
    ratios = [statistics.median(t / q for t, q in zip(found, noops)) for found in times]
    arrived = bytes(buf[:total]) == b"\xaa" * total
    print("figures", min(noops), arrived, *[f"{min(f)}:{r}" for f, r in zip(times, ratios)], flush=True)
    assert engine.disconnect(SERVER) == hixl.SUCCESS
engine.deregister_mem(handle)
engine.finalize()
"""


class HixlFigures(NamedTuple):
    noop: float
    """One fabric round trip (seconds)."""
    reads: List[float]
    """Each size's READ, then each size's WRITE (seconds)."""
    ratios: List[float]
    """Each of those / round trip, median of paired rounds."""
    same: bool
    """Each side's buffer holds what the other's READs or WRITEs put there, and nothing else changed."""


def hixl_fabric_figures(repeat: int, inner: int, options: str = "") -> HixlFigures:
    """A fabric (``options``: its address options, ``key=value,...``), a server and a client process."""
    from datadist_sim.fabric.transport.address import ENV_VAR, FabricAddress, new_address

    folder = tempfile.mkdtemp(prefix="dds-bench-")
    env = dict(os.environ)
    fresh = new_address(folder)
    opts = dict(item.split("=", 1) for item in options.split(",") if item)
    env[ENV_VAR] = str(FabricAddress(fresh.path, fresh.token, opts))
    server = subprocess.Popen(
        [sys.executable, "-m", "datadist_sim.fabric"], env=env, stdout=subprocess.PIPE, text=True
    )
    procs: List[subprocess.Popen[str]] = []
    try:
        assert server.stdout is not None
        env[ENV_VAR] = server.stdout.readline().strip().partition("=")[2]
        sizes = ",".join(map(str, SIZES))
        for side in ("server", "client"):
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-c", _PROGRAM, side, str(repeat), str(inner), sizes],
                    env=env,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    text=True,
                )
            )
        owner, reader = procs
        assert owner.stdout is not None
        assert owner.stdin is not None
        assert reader.stdout is not None
        assert reader.stdin is not None
        reader.stdin.write(owner.stdout.readline().split()[1] + "\n")
        reader.stdin.flush()
        fields = reader.stdout.readline().split()
        owner.stdin.write("go\n")
        owner.stdin.flush()
        untouched = owner.stdout.readline().split()[1] == "True"
        for proc in procs:
            proc.wait(timeout=120)
        pairs = [field.split(":") for field in fields[3:]]
        return HixlFigures(
            float(fields[1]),
            [float(t) for t, _ in pairs],
            [float(r) for _, r in pairs],
            fields[2] == "True" and untouched,
        )
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.communicate(timeout=30)
        server.terminate()
        server.communicate(timeout=30)
        shutil.rmtree(folder, ignore_errors=True)


def cross_process_hixl(quick: bool) -> List[Figure]:
    """The small cross-process hixl READs and WRITEs against one fabric round trip."""
    repeat, inner = (5, 100) if quick else (15, 300)
    run = hixl_fabric_figures(repeat, inner)
    cases = [("READ", size, "client process <- another client process's memory") for size in SIZES]
    cases += [("WRITE", size, "client process -> another client process's memory") for size in SIZES]
    return [
        Figure(
            "crossproc",
            f"hixl transfer_sync {op} of {size >> 10} KiB, {what} (wall; bytes checked: {run.same})",
            took * 1e6,
            "µs",
            run.noop * 1e6,
            "one fabric round trip (a call answered without the simulator); ratio: median of paired rounds",
            ratio,
        )
        for (op, size, what), took, ratio in zip(cases, run.reads, run.ratios)
    ]
