"""A stand-in for torch_npu's device calls on CPU torch, so programs written for an Ascend host run as
they are under ``datadist-sim exec``.

The vendor's samples (hicann/hixl ``examples/python/llm_datadist/``) never import ``torch_npu``: on a
real host torch loads it as a device backend by itself, and the samples call ``torch.npu.set_device(n)``
and make their KV tensors with ``tensor.npu()`` before registering ``tensor.data_ptr()``. Here there is no
NPU, so the simulated device memory is the process's own: ``tensor.npu()`` returns a CPU copy (a new
tensor, as a host-to-device copy is), and ``torch.npu`` answers the few device calls such programs make.
The stand-in steps aside for a ``torch_npu`` of the program's own, real or a stub for CPU tests (as
serving projects ship in their unit tests): nothing is changed when torch already has an ``npu``
attribute (a real torch_npu is loaded) or a ``torch_npu`` module is there; when the program imports
one, the stand-in's ``torch.npu`` and ``Tensor.npu`` are taken out before it runs (it meets plain torch,
as on a CPU host) and put back afterwards only where it left them missing. ``DATADIST_SIM_TORCH_NPU=0``
turns the stand-in off.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import types
from typing import Any, Mapping, Optional, Sequence

ENV_TORCH_NPU = "DATADIST_SIM_TORCH_NPU"
DEVICE_COUNT = 8
"""Devices an Atlas 800 server shows; the samples accept device ids 0..7."""


_DOC = "datadist-sim's stand-in for torch_npu (CPU memory, no NPU)"


def _device_module() -> types.ModuleType:
    """``torch.npu``: the device calls of torch_npu that programs around llm_datadist make."""
    module = types.ModuleType("torch.npu", _DOC)
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


FACTORIES = ("empty", "full", "ones", "zeros", "tensor", "arange", "rand", "randn", "randint")
"""torch's tensor factories that take ``device=``: the hixl sample makes its buffers with
``torch.full(..., device="npu")`` and ``torch.zeros(..., device="npu")``
(hicann/hixl ``examples/python/hixl/hixl_d2rd_multiproc_sample.py:180-182, 263``)."""


def _on_npu(device: Any) -> bool:
    return isinstance(device, str) and device.split(":", 1)[0] == "npu"


def _factory(make: Any) -> Any:
    """``make`` taking ``device="npu"`` (or ``"npu:N"``) as this process's memory, which is what the
    simulated device memory is; CPU torch refuses a device string it has no backend for."""

    def made_on_npu(*args: Any, **kwargs: Any) -> Any:
        if _on_npu(kwargs.get("device")):
            kwargs["device"] = "cpu"
        return make(*args, **kwargs)

    made_on_npu.__doc__ = _DOC
    made_on_npu.__wrapped__ = make  # type: ignore[attr-defined]
    return made_on_npu


def patch(torch: Any) -> bool:
    """Give ``torch`` the stand-in; False (and nothing changed) when it has an ``npu`` already, or when
    the program has a ``torch_npu`` of its own (imported, or put in ``sys.modules`` by a test's stub)."""
    if hasattr(torch, "npu") or _own_torch_npu():
        return False
    _fill_in(torch)
    return True


def _fill_in(torch: Any) -> None:
    """Whichever of ``torch.npu`` and ``Tensor.npu`` nothing else gave."""
    if not hasattr(torch, "npu"):
        module = _device_module()
        torch.npu = module
        sys.modules["torch.npu"] = module
    if not hasattr(torch.Tensor, "npu"):
        torch.Tensor.npu = _to_npu
    for name in FACTORIES:
        make = getattr(torch, name, None)
        if make is not None and not _ours(make):
            setattr(torch, name, _factory(make))


def _ours(value: Any) -> bool:
    return value is _to_npu or getattr(value, "__doc__", None) == _DOC


def _step_aside(torch: Any) -> None:
    """Take the stand-in out of ``torch`` (only what is still ours), so the program's ``torch_npu``
    meets plain torch, as it does on a CPU host."""
    if _ours(getattr(torch, "npu", None)):
        del torch.npu
        if _ours(sys.modules.get("torch.npu")):
            del sys.modules["torch.npu"]
    if _ours(torch.Tensor.__dict__.get("npu")):
        del torch.Tensor.npu
    for name in FACTORIES:
        made = getattr(torch, name, None)
        if made is not None and _ours(made):
            setattr(torch, name, made.__wrapped__)


def _own_torch_npu() -> bool:
    return "torch_npu" in sys.modules


class _PatchAfterImport(importlib.abc.MetaPathFinder):
    """Lets ``import torch`` run as usual, then patches the module it made; and lets a ``torch_npu`` of
    the program's own (real or a test stub) run on plain torch, the stand-in filling in afterwards only
    what it left missing. Stays on ``sys.meta_path`` for the process's life: it answers only for these
    two names, once each."""

    _NAMES = ("torch", "torch_npu")

    def __init__(self) -> None:
        self._finding = False

    def find_spec(
        self, name: str, path: Optional[Sequence[str]] = None, target: Optional[types.ModuleType] = None
    ) -> Optional[importlib.machinery.ModuleSpec]:
        if name not in self._NAMES or self._finding:
            return None
        self._finding = True
        try:  # the finders after this one decide where the module is (path, editable installs, hooks)
            spec = importlib.util.find_spec(name)
        finally:
            self._finding = False
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _Wrapped(spec.loader, name)
        return spec


class _Wrapped(importlib.abc.Loader):
    """The module's own loader, with the stand-in's step before and after it runs."""

    def __init__(self, loader: importlib.abc.Loader, name: str) -> None:
        self._loader, self._name = loader, name

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> Optional[types.ModuleType]:
        return self._loader.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        module.__spec__.loader = self._loader  # type: ignore[union-attr]
        if self._name == "torch":
            self._loader.exec_module(module)
            patch(module)
            return
        torch = sys.modules.get("torch")
        if torch is not None:
            _step_aside(torch)
        try:
            self._loader.exec_module(module)
        finally:
            torch = sys.modules.get("torch")
            if torch is not None:
                _fill_in(torch)


def install(environ: Optional[Mapping[str, str]] = None) -> None:
    """Patch torch now if it is imported, else as soon as it is; watch for the program's own
    ``torch_npu``; a no-op when turned off."""
    env = os.environ if environ is None else environ
    if env.get(ENV_TORCH_NPU, "1") == "0":
        return
    torch = sys.modules.get("torch")
    if torch is not None:
        patch(torch)
    if not any(isinstance(finder, _PatchAfterImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _PatchAfterImport())
