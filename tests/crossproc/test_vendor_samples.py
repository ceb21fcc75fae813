"""The vendor's own sample programs (hicann/hixl
``examples/python/llm_datadist/``, all nine) run unmodified as Prompt/Decode process pairs through
``datadist-sim exec --fabric``, and the data they print is what the real engine would leave.

The samples are read from a hixl git repository at test time (``DATADIST_SIM_HIXL_REPO``, default the
mirror on the development machine) into a temporary directory; no vendor code is kept in this
repository. They need CPU torch (``tensor.npu()`` and ``torch.npu.set_device`` come from exec's torch_npu
stand-in) and a private network namespace per pair (``unshare -rn``: the samples hard-code a gloo
rendezvous on port 29500, and the rank-table ones a master at 10.10.10.0). Where any of these is
missing the tests skip. Selected pairs run three at a time, each in its own namespace. They run only
with ``DATADIST_SIM_VENDOR_SAMPLES=1``: every process imports torch, which costs minutes on a busy machine.

    DATADIST_SIM_VENDOR_SAMPLES=1 python -m pytest tests/crossproc/test_vendor_samples.py
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest

from datadist_sim.fabric.transport.address import ENV_VAR, new_address

pytestmark = [pytest.mark.crossproc, pytest.mark.slow]

ENV_RUN = "DATADIST_SIM_VENDOR_SAMPLES"
HIXL_REPO = Path(os.environ.get("DATADIST_SIM_HIXL_REPO", "/work/.mirror/hicann+hixl/repo"))
SAMPLES_PATH = "examples/python/llm_datadist"
DRIVER = Path(__file__).parent / "programs" / "netns_run.py"
ADDRESSES = ["10.10.10.0", "10.10.10.1", "10.10.10.2", "10.10.10.3"]
PAIR_TIMEOUT_S = 240.0
PARALLEL = 3

P = ["--role", "p", "--local_host_ip", "10.10.10.1", "--remote_host_ip", "10.10.10.2"]
D = ["--role", "d", "--local_host_ip", "10.10.10.2", "--remote_host_ip", "10.10.10.1"]
XPYD_PROMPTS = ["10.10.10.1:26000", "10.20.10.2:26000"]  # far apart, so the printed values differ


@dataclass(frozen=True)
class Sample:
    """One run: the sample file, each process's arguments, and text each process's output must hold."""

    file: str
    processes: List[List[str]]
    expect: List[Tuple[int, str]] = field(default_factory=list)


def _rows(*values: float) -> Any:
    """A [3, 10] float32 tensor whose row i is values[i] (the samples' BLOCKS_NUM x KV_SHAPE)."""
    import torch

    return torch.stack([torch.full((10,), float(v), dtype=torch.float) for v in values])


def _ip_port_to_int(ip_port: str) -> int:
    """The xpyd sample's cluster id of a host:port (IPv4 in the high 32 bits, port below)."""
    ip, port = ip_port.split(":")
    a, b, c, d = (int(part) for part in ip.split("."))
    return (((a << 24) | (b << 16) | (c << 8) | d) << 16) | int(port)


def _samples() -> Dict[str, Sample]:
    """Every run and its expectations, written from the samples' own flow (see docs/vendor_facts.md)."""
    import torch

    both = ("tensor", "tensor2")
    xpyd_ids = [_ip_port_to_int(p) for p in XPYD_PROMPTS]
    pushed_blocks = _rows(0, 1, 0)  # Decoder's zeros, blocks [0, 1] -> Prompt's blocks [0, 2]
    pushed_cache = _rows(1, 0, 0)  # Decoder's batch 0 (ones) -> the Prompt's cache 1, batch 0
    first_block = _rows(1, 0, 0)  # layer 0 (tensors 0 and 1) cache-to-cache: one block's stride
    return {
        "pull_cache": Sample(
            "pull_cache_sample.py",
            [["--cluster_id", "1"], ["--cluster_id", "2"]],
            [(1, "[pull_cache] success"), (0, "[remove_cache_key] success")],
        ),
        "pull_blocks": Sample(
            "pull_blocks_sample.py",
            [["--cluster_id", "1"], ["--cluster_id", "2"]],
            [(1, f"after pull, tensor={torch.ones(2, 1024 * 1024)}")],
        ),
        "pull_from_cache_to_blocks": Sample(
            "pull_from_cache_to_blocks.py",
            [["--cluster_id", "1"], ["--cluster_id", "2"]],
            [(1, "[pull_blocks] success"), (0, "[remove_cache_key] success")],
        ),
        "pull_blocks_xpyd": Sample(
            "pull_blocks_xpyd_sample.py",
            [
                ["--role", "p", "--local_ip_port", XPYD_PROMPTS[0]],
                ["--role", "p", "--local_ip_port", XPYD_PROMPTS[1]],
                [
                    "--role",
                    "d",
                    "--local_ip_port",
                    "10.10.10.3:26000",
                    "--remote_ip_port",
                    ";".join(XPYD_PROMPTS),
                ],
            ],
            [
                (2, f"after decoder pull from {xpyd_ids[0]}, tensor={_rows(xpyd_ids[0], 0, xpyd_ids[0])}"),
                (2, f"after decoder pull from {xpyd_ids[1]}, tensor={_rows(xpyd_ids[1], 0, xpyd_ids[1])}"),
            ],
        ),
        "push_blocks": Sample(
            "push_blocks_sample.py",
            [P, D],
            [(0, f"after decoder push, {name}={pushed_blocks}") for name in both],
        ),
        "push_cache": Sample(
            "push_cache_sample.py",
            [P, D],
            [(0, f"after decoder push, {name}={pushed_cache}") for name in both],
        ),
        "switch_role": Sample(
            "switch_role_sample.py",
            [P, D],
            [(1, f"after decoder pull, {name}={_rows(1, 0, 1)}") for name in both]
            + [(0, f"after decoder push, {name}={_rows(1, 0, 1)}") for name in both],
        ),
        "transfer_cache_async": Sample(
            "transfer_cache_async_sample.py",
            [P, D],
            [(1, f"after prompt transfer cache, {name}={first_block}") for name in both],
        ),
        "hixl_transfer_backend": Sample(
            "hixl_transfer_backend_sample.py",
            [P, D],
            [(0, "check tensor val success")],
        ),
    }


RUNS = [
    "pull_cache",
    "pull_blocks",
    "pull_from_cache_to_blocks",
    "pull_blocks_xpyd",
    "push_blocks",
    "push_cache",
    "switch_role",
    "transfer_cache_async",
    "hixl_transfer_backend",
]


def _why_not_runnable() -> str:
    """Empty when this machine can run the samples; else what is missing."""
    if os.environ.get(ENV_RUN) != "1":
        return f"{ENV_RUN}=1 runs the vendor's nine samples (a few minutes of torch start-ups)"
    if importlib.util.find_spec("torch") is None:
        return "the samples need torch (CPU)"
    for tool in ("git", "unshare", "ip"):
        if shutil.which(tool) is None:
            return f"no {tool} on PATH"
    if not HIXL_REPO.exists():
        return f"no hixl repository at {HIXL_REPO} (set DATADIST_SIM_HIXL_REPO)"
    probe = subprocess.run(["unshare", "-rn", "ip", "link", "set", "lo", "up"], capture_output=True)
    if probe.returncode != 0:
        return "cannot make a private network namespace (unshare -rn)"
    return ""


def _extract(directory: Path) -> None:
    names = subprocess.run(
        ["git", "-C", str(HIXL_REPO), "ls-tree", "--name-only", f"HEAD:{SAMPLES_PATH}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    for name in names:
        text = subprocess.run(
            ["git", "-C", str(HIXL_REPO), "show", f"HEAD:{SAMPLES_PATH}/{name}"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        (directory / name).write_text(text)


def _run(sample: Sample, samples_dir: Path) -> List[Dict[str, Any]]:
    """The sample's processes, side by side in one private network namespace, through exec --fabric."""
    fabric_dir = tempfile.mkdtemp(prefix="dds-")  # short: socket paths are limited
    try:
        address = str(new_address(fabric_dir))
        exec_ = [sys.executable, "-m", "datadist_sim.cli", "exec", "--fabric", address, "--", sys.executable]
        spec = {
            "addresses": ADDRESSES,
            "commands": [[*exec_, str(samples_dir / sample.file), *args] for args in sample.processes],
            "timeout": PAIR_TIMEOUT_S,
        }
        env = {k: v for k, v in os.environ.items() if k != ENV_VAR}
        env["GLOO_SOCKET_IFNAME"] = "lo"  # the namespace's only interface
        env["PYTHONUNBUFFERED"] = "1"
        run = subprocess.run(
            ["unshare", "-rn", sys.executable, str(DRIVER), json.dumps(spec)],
            env=env,
            capture_output=True,
            text=True,
            timeout=PAIR_TIMEOUT_S + 60,
        )
        assert run.returncode == 0, run.stderr
        results: List[Dict[str, Any]] = json.loads(run.stdout)
        return results
    finally:
        shutil.rmtree(fabric_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def sample_runs(request: pytest.FixtureRequest) -> Iterator[Dict[str, List[Dict[str, Any]]]]:
    """Every selected run, done once for the module, ``PARALLEL`` namespaces at a time."""
    missing = _why_not_runnable()
    if missing:
        pytest.skip(missing)
    module = request.node
    selected = [
        item.callspec.params["run"]
        for item in request.session.items
        if item.module is getattr(module, "obj", None) and hasattr(item, "callspec")
    ]
    samples = _samples()
    directory = Path(tempfile.mkdtemp(prefix="dds-samples-"))
    try:
        _extract(directory)
        order = sorted(set(selected), key=lambda r: r != "pull_blocks_xpyd")  # the 30 s one first
        with ThreadPoolExecutor(max_workers=PARALLEL) as pool:
            futures = {name: pool.submit(_run, samples[name], directory) for name in order}
            yield {name: future.result() for name, future in futures.items()}
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@pytest.mark.parametrize("run", RUNS)
def test_vendor_sample_runs_unmodified_through_exec_fabric_with_the_data_the_engine_leaves(
    run: str, sample_runs: Dict[str, List[Dict[str, Any]]]
) -> None:
    sample = _samples()[run]
    results = sample_runs[run]
    report = "\n".join(f"--- process {i} (rc {r['rc']}):\n{r['out'][-4000:]}" for i, r in enumerate(results))
    assert [r["rc"] for r in results] == [0] * len(sample.processes), report
    for result in results:
        assert "Sample end" in result["out"], report
    for index, text in sample.expect:
        assert text in results[index]["out"], f"process {index} lacks {text!r}\n{report}"
