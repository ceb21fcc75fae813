"""The vendor's multi-process hixl sample (hicann/hixl ``examples/python/hixl/hixl_d2rd_multiproc_sample.py``)
runs unmodified as a server/client pair of processes through ``datadist-sim exec --fabric``, and prints
what it prints on hardware: the client READs the server's 8 MiB buffer of ``0xAA`` in 512 blocks
(``:204-216, 283-291``) and verifies every byte (``:219-225``); both sides deregister and finalize
without a warning and end with ``Sample finished successfully`` (``:349``).

The sample is read from a hixl git repository at test time (``DATADIST_SIM_HIXL_REPO``, default the mirror
on the development machine) into a temporary directory; no vendor code is kept in this repository. It
passes its buffer's address over a TCP socket on 127.0.0.1:17001 (``:37, 192``), so the pair runs in a
private network namespace (``unshare -rn``). It imports torch: with ``DATADIST_SIM_VENDOR_SAMPLES=1`` and
CPU torch installed it runs on real torch (minutes of start-up on a busy machine); otherwise on a small
numpy-backed torch (``programs/torch_stub``) that, like CPU torch, refuses ``device="npu"``, so exec's
torch_npu stand-in is what makes the sample's device buffers either way.

    python -m pytest tests/crossproc/test_vendor_hixl_sample.py
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List

import pytest

from datadist_sim.fabric.transport.address import ENV_VAR, new_address

pytestmark = [pytest.mark.crossproc, pytest.mark.slow]

HIXL_REPO = Path(os.environ.get("DATADIST_SIM_HIXL_REPO", "/work/.mirror/hicann+hixl/repo"))
SAMPLE = "examples/python/hixl/hixl_d2rd_multiproc_sample.py"
PROGRAMS = Path(__file__).parent / "programs"
DRIVER = PROGRAMS / "netns_in_turn.py"
TORCH_STUB = PROGRAMS / "torch_stub"
TIMEOUT_S = 240.0

SERVER_PRINTS = [
    "Server engine initialized",
    "Server RegisterMem success, handle=0x",
    "Server sent buffer addr 0x",
    "Server done",
    "Server finalize done",
    "Sample finished successfully",
]
CLIENT_PRINTS = [
    "Client engine initialized",
    "Client RegisterMem success, handle=0x",
    "Client received remote addr 0x",
    "Client Connect success",
    "Client TransferSync READ completed",
    "Client Verify success — all bytes match 0xAA",
    "Client Disconnect success",
    "Client finalize done",
    "Sample finished successfully",
]
NEVER_PRINTED = ["DeregisterMem ret=", "Disconnect ret=", "[ERROR]", "Traceback", "timed out"]


def _why_not_runnable() -> str:
    for tool in ("git", "unshare", "ip"):
        if shutil.which(tool) is None:
            return f"no {tool} on PATH"
    if not HIXL_REPO.exists():
        return f"no hixl repository at {HIXL_REPO} (set DATADIST_SIM_HIXL_REPO)"
    found = subprocess.run(
        ["git", "-C", str(HIXL_REPO), "cat-file", "-e", f"HEAD:{SAMPLE}"], capture_output=True
    )
    if found.returncode != 0:
        return f"the hixl repository at {HIXL_REPO} has no {SAMPLE}"
    probe = subprocess.run(["unshare", "-rn", "ip", "link", "set", "lo", "up"], capture_output=True)
    if probe.returncode != 0:
        return "cannot make a private network namespace (unshare -rn)"
    return ""


def _real_torch() -> bool:
    return (
        os.environ.get("DATADIST_SIM_VENDOR_SAMPLES") == "1" and importlib.util.find_spec("torch") is not None
    )


def _run_pair(directory: Path) -> List[Dict[str, Any]]:
    sample = directory / "hixl_d2rd_multiproc_sample.py"
    sample.write_text(
        subprocess.run(
            ["git", "-C", str(HIXL_REPO), "show", f"HEAD:{SAMPLE}"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    )
    fabric_dir = tempfile.mkdtemp(prefix="dds-")  # short: socket paths are limited
    try:
        address = str(new_address(fabric_dir))
        exec_ = [sys.executable, "-m", "datadist_sim.cli", "exec", "--fabric", address, "--", sys.executable]
        spec = {
            "commands": [[*exec_, str(sample), "--role", role] for role in ("server", "client")],
            "ready": ["waiting for client", None],  # the client starts once the server listens
            "timeout": TIMEOUT_S,
        }
        env = {k: v for k, v in os.environ.items() if k != ENV_VAR}
        env["PYTHONUNBUFFERED"] = "1"
        if not _real_torch():
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TORCH_STUB), env.get("PYTHONPATH")]))
        run = subprocess.run(
            ["unshare", "-rn", sys.executable, str(DRIVER), json.dumps(spec)],
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S + 60,
        )
        assert run.returncode == 0, run.stderr
        results: List[Dict[str, Any]] = json.loads(run.stdout)
        return results
    finally:
        shutil.rmtree(fabric_dir, ignore_errors=True)


def test_vendor_hixl_multiproc_sample_runs_unmodified_and_verifies_every_byte_it_read(
    tmp_path: Path,
) -> None:
    missing = _why_not_runnable()
    if missing:
        pytest.skip(missing)
    server, client = _run_pair(tmp_path)
    report = f"--- server (rc {server['rc']}):\n{server['out'][-4000:]}\n--- client (rc {client['rc']}):\n"
    report += client["out"][-4000:]
    assert (server["rc"], client["rc"]) == (0, 0), report
    for result, expected in ((server, SERVER_PRINTS), (client, CLIENT_PRINTS)):
        at = 0
        for text in expected:  # in the order the sample prints them
            found = result["out"].find(text, at)
            assert found >= 0, f"{text!r} missing or out of order\n{report}"
            at = found + len(text)
        for text in NEVER_PRINTED:
            assert text not in result["out"], report
    # the address the server printed is the one the client received (hixl_d2rd_multiproc_sample.py:126, 154)
    sent = server["out"].split("Server sent buffer addr ")[1].split()[0]
    assert f"Client received remote addr {sent}" in client["out"], report
