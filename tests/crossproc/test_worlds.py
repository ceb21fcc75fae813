"""One world per job unless shared on purpose, one fabric however many processes race to start it, and
nothing left behind: ``datadist-sim exec --fabric`` trees started side by side, six processes starting
the standing fabric at once, files and shared memory after a fabric ends or is killed."""

from __future__ import annotations

import os
import signal
import stat
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List

import pytest

from datadist_sim.fabric.host.shm import shm_directory
from datadist_sim.fabric.transport.address import ENV_VAR

from .conftest import TIMEOUT_S, Fabric, Program

pytestmark = pytest.mark.crossproc


@pytest.fixture
def runtime_dir(tmp_path: Path) -> Dict[str, str]:
    """An environment whose per-user runtime directory is a fresh one (so the test sees every file)."""
    env = {k: v for k, v in os.environ.items() if k != ENV_VAR}
    folder = tmp_path / "run"
    folder.mkdir(mode=0o700)
    env["XDG_RUNTIME_DIR"] = str(folder)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _exec(env: Dict[str, str], fabric: str, *args: str) -> Program:
    launcher = [sys.executable, "-m", "datadist_sim.cli", "exec", fabric, "--"]
    return Program("trust_member.py", list(args), env, launcher=launcher)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            return handle.read().rpartition(")")[2].split()[0] not in ("Z", "X")
    except OSError:
        return False


def _wait_until(condition: Callable[[], bool], timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def test_two_exec_trees_get_two_worlds_and_take_them_away(runtime_dir: Dict[str, str]) -> None:
    first = _exec(runtime_dir, "--fabric", "1", "--wait")
    second = _exec(runtime_dir, "--fabric", "1", "--wait")
    try:
        seen = [
            (run.expect("fabric_pid"), run.expect("token"), run.expect("socket")) for run in (first, second)
        ]
        # both run at once, with the same cluster id, each alone in its world
        assert [run.expect("clusters") for run in (first, second)] == ["1", "1"]
        assert seen[0][0] != seen[1][0]
        assert seen[0][1] != seen[1][1]
        assert seen[0][2] != seen[1][2]
        for run in (first, second):
            run.tell()
            run.expect("done")
            assert run.finish() == 0
        # each job's world ended with it: fabric stopped, its directory gone
        assert _wait_until(lambda: not any(_alive(int(pid)) for pid, _, _ in seen), 10)
        assert not any(os.path.exists(os.path.dirname(path)) for _, _, path in seen)
        assert os.listdir(runtime_dir["XDG_RUNTIME_DIR"]) == []
    finally:
        first.kill()
        second.kill()


def test_six_processes_racing_for_the_first_start_agree_on_one_token_and_one_world(
    runtime_dir: Dict[str, str],
) -> None:
    runs = [_exec(runtime_dir, "--fabric=shared", str(10 + i), "--wait") for i in range(6)]
    try:
        pids = {run.expect("fabric_pid") for run in runs}
        tokens = {run.expect("token") for run in runs}
        sockets = {run.expect("socket") for run in runs}
        assert (len(pids), len(tokens), len(sockets)) == (1, 1, 1)
        (socket_path,) = sockets
        folder = Path(socket_path).parent
        (token,) = tokens
        assert (folder / "token").read_text().strip() == token
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
        assert stat.S_IMODE((folder / "token").stat().st_mode) == 0o600
        log = Path(socket_path + ".log")
        assert stat.S_IMODE(log.stat().st_mode) == 0o600
        assert token not in log.read_text()
        for run in runs:
            run.tell()
            run.expect("done")
            assert run.finish() == 0
        # the on-demand fabric leaves once idle, and takes its socket, lock and log with it
        (pid,) = pids
        assert _wait_until(lambda: not _alive(int(pid)), 30)
        assert sorted(os.listdir(folder)) == ["token"]
    finally:
        for run in runs:
            run.kill()


def _backings(pid: int) -> List[str]:
    """The names of the fabric ``pid``'s shared-memory files, as ``/proc`` lists its descriptors."""
    names = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("/memfd:datadist-sim"):
            names.append(target)
    return names


def test_a_killed_fabric_leaves_no_shared_memory_behind(runtime_dir: Dict[str, str]) -> None:
    """A fabric's shared memory has no name anywhere: killed, it leaves nothing in /dev/shm for anyone
    to reclaim, and nothing there that another fabric (another PID namespace sharing /dev/shm) could
    take for a dead one's and unlink."""
    fabric = Fabric()
    try:
        program = fabric.start("kv_prompt.py")
        program.expect("ready")
        assert _backings(fabric.server.pid)  # the cache lives in the fabric's memory files
        before = set(os.listdir(shm_directory()))
        assert not [n for n in before if n.startswith(f"datadist-sim-{fabric.server.pid}")]
        fabric.server.send_signal(signal.SIGKILL)
        fabric.server.wait(timeout=TIMEOUT_S)
        assert not [n for n in set(os.listdir(shm_directory())) - before if n.startswith("datadist-sim")]
    finally:
        fabric.close()


def test_shared_memory_names_cannot_be_guessed_from_the_fabric_pid(fabric: Fabric) -> None:
    program = fabric.start("kv_prompt.py")
    program.expect("ready")
    prefix = "/memfd:datadist-sim-"
    names = [name[len(prefix) :].removesuffix(" (deleted)") for name in _backings(fabric.server.pid)]
    names = [name.removeprefix("scratch-") for name in names]  # a raw transfer's files: the same rule
    assert names
    assert all(len(name) == 16 and int(name, 16) >= 0 for name in names)  # 64 random bits each
    program.tell()
    program.expect("done")
    assert program.finish() == 0
