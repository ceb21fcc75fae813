"""A stand-in for torch_npu's device calls on CPU torch, so programs written for an Ascend host run as
they are under ``datadist-sim exec``.

The vendor's samples (hicann/hixl ``examples/python/llm_datadist/``) never import ``torch_npu``: on a
real host torch loads it as a device backend by itself, and the samples call ``torch.npu.set_device(n)``
and make their KV tensors with ``tensor.npu()`` before registering ``tensor.data_ptr()``. Here there is no
NPU, so the simulated device memory is the process's own: ``tensor.npu()`` returns a CPU copy (a new
tensor, as a host-to-device copy is), and ``torch.npu`` answers the few device calls such programs make.
Nothing is changed when torch already has an ``npu`` attribute (a real torch_npu is loaded), and
``DATADIST_SIM_TORCH_NPU=0`` turns the stand-in off.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
import types
from typing import Any, Mapping, Optional, Sequence

ENV_TORCH_NPU = "DATADIST_SIM_TORCH_NPU"
DEVICE_COUNT = 8
"""Devices an Atlas 800 server shows; the samples accept device ids 0..7."""


def _device_module() -> types.ModuleType:
    """``torch.npu``: the device calls of torch_npu that programs around llm_datadist make."""
    module = types.ModuleType("torch.npu", "datadist-sim's stand-in for torch_npu (CPU memory, no NPU)")
    state = {"device": 0}

    def _index(device: Any) -> int:
        text = str(device)
        index = int(text.split(":", 1)[1]) if ":" in text else int(text) if text.isdigit() else 0
        if not 0 <= index < DEVICE_COUNT:
            raise RuntimeError(f"npu device {device!r} out of range (0..{DEVICE_COUNT - 1})")
        return index

    def set_device(device: Any) -> None:
        state["device"] = _index(device)

    def current_device() -> int:
        return state["device"]

    def device_count() -> int:
        return DEVICE_COUNT

    def is_available() -> bool:
        return True

    def synchronize(device: Any = None) -> None:
        """Copies here are synchronous: nothing to wait for."""

    for function in (set_device, current_device, device_count, is_available, synchronize):
        setattr(module, function.__name__, function)
    return module


def _to_npu(self: Any, device: Any = None, non_blocking: bool = False, **kwargs: Any) -> Any:
    """``Tensor.npu()``: a copy in simulated device memory, which is this process's memory."""
    return self.clone()


def patch(torch: Any) -> bool:
    """Give ``torch`` the stand-in; False (and nothing changed) when it has an ``npu`` already."""
    if hasattr(torch, "npu"):
        return False
    module = _device_module()
    torch.npu = module
    sys.modules["torch.npu"] = module
    torch.Tensor.npu = _to_npu
    return True


class _PatchAfterImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Lets ``import torch`` run as usual, then patches the module it made."""

    def __init__(self) -> None:
        self._loader: Optional[importlib.abc.Loader] = None

    def find_spec(
        self, name: str, path: Optional[Sequence[str]] = None, target: Optional[types.ModuleType] = None
    ) -> Optional[importlib.machinery.ModuleSpec]:
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        self._loader = spec.loader
        spec.loader = self
        return spec

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> Optional[types.ModuleType]:
        assert self._loader is not None
        return self._loader.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        assert self._loader is not None
        module.__spec__.loader = self._loader  # type: ignore[union-attr]
        self._loader.exec_module(module)
        patch(module)


def install(environ: Optional[Mapping[str, str]] = None) -> None:
    """Patch torch now if it is imported, else as soon as it is; a no-op when turned off."""
    env = os.environ if environ is None else environ
    if env.get(ENV_TORCH_NPU, "1") == "0":
        return
    torch = sys.modules.get("torch")
    if torch is not None:
        patch(torch)
    elif not any(isinstance(finder, _PatchAfterImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _PatchAfterImport())
