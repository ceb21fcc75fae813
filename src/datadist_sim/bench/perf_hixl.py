"""A small ``hixl`` ``transfer_sync`` (4 KiB READ, connected) against a lean hand-written model of the
same bookkeeping (target: <= 3x, and <= 10 µs of CPU); and a 64 MiB one against a memcpy of the same bytes
(target: >= 0.8 of its throughput).

The lean model is what the call would cost if the simulator were written for that one case only: the
argument types checked as plain comparisons, the timeout, a lock, the connection looked up, each
descriptor's non-zero addresses and both ranges found inside a registered region (a scan of the
regions, as ours), the clock moved by size / bandwidth + round trip, the bytes copied between the two
registered numpy buffers by memoryview slices, and one trace record of the call's arguments. It does
not re-check with the kernel that raw memory is still mapped (ours does, one system call per small
transfer: ``ProcessMemory.copy_pair``), has no faults, no auto-connect and no timeouts.
"""

from __future__ import annotations

import statistics
import threading
from collections import deque
from typing import Any, Callable, Deque, Dict, List, Optional, Tuple

import numpy as np

import datadist_sim.hixl as hixl
from datadist_sim import SimWorld
from datadist_sim.bench.perf_setup import Figure, best_of

RATIO_TARGET = 3.0
CPU_TARGET_US = 10.0
SERVER = "127.0.0.1:16001"
NBYTES = 4096
BULK_BYTES = 64 << 20
BULK_TARGET = 0.8


class LeanTransfer:
    """One client reading from one connected server: ``transfer_sync``'s bookkeeping and nothing else."""

    def __init__(self, local: np.ndarray, remote: np.ndarray, *, bandwidth: float = 25e9) -> None:
        self.lock = threading.Lock()
        self.now, self.bandwidth, self.rtt_s = 0.0, bandwidth, 0.0005
        self.connected = {SERVER}
        self.local: List[Tuple[int, int, np.ndarray]] = [(local.ctypes.data, local.nbytes, local)]
        self.remote: Dict[str, List[Tuple[int, int, np.ndarray]]] = {
            SERVER: [(remote.ctypes.data, remote.nbytes, remote)]
        }
        self.trace: Deque[Tuple[Any, ...]] = deque(maxlen=10_000)

    @staticmethod
    def _find(regions: List[Tuple[int, int, np.ndarray]], addr: int, nbytes: int) -> Optional[memoryview]:
        for start, size, array in regions:
            if start <= addr and addr + nbytes <= start + size:
                return array.data[addr - start : addr - start + nbytes]
        return None

    def transfer_sync(self, remote_engine: Any, op: Any, op_descs: Any, timeout_in_millis: Any = 1000) -> int:
        if (
            type(remote_engine) is not str
            or type(op) is not hixl.TransferOp
            or type(op_descs) is not list
            or type(timeout_in_millis) is not int
        ):
            raise TypeError("transfer_sync(): incompatible function arguments")
        code = hixl.SUCCESS
        if timeout_in_millis <= 0:
            code = hixl.PARAM_INVALID
        else:
            with self.lock:
                if remote_engine not in self.connected:
                    code = hixl.NOT_CONNECTED
                else:
                    copies = []
                    remote = self.remote[remote_engine]
                    for desc in op_descs:
                        if type(desc) is not hixl.TransferOpDesc:
                            raise TypeError("transfer_sync(): incompatible function arguments")
                        local_addr, remote_addr, nbytes = desc.local_addr, desc.remote_addr, desc.len
                        mine = self._find(self.local, local_addr, nbytes) if local_addr else None
                        theirs = self._find(remote, remote_addr, nbytes) if remote_addr else None
                        if not nbytes or mine is None or theirs is None:
                            code = hixl.PARAM_INVALID
                            break
                        copies.append((mine, theirs) if op is hixl.READ else (theirs, mine))
                    if code == hixl.SUCCESS:
                        total = 0
                        for dst, src in copies:
                            dst[:] = src
                            total += len(dst)
                        self.now += self.rtt_s + total / self.bandwidth
        self.trace.append(
            (self.now, "hixl.transfer_sync", code, (remote_engine, op, op_descs, timeout_in_millis))
        )
        return code


def _pair(world: SimWorld, local: np.ndarray, remote: np.ndarray) -> Tuple[hixl.Hixl, hixl.Hixl]:
    with world.activate():
        server, client = hixl.Hixl(), hixl.Hixl()
        server.initialize(SERVER)
        client.initialize("127.0.0.1:0")
    server.register_mem(hixl.MemDesc(remote.ctypes.data, remote.nbytes), hixl.MEM_DEVICE)
    client.register_mem(hixl.MemDesc(local.ctypes.data, local.nbytes), hixl.MEM_HOST)
    assert client.connect(SERVER) == hixl.SUCCESS
    return server, client


def transfer_figures(rounds: int, inner: int) -> List[Figure]:
    """Seconds per call of ours and of the lean model, interleaved round by round; the ratio is the
    median of the rounds' own ratios (as ``perf._pull_pair``)."""
    world = SimWorld()
    remote = np.arange(NBYTES, dtype=np.uint32).astype(np.uint8)
    local, lean_local = np.zeros(NBYTES, np.uint8), np.zeros(NBYTES, np.uint8)
    server, client = _pair(world, local, remote)
    lean = LeanTransfer(lean_local, remote)
    ours_desc = [hixl.TransferOpDesc(local.ctypes.data, remote.ctypes.data, NBYTES)]
    lean_desc = [hixl.TransferOpDesc(lean_local.ctypes.data, remote.ctypes.data, NBYTES)]
    cases: List[Callable[[], object]] = [
        lambda: client.transfer_sync(SERVER, hixl.READ, ours_desc),
        lambda: lean.transfer_sync(SERVER, hixl.READ, lean_desc),
    ]
    best = [float("inf")] * 2
    ratios: List[float] = []
    for _ in range(rounds):
        took = [best_of(1, case, inner) for case in cases]
        best = [min(b, t) for b, t in zip(best, took)]
        ratios.append(took[0] / took[1])
    same = bool(np.array_equal(local, remote)) and bool(np.array_equal(lean_local, remote))
    client.finalize()
    server.finalize()
    ratio = statistics.median(ratios)
    return [
        Figure(
            "hixl",
            f"transfer_sync READ of 4 KiB, connected (bytes checked: {same})",
            best[0] * 1e6,
            "µs",
            best[1] * 1e6,
            "lean model; ratio: median of paired rounds",
            ratio,
            f"<= {RATIO_TARGET} x lean, <= {CPU_TARGET_US} µs",
            same and ratio <= RATIO_TARGET and best[0] * 1e6 <= CPU_TARGET_US,
        )
    ]


def bulk_figures(rounds: int) -> List[Figure]:
    """A 64 MiB ``transfer_sync`` READ between two raw registrations against a memcpy of the same bytes
    (``np.copyto``), interleaved round by round; the figure is throughput, the ratio ours / memcpy."""
    world = SimWorld()
    remote = np.random.default_rng(0).integers(0, 256, BULK_BYTES, dtype=np.uint8)
    local, plain = np.zeros(BULK_BYTES, np.uint8), np.zeros(BULK_BYTES, np.uint8)
    server, client = _pair(world, local, remote)
    desc = [hixl.TransferOpDesc(local.ctypes.data, remote.ctypes.data, BULK_BYTES)]
    cases: List[Callable[[], object]] = [
        lambda: client.transfer_sync(SERVER, hixl.READ, desc, 60_000),
        lambda: np.copyto(plain, remote),
    ]
    best = [float("inf")] * 2
    ratios: List[float] = []
    for _ in range(rounds):
        took = [best_of(1, case, 1) for case in cases]
        best = [min(b, t) for b, t in zip(best, took)]
        ratios.append(took[1] / took[0])
    same = bool(np.array_equal(local, remote))
    client.finalize()
    server.finalize()
    ratio = statistics.median(ratios)
    return [
        Figure(
            "hixl",
            f"transfer_sync READ of 64 MiB, raw pointers (bytes checked: {same})",
            BULK_BYTES / best[0] / 1e9,
            "GB/s",
            BULK_BYTES / best[1] / 1e9,
            "memcpy (np.copyto) of the same bytes; ratio: median of paired rounds",
            ratio,
            f">= {BULK_TARGET} x memcpy",
            same and ratio >= BULK_TARGET,
        )
    ]


def hixl_perf(quick: bool) -> List[Figure]:
    return transfer_figures(rounds=5 if quick else 21, inner=300 if quick else 1000) + bulk_figures(
        rounds=3 if quick else 9
    )
