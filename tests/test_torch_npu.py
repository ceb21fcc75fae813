"""exec's torch_npu stand-in: ``torch.npu`` and ``Tensor.npu()`` on CPU torch, without needing torch.

A small package named ``torch`` written to a temporary directory plays torch, so these run where torch is
not installed (CI); the vendor samples test it against real CPU torch (tests/crossproc).
"""

from __future__ import annotations

import os
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from datadist_sim import _torch_npu

FAKE_TORCH = """
class Tensor:
    def __init__(self, data=()):
        self.data = list(data)

    def clone(self):
        return Tensor(self.data)
"""


def _fake_torch() -> Any:
    module = types.ModuleType("torch")
    exec(FAKE_TORCH, module.__dict__)
    return module


def test_patch_gives_torch_npu_device_calls_and_a_copying_tensor_npu() -> None:
    torch = _fake_torch()
    try:
        assert _torch_npu.patch(torch) is True
        torch.npu.set_device(3)
        assert torch.npu.current_device() == 3
        torch.npu.set_device("npu:5")
        assert (torch.npu.current_device(), torch.npu.device_count(), torch.npu.is_available()) == (
            5,
            8,
            True,
        )
        host = torch.Tensor([1, 2])
        device = host.npu()
        assert device is not host
        assert device.data == [1, 2]
    finally:
        sys.modules.pop("torch.npu", None)


def test_patch_refuses_a_device_id_the_host_does_not_have() -> None:
    torch = _fake_torch()
    try:
        _torch_npu.patch(torch)
        with pytest.raises(RuntimeError, match="out of range"):
            torch.npu.set_device(8)
    finally:
        sys.modules.pop("torch.npu", None)


def test_patch_leaves_a_torch_that_already_has_npu_alone() -> None:
    torch = _fake_torch()
    real = types.SimpleNamespace(set_device=lambda device: None)
    torch.npu = real
    assert _torch_npu.patch(torch) is False
    assert torch.npu is real
    assert not hasattr(torch.Tensor, "npu")


PROBE = """
from datadist_sim import _torch_npu
_torch_npu.install()
import torch
print(hasattr(torch, "npu"), hasattr(torch.Tensor, "npu"))
"""


@pytest.mark.parametrize(("setting", "expected"), [(None, "True True"), ("0", "False False")])
def test_install_patches_torch_when_it_is_imported_later_unless_turned_off(
    tmp_path: Path, setting: str, expected: str
) -> None:
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text(FAKE_TORCH)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")])
    env.pop(_torch_npu.ENV_TORCH_NPU, None)
    if setting is not None:
        env[_torch_npu.ENV_TORCH_NPU] = setting
    run = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == expected


STUB_TORCH_NPU = """
import types
import torch

# a CPU-test stub as serving projects ship one: it fills in torch.npu only if nothing is there
if not hasattr(torch, "npu"):
    npu = types.ModuleType("torch.npu")

    class Stream:
        pass

    npu.Stream = Stream
    npu.set_device = lambda device: None
    torch.npu = npu
"""


def _run_with_stub(tmp_path: Path, program: str) -> str:
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text(FAKE_TORCH)
    (tmp_path / "torch_npu").mkdir()
    (tmp_path / "torch_npu" / "__init__.py").write_text(STUB_TORCH_NPU)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")])
    env.pop(_torch_npu.ENV_TORCH_NPU, None)
    source = "from datadist_sim import _torch_npu\n_torch_npu.install()\n" + program
    run = subprocess.run([sys.executable, "-c", source], env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    return run.stdout.strip()


@pytest.mark.parametrize("torch_first", [True, False], ids=["torch-then-stub", "stub-imports-torch"])
def test_the_programs_own_torch_npu_meets_plain_torch(tmp_path: Path, torch_first: bool) -> None:
    """A stub that fills in ``torch.npu`` only where nothing is there gets to: the stand-in steps aside
    while it runs, and afterwards fills in only what it left (here ``Tensor.npu``)."""
    program = ("import torch\n" if torch_first else "") + (
        "import torch_npu\nimport torch\n"
        "print(torch.npu.Stream.__name__, hasattr(torch.npu, 'device_count'), hasattr(torch.Tensor, 'npu'))\n"
    )
    assert _run_with_stub(tmp_path, program) == "Stream False True"


def test_a_stub_put_in_sys_modules_before_torch_keeps_torch_plain(tmp_path: Path) -> None:
    program = (
        "import sys, types\nsys.modules['torch_npu'] = types.ModuleType('torch_npu')\n"
        "import torch\nprint(hasattr(torch, 'npu'), hasattr(torch.Tensor, 'npu'))\n"
    )
    assert _run_with_stub(tmp_path, program) == "False False"


def test_without_a_torch_npu_of_its_own_the_program_gets_the_stand_in(tmp_path: Path) -> None:
    program = "import torch\ntorch.npu.set_device(2)\nprint(torch.npu.current_device(), torch.npu.__doc__)\n"
    assert _run_with_stub(tmp_path, program) == f"2 {_torch_npu._DOC}"


def test_factories_take_device_npu_as_this_processs_memory() -> None:
    """CPU torch refuses ``device="npu"``; the hixl sample makes its buffers that way
    (``hixl_d2rd_multiproc_sample.py:180-182, 263``), so the stand-in makes them in CPU memory."""
    torch = _fake_torch()

    def full(size: Any, value: Any, *, dtype: Any = None, device: Any = None) -> Any:
        if device not in (None, "cpu"):
            raise RuntimeError(f"Expected one of cpu... device type at start of device string: {device}")
        return torch.Tensor([value] * size[0])

    torch.full = full
    try:
        with pytest.raises(RuntimeError):
            torch.full((2,), 7, device="npu")
        _torch_npu.patch(torch)
        assert torch.full((2,), 7, device="npu").data == [7, 7]
        assert torch.full((1,), 1, device="npu:3").data == [1]
        with pytest.raises(RuntimeError):  # other devices are torch's to refuse, as before
            torch.full((2,), 7, device="cuda")
        _torch_npu._step_aside(torch)
        assert torch.full is full
    finally:
        sys.modules.pop("torch.npu", None)
