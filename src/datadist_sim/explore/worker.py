"""Targets run in processes of their own, which are stopped when a run passes its wall bound.

A client may wait on something outside the simulated clock (a socket read, a queue its dead listener
thread never fills) or leave non-daemon threads behind; inside the driver's process nothing could stop
it, and the interpreter would wait for those threads at exit. So every run happens in a worker: a child
forked from the driver (it inherits the target already loaded, the fake installed, a test's fixtures),
that runs the jobs it is sent one after another and answers each with its ``RunResult``.

The driver times each run: a worker that has not answered once the wall bound (plus ``GRACE_S``, so
the worker's own clock check reports a hang that touches the world first) has passed gets ``SIGUSR1``,
on which ``faulthandler`` (registered once per worker: nothing is armed per run) writes every thread's
stack to a file, even while the threads block in the kernel; then the driver kills it, reads the dump
and reports that run as a hang showing where each thread waited. A new worker takes over the jobs
left. Workers end with ``os._exit``, so the target's threads never hold them (or the driver) open.

Forking is Linux's (and the driver holds no threads of the target's: it never runs it itself).
"""

from __future__ import annotations

import contextlib
import faulthandler
import multiprocessing
import os
import re
import signal
import tempfile
import time
from collections import deque
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import IO, Any, Callable, Deque, Dict, List, Optional, Sequence, Tuple

from datadist_sim._outputs import open_output
from datadist_sim.explore.run import Limits, RunResult, Target, own_frame, run_one
from datadist_sim.explore.schedule import Schedule

GRACE_S = 1.0
"""Past the wall bound, the worker's own clock check gets this long to report a hang first."""
DUMP_WAIT_S = 2.0
"""How long the driver waits for a stopped worker's stacks before it kills the worker regardless."""
BATCH = 16
"""Jobs handed to a worker at a time: large enough to hide the hand-off, small enough to spread."""


@dataclass
class Job:
    """One run: its index, world seed, rules, ``SimConfig`` fields to set, and where its trace goes."""

    index: int
    seed: int
    schedule: Schedule
    overrides: Dict[str, Any] = field(default_factory=dict)
    trace_path: Optional[str] = None
    want_baseline: bool = False


@dataclass
class _Worker:
    process: Any
    conn: Connection
    dump_path: str
    main_ident: int = 0
    pending: Deque[Job] = field(default_factory=deque)
    deadline: float = 0.0


class Workers:
    """``count`` worker processes for ``target``; ``run(jobs)`` gives results in job order."""

    def __init__(self, target: Target, limits: Limits, count: int = 1) -> None:
        self.target = target
        self.limits = limits
        self.count = max(1, count)
        self._idle: List[_Worker] = []
        self._dir = tempfile.mkdtemp(prefix="datadist-explore-")

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for worker in self._idle:
            _stop(worker, gently=True)
        self._idle = []
        for name in os.listdir(self._dir):
            os.unlink(os.path.join(self._dir, name))
        os.rmdir(self._dir)

    def one(self, job: Job) -> RunResult:
        return self.run([job])[0]

    def run(
        self, jobs: Sequence[Job], progress: Optional[Callable[[int, int], None]] = None
    ) -> List[RunResult]:
        """Each job's result, in job order; a worker that hangs is replaced and its run reported."""
        results: Dict[int, RunResult] = {}
        queue: Deque[List[Job]] = deque(list(jobs[i : i + BATCH]) for i in range(0, len(jobs), BATCH) if jobs)
        busy: List[_Worker] = []
        position = {id(job): n for n, job in enumerate(jobs)}
        try:
            while queue or busy:
                while queue and len(busy) < self.count:
                    worker = self._idle.pop() if self._idle else self._start()
                    batch = queue.popleft()
                    worker.pending.extend(batch)
                    worker.conn.send(batch)
                    worker.deadline = time.monotonic() + self._bound()
                    busy.append(worker)
                timeout = max(0.0, min(w.deadline for w in busy) - time.monotonic())
                ready = wait([w.conn for w in busy], timeout)
                for worker in list(busy):
                    answered = worker.conn in ready or worker.conn.poll()
                    if not answered and time.monotonic() < worker.deadline:
                        continue
                    result = self._answer(worker) if answered else None
                    if result is None:  # the worker hung or died: report its run, hand on the rest
                        job = worker.pending.popleft()
                        results[position[id(job)]] = self._lost(worker, job)
                        rest = list(worker.pending)
                        busy.remove(worker)
                        _stop(worker, gently=False)
                        if rest:
                            queue.appendleft(rest)
                    else:
                        job = worker.pending.popleft()
                        results[position[id(job)]] = result
                        worker.deadline = time.monotonic() + self._bound()
                        if not worker.pending:
                            busy.remove(worker)
                            self._idle.append(worker)
                    if progress is not None:
                        progress(len(results), len(jobs))
        except BaseException:
            for worker in busy:
                _stop(worker, gently=False)
            raise
        return [results[n] for n in range(len(jobs))]

    def _bound(self) -> float:
        return self.limits.wall_limit_s + GRACE_S

    def _start(self) -> _Worker:
        parent, child = multiprocessing.Pipe()
        dump_path = os.path.join(self._dir, f"stacks-{len(os.listdir(self._dir))}.txt")
        context = multiprocessing.get_context("fork")
        process = context.Process(
            target=_serve, args=(child, self.target, self.limits, dump_path), daemon=True
        )
        process.start()
        child.close()
        worker = _Worker(process, parent, dump_path)
        worker.main_ident = int(parent.recv())
        return worker

    def _answer(self, worker: _Worker) -> Optional[RunResult]:
        try:
            message = worker.conn.recv()
        except (EOFError, OSError):
            return None
        if isinstance(message, _Broken):
            raise RuntimeError(f"explore's worker failed outside the target:\n{message.text}")
        result: RunResult = message
        return result

    def _lost(self, worker: _Worker, job: Job) -> RunResult:
        """The run a worker never answered: a hang, with each thread's stack, where it could dump them."""
        if worker.process.is_alive():
            _dump_stacks(worker)
        stacks = _trim(_read(worker.dump_path))
        result = RunResult(job.index, job.seed, job.schedule, failed=True, signature="hang")
        bound = self.limits.wall_limit_s
        if stacks:
            result.failure = (
                f"hang: wall time bound ({bound:g} s) passed while the target waited outside the "
                f"simulated clock; where each thread was waiting (most recent call first):\n{stacks}"
            )
            result.where = _main_frame(stacks, worker.main_ident)
        else:
            code = worker.process.exitcode
            result.signature = "hang" if code is None else "crash"
            result.failure = (
                f"the target's process stopped answering (wall bound {bound:g} s) and was stopped"
                if code is None
                else f"the target's process died (exit code {code}) before the run ended"
            )
        return result


class _Broken:
    """A worker's own failure (not the target's), sent instead of a result."""

    def __init__(self, text: str) -> None:
        self.text = text


def _serve(conn: Connection, target: Target, limits: Limits, dump_path: str) -> None:
    """The worker: run each job sent, answer each, until the driver closes the pipe."""
    import threading
    import traceback

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the driver's to handle
    try:
        dump = open(dump_path, "w", encoding="utf-8")  # noqa: SIM115 - faulthandler writes it when told
        faulthandler.register(signal.SIGUSR1, file=dump, all_threads=True)
        conn.send(threading.main_thread().ident or 0)
        while True:
            try:
                batch: List[Job] = conn.recv()
            except (EOFError, OSError):
                break
            for job in batch:
                try:
                    result = _execute(target, job, limits)
                except Exception:
                    conn.send(_Broken(traceback.format_exc()))
                    return
                conn.send(result)
    finally:
        os._exit(0)  # the target's threads may still run: they must not keep this process alive


def _execute(target: Target, job: Job, limits: Limits) -> RunResult:
    if job.trace_path is None:
        return _run(target, job, limits, None)
    # the driver created the file (refusing a symlink there); a link planted since is refused too
    with open_output(job.trace_path, "a") as sink:
        return _run(target, job, limits, sink)


def _run(target: Target, job: Job, limits: Limits, sink: Optional[IO[str]]) -> RunResult:
    return run_one(
        target,
        job.index,
        job.seed,
        job.schedule,
        limits,
        overrides=job.overrides,
        trace_sink=sink,
        want_baseline=job.want_baseline,
    )


def _dump_stacks(worker: _Worker) -> None:
    """Ask a stuck worker for every thread's stack and wait (a little) until it has written them."""
    try:
        os.kill(worker.process.pid, signal.SIGUSR1)
    except ProcessLookupError:
        return
    until = time.monotonic() + DUMP_WAIT_S
    size = -1
    while time.monotonic() < until:
        time.sleep(0.05)
        now = os.path.getsize(worker.dump_path) if os.path.exists(worker.dump_path) else 0
        if now and now == size:  # written, and no longer growing
            return
        size = now


def _stop(worker: _Worker, *, gently: bool) -> None:
    with contextlib.suppress(OSError):
        worker.conn.close()
    worker.process.join(0.5 if gently else 0.0)
    if worker.process.is_alive():
        with contextlib.suppress(ProcessLookupError):
            os.kill(worker.process.pid, signal.SIGKILL)
        worker.process.join(1.0)


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read().strip()
    except OSError:
        return ""


_EXPLORE_DIR = os.path.dirname(os.path.abspath(__file__))


def _trim(stacks: str) -> str:
    """Each thread's frames down to the target's entry: the worker's own frames below it are noise."""
    kept: List[str] = []
    skipping = False
    for line in stacks.splitlines():
        if not line.startswith(" "):
            skipping = False
        elif _EXPLORE_DIR in line:
            skipping = True
        if not skipping:
            kept.append(line)
    return "\n".join(kept).strip()


_THREAD = re.compile(r"^(?:Current thread|Thread) (0x[0-9a-f]+)", re.MULTILINE)
_FRAME = re.compile(r'^\s+File "([^"]+)", line (\d+) in (\S+)', re.MULTILINE)


def _main_frame(stacks: str, main_ident: int) -> str:
    """Where the main thread waited, in the target's own code, from a ``faulthandler`` dump."""
    blocks: List[Tuple[int, str]] = []
    starts = list(_THREAD.finditer(stacks))
    for n, match in enumerate(starts):
        end = starts[n + 1].start() if n + 1 < len(starts) else len(stacks)
        blocks.append((int(match.group(1), 16), stacks[match.end() : end]))
    chosen = next((text for ident, text in blocks if ident == main_ident), blocks[0][1] if blocks else "")
    frames = [(m.group(1), int(m.group(2)), m.group(3)) for m in _FRAME.finditer(chosen)]
    return own_frame(frames)
