"""install() / uninstall(): ``import llm_datadist`` resolves to the fake and back."""

from __future__ import annotations

import importlib
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import datadist_sim
from datadist_sim import _install

REAL_ALL = [
    "LLMClusterInfo", "LLMStatusCode", "LLMException", "LLMRole", "LlmConfig", "LLMConfig", "DataType",
    "Status", "CacheDesc", "CacheKey", "CacheKeyByIdAndIndex", "KvCache", "Cache", "BlocksCacheKey",
    "LLMDataDist", "Placement", "RegisterMemStatus", "LayerSynchronizer", "TransferConfig", "CacheTask",
    "TransferWithCacheKeyConfig", "Memtype", "MemInfo", "TensorDesc", "Tensor", "KvCacheManager",
]  # fmt: skip


@pytest.fixture(autouse=True)
def _clean() -> None:
    datadist_sim.uninstall()
    yield
    datadist_sim.uninstall()


def test_a_client_file_importing_every_real_name_runs_after_install(tmp_path: Path) -> None:
    client = tmp_path / "client.py"
    client.write_text(
        textwrap.dedent(
            f"""
            import datadist_sim
            datadist_sim.install()
            from llm_datadist import {", ".join(REAL_ALL)}
            from llm_datadist.status import LLMStatusCode as S2
            from llm_datadist.v2.cache_manager import CacheManager
            from llm_datadist.v2.llm_datadist import LLMDataDist as D2
            from llm_datadist import v2_list
            import llm_datadist_v1
            assert S2 is LLMStatusCode and D2 is LLMDataDist
            assert llm_datadist_v1.LLMException is not LLMException  # two classes, as shipped
            assert int(LLMStatusCode.LLM_LINK_FAILED) == 1343270921
            print("ok", len(v2_list))
            """
        )
    )
    out = subprocess.run([sys.executable, str(client)], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["ok", "23"]


def test_install_aliases_submodules_and_uninstall_removes_them() -> None:
    datadist_sim.install()
    mod = importlib.import_module("llm_datadist.v2.llm_types")
    from datadist_sim.llm_datadist.v2 import llm_types

    assert mod is llm_types
    assert datadist_sim.is_installed()
    datadist_sim.uninstall()
    assert "llm_datadist" not in sys.modules
    assert "llm_datadist.v2.llm_types" not in sys.modules
    with pytest.raises(ImportError):
        importlib.import_module("llm_datadist")


def test_install_is_idempotent_and_installed_context_restores() -> None:
    with datadist_sim.installed():
        datadist_sim.install()
        assert "llm_datadist" in sys.modules
    assert "llm_datadist" not in sys.modules


def test_install_refuses_to_shadow_a_real_package(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    real = tmp_path / "llm_datadist"
    real.mkdir()
    (real / "__init__.py").write_text("REAL = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(RuntimeError, match="real llm_datadist"):
        datadist_sim.install()
    assert not datadist_sim.is_installed()
    with pytest.warns(UserWarning, match="shadows the real llm_datadist"):
        datadist_sim.install(force=True)
    assert sys.modules["llm_datadist"].__name__ == "datadist_sim.llm_datadist"
    datadist_sim.uninstall()
    assert "llm_datadist" not in sys.modules
    assert _install._real_package_present() is not None
