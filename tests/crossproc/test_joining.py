"""Joining a fabric during a burst of connections, and a foreground fabric's directory after SIGTERM.

A Unix socket whose backlog is full refuses a connection at once (``EAGAIN``), where a TCP one would
make it wait: a process's first call (which opens a connection of its own) must wait that out within
the call's bound, as a call waits for a busy fabric, not fail with ``LLM_FAILED`` as if the fabric were
gone."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import List

import pytest

from datadist_sim.fabric.client.client import connect
from datadist_sim.fabric.transport.address import ENV_VAR

from .conftest import TIMEOUT_S, Fabric

pytestmark = pytest.mark.crossproc

MAX_FLOOD = 70_000


def _fill_backlog(path: str) -> List[socket.socket]:
    """Connections queued at ``path`` until its backlog refuses one more (the fabric is stopped)."""
    held: List[socket.socket] = []
    for _ in range(MAX_FLOOD):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            sock.connect(path)
        except BlockingIOError:
            sock.close()
            return held
        held.append(sock)
    pytest.skip(f"the backlog took {MAX_FLOOD} connections without filling")


def test_a_call_made_while_the_backlog_is_full_waits_for_room(fabric: Fabric) -> None:
    client = connect(fabric.address)
    held: List[socket.socket] = []
    try:
        os.kill(fabric.server.pid, signal.SIGSTOP)  # a fabric too busy to accept, for a moment
        try:
            held = _fill_backlog(fabric.address.path)
        finally:
            resume = threading.Timer(1.0, os.kill, (fabric.server.pid, signal.SIGCONT))
            resume.start()
        started = time.monotonic()
        status = client.function("status")  # this process's first call: a connection of its own
        assert time.monotonic() - started >= 0.5  # it waited for the fabric to take the flood in
        assert status["processes"] == 1  # answered: this process, joined
        resume.join()
    finally:
        os.kill(fabric.server.pid, signal.SIGCONT)
        for sock in held:
            sock.close()
        client.close()


def test_a_foreground_fabric_stopped_by_sigterm_removes_its_directory(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != ENV_VAR}
    env["XDG_RUNTIME_DIR"] = str(tmp_path)
    server = subprocess.Popen(
        [sys.executable, "-m", "datadist_sim", "fabric"], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        assert line.startswith(f"{ENV_VAR}=unix:{tmp_path}"), line
        folder = os.path.dirname(line.split(":", 1)[1].split("?")[0])
        assert os.path.isdir(folder)
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=TIMEOUT_S) == 0
        assert not os.path.exists(folder), os.listdir(folder)
        assert os.listdir(tmp_path) == []
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(timeout=TIMEOUT_S)
        if server.stdout is not None:
            server.stdout.close()
