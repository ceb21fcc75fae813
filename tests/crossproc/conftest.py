"""Two and more real OS processes sharing one fabric: a fabric per test, programs run as children.

Every wait is bounded (``TIMEOUT_S``), so a broken fabric fails a test instead of hanging CI.
"""

from __future__ import annotations

import contextlib
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import pytest

from datadist_sim.fabric.transport.address import ENV_VAR, FabricAddress, new_address

PROGRAMS = Path(__file__).parent / "programs"
TIMEOUT_S = 60.0


class Program:
    """A child Python process whose stdout lines can be awaited with a timeout."""

    def __init__(
        self, script: str, args: List[str], env: Dict[str, str], *, launcher: Sequence[str] = ()
    ) -> None:
        self.name = script
        self.proc = subprocess.Popen(
            [*launcher, sys.executable, str(PROGRAMS / script), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
            text=True,
        )
        self.lines: List[str] = []
        self._queue: queue.Queue[Optional[str]] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        with self.proc.stdout:
            for line in self.proc.stdout:
                self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def expect(self, prefix: str, timeout: float = TIMEOUT_S) -> str:
        """The next line starting with ``prefix`` (other lines are kept in ``lines``)."""
        while True:
            try:
                line = self._queue.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(
                    f"{self.name}: no {prefix!r} within {timeout} s; got {self.lines}"
                ) from None
            if line is None:
                raise AssertionError(f"{self.name} ended before {prefix!r}; output: {self.lines}")
            self.lines.append(line)
            if line.startswith(prefix):
                return line[len(prefix) :].strip()

    def tell(self, text: str = "go") -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    def finish(self, timeout: float = TIMEOUT_S) -> int:
        code = self.proc.wait(timeout=timeout)
        while True:
            line = self._queue.get(timeout=timeout)
            if line is None:
                return code
            self.lines.append(line)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=TIMEOUT_S)
        assert self.proc.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            self.proc.stdin.close()


class Fabric:
    """A fabric process for one test and a way to start programs in its world."""

    def __init__(self, *server_args: str, **options: str) -> None:
        self.directory = tempfile.mkdtemp(prefix="dds-")  # short: socket paths are limited
        fresh = new_address(self.directory)
        self.address = FabricAddress(fresh.path, fresh.token, dict(options))
        self.env = dict(os.environ)
        self.env[ENV_VAR] = str(self.address)
        self.env["PYTHONUNBUFFERED"] = "1"
        self.server = subprocess.Popen(
            [sys.executable, "-m", "datadist_sim.fabric", *server_args],
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert self.server.stdout is not None
        first = self.server.stdout.readline()  # printed once it listens
        assert first.startswith(ENV_VAR), first
        self.programs: List[Program] = []

    def start(self, script: str, *args: str) -> Program:
        program = Program(script, list(args), self.env)
        self.programs.append(program)
        return program

    def close(self) -> None:
        for program in self.programs:
            program.kill()
        self.server.terminate()
        try:
            self.server.wait(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.server.kill()
            self.server.wait(timeout=TIMEOUT_S)
        assert self.server.stdout is not None
        self.server.stdout.close()
        shutil.rmtree(self.directory, ignore_errors=True)


@pytest.fixture
def fabric() -> Iterator[Fabric]:
    world = Fabric()
    try:
        yield world
    finally:
        world.close()


Child = Tuple[int, int, Tuple[int, bytes]]
"""A process holding known bytes: its pid, their address there, and its mark (``xmem.identity``)."""

_CHILD = """
import sys
import numpy as np
from datadist_sim.fabric.client import xmem
data = (np.arange(1 << 16) % 251).astype(np.uint8)
where, mark = xmem.identity()
print(data.ctypes.data, where, mark.hex(), flush=True)
sys.stdin.readline()
"""


@pytest.fixture
def child() -> Iterator[Child]:
    """A process holding 64 KiB of known bytes, ``(n % 251 for n in range(65536))``: ``(pid, their
    address, its mark)``, for the tests that read another process's memory."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        address, where, mark = proc.stdout.readline().split()
        yield proc.pid, int(address), (int(where), bytes.fromhex(mark))
    finally:
        proc.communicate("\n", timeout=30)  # lets it exit, and closes both pipes


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "crossproc: starts real OS processes sharing a fabric (a few seconds)")
    config.addinivalue_line("markers", "slow: takes seconds (deselect with -m 'not slow')")
