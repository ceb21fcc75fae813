"""What ``import llm_datadist`` exposes (reference section 1.1)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import datadist_sim.llm_datadist as pkg
from datadist_sim.llm_datadist import configs, data_type, status
from datadist_sim.llm_datadist.v2 import llm_types

REAL_ALL = [
    "LLMClusterInfo",
    "LLMStatusCode",
    "LLMException",
    "LLMRole",
    "LlmConfig",
    "LLMConfig",
    "DataType",
    "Status",
    "CacheDesc",
    "CacheKey",
    "CacheKeyByIdAndIndex",
    "KvCache",
    "Cache",
    "BlocksCacheKey",
    "LLMDataDist",
    "Placement",
    "RegisterMemStatus",
    "LayerSynchronizer",
    "TransferConfig",
    "CacheTask",
    "TransferWithCacheKeyConfig",
    "Memtype",
    "MemInfo",
    "TensorDesc",
    "Tensor",
    "KvCacheManager",
]


def test_all_and_v2_list_match_the_real_package() -> None:
    assert pkg.__all__ == REAL_ALL
    assert pkg.v2_list == REAL_ALL[:-3]


def test_client_star_and_named_imports_work() -> None:
    # A client file written for the real package, with only the package name changed.
    names = ", ".join(REAL_ALL)
    client = textwrap.dedent(
        f"""
        from datadist_sim.llm_datadist import {names}
        from datadist_sim.llm_datadist import *
        import datadist_sim.llm_datadist as llm_datadist
        for name in llm_datadist.__all__:
            assert globals()[name] is getattr(llm_datadist, name), name
        print("ok")
        """
    )
    done = subprocess.run([sys.executable, "-c", client], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


@pytest.mark.parametrize("name", REAL_ALL)
def test_every_exported_name_resolves(name: str) -> None:
    assert getattr(pkg, name) is not None


def test_names_come_from_the_mirrored_submodules() -> None:
    assert pkg.LLMConfig is pkg.LlmConfig is configs.LlmConfig
    assert pkg.LLMClusterInfo is configs.LLMClusterInfo
    assert pkg.LLMRole is configs.LLMRole
    assert pkg.DataType is data_type.DataType
    assert pkg.LLMException is status.LLMException
    assert pkg.LLMStatusCode is status.LLMStatusCode
    assert pkg.Status is status.Status
    for name in ("CacheDesc", "CacheKey", "KvCache", "Cache", "CacheTask", "MemInfo", "Memtype", "Placement"):
        assert getattr(pkg, name) is getattr(llm_types, name)
    from datadist_sim.llm_datadist.v2.llm_datadist import LLMDataDist

    assert pkg.LLMDataDist is LLMDataDist


def test_v1_only_names_are_lazy_and_shared() -> None:
    import datadist_sim.llm_datadist_v1 as v1

    assert pkg.TensorDesc is v1.TensorDesc
    assert pkg.Tensor is v1.Tensor
    assert pkg.KvCacheManager is v1.KvCacheManager


def test_v1_is_not_imported_by_the_package_import() -> None:
    code = (
        "import sys, datadist_sim.llm_datadist as p\n"
        "assert 'datadist_sim.llm_datadist_v1.tensor' not in sys.modules\n"
        "p.Tensor\n"
        "assert 'datadist_sim.llm_datadist_v1.tensor' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_unknown_attribute_message() -> None:
    with pytest.raises(AttributeError) as info:
        _ = pkg.PrefixKey
    assert str(info.value) == "Module 'llm_datadist' has no attribute 'PrefixKey'"


@pytest.mark.parametrize(("preset", "expected"), [(None, "0"), ("1", "1")])
def test_auto_use_uc_memory_default(preset: str, expected: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "AUTO_USE_UC_MEMORY"}
    if preset is not None:
        env["AUTO_USE_UC_MEMORY"] = preset
    code = "import os, datadist_sim.llm_datadist\nprint(os.environ['AUTO_USE_UC_MEMORY'])"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == expected
