"""The lean model ``bench perf`` holds a small hixl ``transfer_sync`` to does the same bookkeeping, and
the figure is measured on bytes that moved."""

from __future__ import annotations

import numpy as np
import pytest

import datadist_sim.hixl as hixl
from datadist_sim.bench.perf_hixl import SERVER, LeanTransfer, transfer_figures


def test_the_lean_model_moves_bytes_advances_its_clock_and_traces_once() -> None:
    remote, local = np.arange(64, dtype=np.uint8), np.zeros(64, np.uint8)
    lean = LeanTransfer(local, remote)
    desc = [hixl.TransferOpDesc(local.ctypes.data, remote.ctypes.data + 8, 16)]
    assert lean.transfer_sync(SERVER, hixl.READ, desc) == hixl.SUCCESS
    assert np.array_equal(local[:16], remote[8:24])
    assert lean.now > 0
    assert len(lean.trace) == 1


def test_the_lean_model_refuses_what_transfer_sync_refuses() -> None:
    remote, local = np.arange(64, dtype=np.uint8), np.zeros(64, np.uint8)
    lean = LeanTransfer(local, remote)
    past = [hixl.TransferOpDesc(local.ctypes.data, remote.ctypes.data + 60, 16)]
    ok = [hixl.TransferOpDesc(local.ctypes.data, remote.ctypes.data, 16)]
    assert lean.transfer_sync(SERVER, hixl.READ, past) == hixl.PARAM_INVALID
    assert lean.transfer_sync(SERVER, hixl.READ, ok, 0) == hixl.PARAM_INVALID
    assert lean.transfer_sync("127.0.0.1:1", hixl.READ, ok) == hixl.NOT_CONNECTED
    with pytest.raises(TypeError):
        lean.transfer_sync(SERVER, 0, ok)
    assert not local.any()


def test_the_figure_is_taken_on_bytes_that_moved() -> None:
    (figure,) = transfer_figures(rounds=1, inner=3)
    assert "bytes checked: True" in figure.case
    assert figure.ratio is not None
    assert figure.ratio > 0
