"""Starting a fabric on demand: the first process of a world to find nobody at the address starts one.

A lock file beside the socket makes the start happen once when several processes arrive together.
The fabric so started runs detached (its own session), logs beside the socket, and exits once no
process has been connected for a while, so nothing outlives the programs that used it for long.
"""

from __future__ import annotations

import fcntl
import os
import socket
import subprocess
import sys
import time
from typing import List

from datadist_sim.fabric.address import ENV_VAR, FabricAddress

ON_DEMAND_IDLE_EXIT_S = 5.0
_started: List[subprocess.Popen[bytes]] = []


def is_listening(where: FabricAddress) -> bool:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(1.0)
    try:
        sock.connect(where.path)
        return True
    except OSError:
        return False
    finally:
        sock.close()


def ensure_running(where: FabricAddress, *, timeout: float = 20.0) -> None:
    """Return once a fabric listens at ``where``, starting one if none does."""
    if is_listening(where):
        return
    folder = os.path.dirname(where.path)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    with open(where.path + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if is_listening(where):
                return
            start(where)
            deadline = time.monotonic() + timeout
            while not is_listening(where):
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"the datadist-sim fabric did not come up at {where.path} (see {where.path}.log)"
                    )
                time.sleep(0.02)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def start(where: FabricAddress, *, idle_exit_s: float = ON_DEMAND_IDLE_EXIT_S) -> subprocess.Popen[bytes]:
    """Spawn a detached fabric serving ``where`` (the token travels in the environment, not argv)."""
    env = dict(os.environ)
    env[ENV_VAR] = str(where)
    with open(where.path + ".log", "ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "datadist_sim.fabric", "--idle-exit", str(idle_exit_s)],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            close_fds=True,
        )
    _started.append(process)  # held, so it is reaped rather than warned about as a lost child
    return process
