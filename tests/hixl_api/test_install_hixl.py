"""``datadist_sim.install()`` makes ``import hixl`` (and ``hixl.hixl``) give the fake, and
``uninstall()`` takes it away again."""

from __future__ import annotations

import importlib
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Iterator

import pytest

import datadist_sim
import datadist_sim.hixl


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    datadist_sim.uninstall()
    yield
    datadist_sim.uninstall()


def test_install_aliases_hixl_and_its_module_and_uninstall_removes_them() -> None:
    datadist_sim.install()
    assert importlib.import_module("hixl") is datadist_sim.hixl
    assert importlib.import_module("hixl.hixl") is datadist_sim.hixl.hixl
    datadist_sim.uninstall()
    assert "hixl" not in sys.modules
    assert "hixl.hixl" not in sys.modules


def test_a_client_that_imports_hixl_runs_against_the_fake(tmp_path: Path) -> None:
    """A client file as a user writes it: install, then ``import hixl`` and a transfer."""
    client = tmp_path / "client.py"
    client.write_text(
        textwrap.dedent(
            """
            import ctypes
            import datadist_sim
            datadist_sim.install()
            import hixl
            from hixl.hixl import Hixl
            assert Hixl is hixl.Hixl and len(hixl.__all__) == 44
            server, client = hixl.Hixl(), hixl.Hixl()
            assert server.initialize("127.0.0.1:16001") == hixl.SUCCESS
            assert client.initialize("127.0.0.1:0") == hixl.SUCCESS
            remote, local = ctypes.create_string_buffer(b"payload", 8), ctypes.create_string_buffer(8)
            server.register_mem(hixl.MemDesc(ctypes.addressof(remote), 8), hixl.MEM_DEVICE)
            client.register_mem(hixl.MemDesc(ctypes.addressof(local), 8), hixl.MEM_HOST)
            assert client.connect("127.0.0.1:16001") == hixl.SUCCESS
            desc = hixl.TransferOpDesc(ctypes.addressof(local), ctypes.addressof(remote), 8)
            assert client.transfer_sync("127.0.0.1:16001", hixl.READ, [desc]) == hixl.SUCCESS
            print(local.value.decode())
            """
        )
    )
    out = subprocess.run([sys.executable, str(client)], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["payload"]
