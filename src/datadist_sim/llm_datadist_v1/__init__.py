"""The KvCacheManager-mode package (real package: ``llm_datadist_v1``).

The data classes are the very objects ``llm_datadist`` exports (one ``KvCache`` serves both faces); the
status names are the v1 package's own, as in the real split packaging: ``LLMException`` is another class
than ``llm_datadist.LLMException`` and ``LLMStatusCode`` a plain ``Enum`` (``_status_v1``).
``KvCacheManager`` and ``LLMDataDist`` are resolved on first access: they belong to the engine modules,
which import this package's data types themselves.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

from datadist_sim.llm_datadist.configs import LLMClusterInfo as LLMClusterInfo
from datadist_sim.llm_datadist.configs import LlmConfig as LlmConfig
from datadist_sim.llm_datadist.configs import LLMRole as LLMRole
from datadist_sim.llm_datadist.data_type import DataType as DataType
from datadist_sim.llm_datadist.v2.llm_types import BlocksCacheKey as BlocksCacheKey
from datadist_sim.llm_datadist.v2.llm_types import CacheDesc as CacheDesc
from datadist_sim.llm_datadist.v2.llm_types import CacheKey as CacheKey
from datadist_sim.llm_datadist.v2.llm_types import CacheKeyByIdAndIndex as CacheKeyByIdAndIndex
from datadist_sim.llm_datadist.v2.llm_types import CacheTask as CacheTask
from datadist_sim.llm_datadist.v2.llm_types import KvCache as KvCache
from datadist_sim.llm_datadist.v2.llm_types import LayerSynchronizer as LayerSynchronizer
from datadist_sim.llm_datadist.v2.llm_types import MemInfo as MemInfo
from datadist_sim.llm_datadist.v2.llm_types import Memtype as Memtype
from datadist_sim.llm_datadist.v2.llm_types import Placement as Placement
from datadist_sim.llm_datadist.v2.llm_types import RegisterMemStatus as RegisterMemStatus
from datadist_sim.llm_datadist.v2.llm_types import TransferConfig as TransferConfig
from datadist_sim.llm_datadist.v2.llm_types import TransferWithCacheKeyConfig as TransferWithCacheKeyConfig
from datadist_sim.llm_datadist_v1.status import LLMException as LLMException
from datadist_sim.llm_datadist_v1.status import LLMStatusCode as LLMStatusCode
from datadist_sim.llm_datadist_v1.status import Status as Status
from datadist_sim.llm_datadist_v1.tensor import Tensor as Tensor
from datadist_sim.llm_datadist_v1.tensor import TensorDesc as TensorDesc

LLMConfig = LlmConfig

__all__ = [
    "LLMClusterInfo",
    "LLMStatusCode",
    "LLMException",
    "LLMRole",
    "LlmConfig",
    "LLMConfig",
    "TensorDesc",
    "Tensor",
    "DataType",
    "Status",
    "KvCacheManager",
    "CacheDesc",
    "CacheKey",
    "CacheKeyByIdAndIndex",
    "KvCache",
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
]

# Name -> module defining it; imported only when the name is first asked for.
_LAZY = {
    "KvCacheManager": "datadist_sim.llm_datadist_v1.kv_cache_manager",
    # The combined LLMDataDist serves both modes, as the real one does since the v1/v2 split.
    "LLMDataDist": "datadist_sim.llm_datadist.v2.llm_datadist",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


_ENV_VAR_NAME_AUTO_USE_UC_MEMORY = "AUTO_USE_UC_MEMORY"
if _ENV_VAR_NAME_AUTO_USE_UC_MEMORY not in os.environ:
    os.environ[_ENV_VAR_NAME_AUTO_USE_UC_MEMORY] = "0"
