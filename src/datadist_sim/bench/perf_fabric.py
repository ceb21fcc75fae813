"""Cross-process figures: a fabric and two client processes, each figure against a baseline of the
same run on the same machine.

- a small ``pull_cache`` round trip (Decode process -> fabric -> reply) against a Unix-socket
  ping-pong between two processes (the least any cross-process call can cost), timed by the Decode
  process in turns with its pulls; the ratio is the median of the rounds' own ratios;
- in the same rounds, a call the fabric answers without the simulator (``now``: the world's time)
  against the same ping-pong: what the transport alone costs (the client's proxy, both ends' codec,
  the fabric's loop and the wake-ups of the two processes), so the pull's row can be read as transport
  plus simulator;
- a large pull between memory the two processes registered by raw pointer against a ``memcpy``
  between two shared-memory mappings (what the bytes must cost at least): as the fabric does it where
  the kernel lets one process read another's memory (one copy, ``fabric/client/xmem.py``), and with that
  turned off (``direct_memory=0``: two copies through a shared scratch file);
- a small ``hixl`` ``transfer_sync`` READ between two client processes against one fabric round trip
  (``perf_fabric_hixl``).

**Placement.** A round trip costs what its two wake-ups cost, and that depends on where the scheduler
put the two processes: on one CPU a wake-up is a context switch; across two CPUs it wakes a halted
one, which on a virtual machine without halt polling (ours) costs tens of microseconds. The
scheduler does not place the ping-pong and the pull alike: an echo that has slept through a round of
pulls is put beside its caller for its short round (13-17 us), while a fabric that works in every
round is put on the other CPU (a ping-pong timed in long rounds, when it is placed that way too, took
33-110 us). Left to the scheduler the ratio so divides a pull across CPUs by a ping-pong on one (17x
where either placement alone gives 2.5-13x). So the small pull and the ping-pong are also timed with
each process held to CPUs: every process on one CPU, and the Decode process on one CPU with the fabric
and the echo on another. The round-trip target is read from the run on one CPU, where the baseline is
the fastest ping-pong there is; the run as the scheduler places it is reported beside it.

These are wall-clock figures (the work is spread over three processes), each the best of several
batches; the machines are shared, so read the ratios, not the absolute times.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from typing import FrozenSet, Iterable, List, NamedTuple, Optional, Tuple

from datadist_sim.bench.perf_fabric_hixl import cross_process_hixl
from datadist_sim.bench.perf_setup import Figure

ROUND_TRIP_TARGET = 15.0
RAW_COPY_TARGET = 0.70

_ECHO = """
import os, sys
fd = int(sys.argv[1])
while True:
    data = os.read(fd, 4096)
    if not data:
        break
    os.write(fd, data)
"""

_PROGRAM = r"""
import os, socket, statistics, subprocess, sys, time
import numpy as np
import datadist_sim
datadist_sim.install()
from llm_datadist import (CacheDesc, CacheKey, CacheKeyByIdAndIndex, DataType, LLMClusterInfo,
                          LLMDataDist, LLMRole)
side, nbytes, repeat, inner = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
pool = '{"memory_size": %d}' % max(1 << 24, 4 * nbytes)
opts = {"ge.exec.deviceId": "0", "llm.EnableCacheManager": "1", "llm.MemPoolConfig": pool}
if side == "prompt":
    opts["llm.listenIpInfo"] = "10.0.0.1:26000"
dd = LLMDataDist(LLMRole.PROMPT if side == "prompt" else LLMRole.DECODER, 1 if side == "prompt" else 2)
dd.init(opts)
cm = dd.cache_manager
small = CacheDesc(1, [1, 256], DataType.DT_FLOAT16)
big = CacheDesc(1, [1, nbytes // 2], DataType.DT_FLOAT16)
raw = np.ones(nbytes, dtype=np.uint8) if side == "prompt" else np.zeros(nbytes, dtype=np.uint8)
registered = cm.register_cache(big, [raw.ctypes.data])
if side == "prompt":
    src = cm.allocate_cache(small)
    print("ids", src.cache_id, registered.cache_id, flush=True)
    sys.stdin.readline()
else:
    small_id, raw_id = (int(x) for x in sys.stdin.readline().split())
    info = LLMClusterInfo()
    info.remote_cluster_id = 1
    info.append_local_ip_info("10.0.0.2", 0)
    info.append_remote_ip_info("10.0.0.1", 26000)
    dd.link_clusters([info], 5000)
    dst = cm.allocate_cache(small)
    key = CacheKeyByIdAndIndex(1, small_id, 0)
    def best(action, repeat, inner):
        action()
        found = float("inf")
        for _ in range(repeat):
            start = time.perf_counter()
            for _ in range(inner):
                action()
            found = min(found, (time.perf_counter() - start) / inner)
        return found
    # the baseline in this same process, round by round beside the pulls: a slow spell slows both
    mine, theirs = socket.socketpair()
    fd = theirs.fileno()
    echo = subprocess.Popen([sys.executable, "-c", sys.argv[5], str(fd)], pass_fds=(fd,))
    theirs.close()
    placed = hasattr(os, "sched_setaffinity")
    if sys.argv[6] and placed:
        os.sched_setaffinity(echo.pid, {int(cpu) for cpu in sys.argv[6].split(",")})
    cpus = [",".join(map(str, sorted(os.sched_getaffinity(p)))) if placed else "-" for p in (0, echo.pid)]
    def ping():
        mine.sendall(b"x" * 64)
        got = 0
        while got < 64:
            got += len(mine.recv(4096))
    def pull():
        cm.pull_cache(key, dst, 0)
    from datadist_sim.fabric.client.client import current_client
    client = current_client()
    def noop():
        client.function("now")
    pings, pulls, noops = [], [], []
    for _ in range(repeat):
        pings.append(best(ping, 1, inner))
        pulls.append(best(pull, 1, inner))
        noops.append(best(noop, 1, inner))
    mine.close()
    echo.wait(timeout=30)
    ratio = statistics.median(p / q for p, q in zip(pulls, pings))
    noop_ratio = statistics.median(n / q for n, q in zip(noops, pings))
    raw_key = CacheKeyByIdAndIndex(1, raw_id, 0)
    large = best(lambda: cm.pull_cache(raw_key, registered, 0), max(5, repeat), 1)
    print("figures", min(pulls), min(pings), ratio, min(noops), noop_ratio, large, bool((raw == 1).all()),
          *cpus, flush=True)
dd.finalize()
"""


def _memcpy_shared(nbytes: int, repeat: int) -> float:
    """Seconds to copy ``nbytes`` between two mappings of shared-memory files."""
    import mmap

    import numpy as np

    from datadist_sim.fabric.host.shm import shm_directory

    arrays = []
    with tempfile.TemporaryDirectory(dir=shm_directory()) as folder:
        for name in ("a", "b"):
            with open(os.path.join(folder, name), "wb+") as handle:
                handle.truncate(nbytes)
                arrays.append(np.frombuffer(mmap.mmap(handle.fileno(), nbytes), dtype=np.uint8))
        arrays[0][...] = 1
        best = float("inf")
        for _ in range(repeat + 1):
            start = time.perf_counter()
            np.copyto(arrays[1], arrays[0])
            best = min(best, time.perf_counter() - start)
        del arrays
    return best


class Placement(NamedTuple):
    """The CPUs each process of a fabric run may use: the fabric (and the Prompt process, idle while
    timed), the Decode process, and the echo that answers the Decode process's ping-pong."""

    name: str
    fabric: FrozenSet[int]
    decode: FrozenSet[int]
    echo: FrozenSet[int]


def placements() -> List[Placement]:
    """Every process on one CPU, and (with two CPUs to use) the Decode process on one and the fabric and
    the echo on another: in each, the ping-pong crosses between CPUs exactly where the pull does. None
    where a process cannot be held to CPUs."""
    if not hasattr(os, "sched_setaffinity"):
        return []
    cpus = sorted(os.sched_getaffinity(0))
    one = frozenset(cpus[:1])
    found = [Placement("every process on one CPU", one, one, one)]
    if len(cpus) > 1:
        other = frozenset(cpus[1:2])
        found.append(
            Placement("the Decode process on one CPU, the fabric and the echo on another", other, one, other)
        )
    return found


def cpu_list(cpus: Iterable[int]) -> str:
    """CPUs as a fabric run reports them (and the Decode program writes them): "0,1"."""
    return ",".join(map(str, sorted(cpus)))


class FabricFigures(NamedTuple):
    """What one fabric run measured (seconds; each time the best of its rounds, taken in turn in the
    Decode process; each ratio the median of the rounds' own)."""

    pull: float
    ping: float
    ratio: float
    """Small pull / ping-pong."""
    noop: float
    """A call the fabric answers without the simulator."""
    noop_ratio: float
    """No-op call / ping-pong."""
    large: float
    same: bool
    """The large pull's bytes arrived."""
    cpus: Tuple[str, str, str]
    """The CPUs the fabric, the Decode process and its echo were allowed, as each process saw them at
    the end ("0,1"; "-" where the platform does not say)."""


def _fabric_figures(
    nbytes: int,
    repeat: int,
    inner: int,
    direct: bool = True,
    placement: Optional[Placement] = None,
) -> FabricFigures:
    """One fabric and its two client processes: the small pull, the ping-pong and the no-op call timed
    in turn (``repeat`` rounds of ``inner`` each), then a large pull of ``nbytes``. With a
    ``placement``, each process is held to its CPUs from its start; without, the scheduler places them."""
    from datadist_sim.fabric.transport.address import ENV_VAR, FabricAddress, new_address

    folder = tempfile.mkdtemp(prefix="dds-bench-")
    env = dict(os.environ)
    fresh = new_address(folder)
    env[ENV_VAR] = str(FabricAddress(fresh.path, fresh.token, {} if direct else {"direct_memory": "0"}))
    server = subprocess.Popen(
        [sys.executable, "-m", "datadist_sim.fabric"],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    if placement is not None:
        os.sched_setaffinity(server.pid, placement.fabric)
    procs: List[subprocess.Popen[str]] = []
    try:
        assert server.stdout is not None
        line = server.stdout.readline().strip()
        env[ENV_VAR] = line.partition("=")[2]
        echo_cpus = "" if placement is None else cpu_list(placement.echo)
        args = [str(nbytes), str(repeat), str(inner), _ECHO, echo_cpus]

        def start(side: str) -> subprocess.Popen[str]:
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-c", _PROGRAM, side, *args],
                    env=env,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    text=True,
                )
            )
            if placement is not None:
                cpus = placement.decode if side == "decode" else placement.fabric
                os.sched_setaffinity(procs[-1].pid, cpus)
            return procs[-1]

        prompt, decode = start("prompt"), start("decode")
        assert prompt.stdout is not None
        assert prompt.stdin is not None
        assert decode.stdout is not None
        assert decode.stdin is not None
        ids = prompt.stdout.readline().split()[1:]
        decode.stdin.write(" ".join(ids) + "\n")
        decode.stdin.flush()
        fields = decode.stdout.readline().split()
        fabric_cpus = "-"
        if hasattr(os, "sched_getaffinity"):
            fabric_cpus = cpu_list(os.sched_getaffinity(server.pid))
        prompt.stdin.write("go\n")
        prompt.stdin.flush()
        for proc in procs:
            proc.wait(timeout=120)
        pull, ping, ratio, noop, noop_ratio, large = (float(f) for f in fields[1:7])
        return FabricFigures(
            pull,
            ping,
            ratio,
            noop,
            noop_ratio,
            large,
            fields[7] == "True",
            (fabric_cpus, fields[8], fields[9]),
        )
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.communicate(timeout=30)  # reaps it and closes its pipes
        server.terminate()
        server.communicate(timeout=30)
        import shutil

        shutil.rmtree(folder, ignore_errors=True)


def cross_process(quick: bool) -> List[Figure]:
    """The cross-process figures (a fabric and two client processes are started and stopped, once as
    the scheduler places them and once per ``placements()``). The round-trip target is held by the run
    with every process on one CPU where there is one, since only a placed run times the pull and the
    ping-pong in the same placement (see the module's docstring)."""
    repeat, inner = (5, 150) if quick else (15, 500)
    nbytes = (16 if quick else 64) << 20
    free = _fabric_figures(nbytes, repeat, inner)
    placed = [(where, _fabric_figures(1 << 20, repeat, inner, placement=where)) for where in placements()]
    *_, scratch, scratch_same, _ = _fabric_figures(nbytes, 1, 10, direct=False)
    copy = _memcpy_shared(nbytes, max(5, repeat))
    share = copy / free.large
    mib = nbytes >> 20
    held = placed[0][1] if placed else free
    figures: List[Figure] = []
    for name, run in [("processes placed by the scheduler", free)] + [
        (f"{where.name} (CPUs fabric {run.cpus[0]}, Decode {run.cpus[1]}, echo {run.cpus[2]})", run)
        for where, run in placed
    ]:
        pinged = (
            "ping-pong" if run is not free else "ping-pong, which may share a CPU while the pull does not"
        )
        figures.append(
            Figure(
                "crossproc",
                f"pull_cache of a 512 B cache by id, Decode process -> fabric -> reply (wall); {name}",
                run.pull * 1e6,
                "µs",
                run.ping * 1e6,
                f"{pinged}; ratio: median of paired rounds",
                run.ratio,
                f"<= {ROUND_TRIP_TARGET:g}x ping-pong" if run is held else "",
                run.ratio <= ROUND_TRIP_TARGET if run is held else None,
            )
        )
        figures.append(
            Figure(
                "crossproc",
                f"a call the fabric answers without the simulator (the transport alone); {name}",
                run.noop * 1e6,
                "µs",
                run.ping * 1e6,
                "the same ping-pong; ratio: median of paired rounds",
                run.noop_ratio,
            )
        )
    checked = f"bytes checked: {free.same}"
    return [
        *figures,
        Figure(
            "crossproc",
            f"pull_cache of {mib} MiB, raw pointer -> raw pointer of two processes ({checked})",
            free.large * 1e3,
            "ms",
            copy * 1e3,
            "memcpy between shared mappings",
            share,
            f">= {RAW_COPY_TARGET} of memcpy",
            share >= RAW_COPY_TARGET and free.same,
        ),
        Figure(
            "crossproc",
            f"the same with direct_memory=0 (through a scratch file; bytes checked: {scratch_same})",
            scratch * 1e3,
            "ms",
            copy * 1e3,
            "memcpy between shared mappings",
            copy / scratch,
        ),
        *cross_process_hixl(quick),
    ]
