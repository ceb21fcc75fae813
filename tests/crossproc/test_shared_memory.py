"""A fabric's shared memory belongs to it alone: another fabric, or ``fabric --clean``, started in
another PID namespace that shares ``/dev/shm`` (a pod, ``--ipc=host``), where the live fabric's pid
does not exist, leaves it alone; and nobody can truncate it under the fabric (see also
``test_fabric_parts.test_a_backing_cannot_be_truncated_under_the_fabric``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from datadist_sim.fabric.transport.address import ENV_VAR

from .conftest import TIMEOUT_S, Fabric

pytestmark = pytest.mark.crossproc


def _in_new_pid_namespace(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )


@pytest.mark.skipif(shutil.which("unshare") is None or os.getuid() != 0, reason="needs unshare --pid (root)")
def test_a_fabric_and_a_clean_in_another_pid_namespace_leave_a_live_fabrics_memory_alone(
    fabric: Fabric, tmp_path: Path
) -> None:
    program = fabric.start("views_again.py")
    program.expect("ready")
    env = {k: v for k, v in os.environ.items() if k != ENV_VAR}
    env["XDG_RUNTIME_DIR"] = str(tmp_path)
    cleaned = _in_new_pid_namespace("-m", "datadist_sim", "fabric", "--clean", env=env)
    assert cleaned.returncode == 0, cleaned.stderr
    other = tmp_path / "other"
    started = _in_new_pid_namespace(
        "-m", "datadist_sim.fabric", "--idle-exit", "0.1", "--socket-dir", str(other), env=env
    )
    assert started.returncode == 0, started.stderr
    program.tell()
    assert program.expect("mapped") == "True"
    program.expect("done")
    assert program.finish() == 0
