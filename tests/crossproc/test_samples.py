"""Two unmodified sample-style programs (CPU tensors registered by
``data_ptr()``, a gloo barrier on loopback) run to completion through ``datadist-sim exec --fabric``,
the first of them starting the fabric on demand."""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from datadist_sim.fabric.transport.address import ENV_VAR, new_address

from .conftest import TIMEOUT_S

pytestmark = [
    pytest.mark.crossproc,
    pytest.mark.slow,  # torch takes seconds to import in each process
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="the samples need torch (CPU)"),
]
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("sample", ["pull_cache_sample.py", "switch_role_sample.py"])
def test_sample_programs_run_as_two_processes_through_exec(sample: str) -> None:
    directory = tempfile.mkdtemp(prefix="dds-")  # short: socket paths are limited
    address = new_address(directory)
    env = {k: v for k, v in os.environ.items() if k != ENV_VAR}
    port = str(_free_port())
    runs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "datadist_sim.cli",
                "exec",
                "--fabric",
                str(address),
                "--",
                sys.executable,
                str(EXAMPLES / sample),
                "--role",
                role,
                "--master_port",
                port,
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for role in ("prompt", "decoder")
    ]
    outputs = []
    try:
        for run in runs:
            out, _ = run.communicate(timeout=TIMEOUT_S)
            outputs.append(out)
    finally:
        for run in runs:
            if run.poll() is None:
                run.kill()
                run.communicate(timeout=TIMEOUT_S)
        shutil.rmtree(directory, ignore_errors=True)
    for run, out in zip(runs, outputs):
        assert run.returncode == 0, out
    assert "prompt: sample completed" in outputs[0]
    assert "decoder: sample completed" in outputs[1]
    assert "bytes checked" in outputs[1]
