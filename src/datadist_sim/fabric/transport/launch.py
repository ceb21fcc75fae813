"""Starting a fabric on demand: the first process of a world to find nobody at the address starts one.

Everything that binds or removes a fabric's socket holds the start lock (``<socket>.lock``, an ``flock``
checked to still be the file at that path), so a burst of processes arriving together starts one fabric:
the starter passes its locked descriptor to the fabric it spawns, and a fabric started by hand takes the
lock itself. A socket that still accepts, or whose backlog is merely full (``EAGAIN``), is never
removed. The fabric so started runs detached (its own session), logs beside the socket (mode 0600, never
the token), exits once no process has been connected for a while, and takes its socket, lock and log
files with it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import socket
import subprocess
import sys
import time
from typing import Iterator, List, Optional

from datadist_sim.fabric.transport.address import ENV_VAR, FabricAddress
from datadist_sim.fabric.transport.wire import private_directory

ON_DEMAND_IDLE_EXIT_S = 5.0
LOCK_TIMEOUT_S = 20.0
_started: List[subprocess.Popen[bytes]] = []

LISTENING, STALE, ABSENT = "listening", "stale", "absent"


def lock_path(where: FabricAddress) -> str:
    return where.path + ".lock"


def log_path(where: FabricAddress) -> str:
    return where.path + ".log"


def probe(path: str) -> str:
    """``LISTENING`` (something accepts there, or its backlog is full: alive), ``STALE`` (a socket file
    nobody listens on) or ``ABSENT``."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(1.0)
    try:
        sock.connect(path)
        return LISTENING
    except (BlockingIOError, socket.timeout):
        return LISTENING  # the backlog is full: someone is there, busy
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK, errno.ETIMEDOUT):
            return LISTENING
        if exc.errno == errno.ECONNREFUSED:
            return STALE
        return ABSENT if not os.path.lexists(path) else STALE
    finally:
        sock.close()


def is_listening(where: FabricAddress) -> bool:
    return probe(where.path) == LISTENING


@contextlib.contextmanager
def start_lock(where: FabricAddress, timeout: float = LOCK_TIMEOUT_S) -> Iterator[int]:
    """Hold the start lock of ``where`` (an exclusive ``flock`` on ``<socket>.lock``, re-taken if the file
    was replaced while we waited); yields the locked descriptor."""
    path = lock_path(where)
    deadline = time.monotonic() + timeout
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"the fabric start lock {path} is held too long") from None
                    time.sleep(0.01)
            try:
                same = os.stat(path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                try:
                    yield fd
                finally:
                    fcntl.flock(fd, fcntl.LOCK_UN)
                return
        finally:
            os.close(fd)


def ensure_running(where: FabricAddress, *, timeout: float = 20.0) -> None:
    """Return once a fabric listens at ``where``, starting one if none does."""
    private_directory(os.path.dirname(where.path))
    if is_listening(where):
        return
    with start_lock(where, timeout) as fd:
        if is_listening(where):
            return
        process = start(where, lock_fd=fd)
        deadline = time.monotonic() + timeout
        while not is_listening(where):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"the datadist-sim fabric did not come up at {where.path} "
                    f"(exit code {process.poll()}; see {log_path(where)})"
                )
            time.sleep(0.01)


def start(
    where: FabricAddress, *, idle_exit_s: float = ON_DEMAND_IDLE_EXIT_S, lock_fd: Optional[int] = None
) -> subprocess.Popen[bytes]:
    """Spawn a detached fabric serving ``where``. The token travels in the environment, not argv, and
    the fabric prints no address (its log, mode 0600, holds no token). ``lock_fd``: the start lock,
    held for the fabric until it listens."""
    env = dict(os.environ)
    env[ENV_VAR] = str(where)
    argv = [sys.executable, "-m", "datadist_sim.fabric", "--idle-exit", str(idle_exit_s), "--quiet"]
    if lock_fd is not None:
        argv += ["--lock-fd", str(lock_fd)]
    log = os.open(log_path(where), os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    try:
        os.fchmod(log, 0o600)
        process = subprocess.Popen(
            argv,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            close_fds=True,
            pass_fds=() if lock_fd is None else (lock_fd,),
        )
    finally:
        os.close(log)
    _started.append(process)  # held, so it is reaped rather than warned about as a lost child
    return process
