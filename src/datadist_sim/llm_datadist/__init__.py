"""The drop-in face: the names ``import llm_datadist`` exposes (real package: ``llm_datadist``).

``TensorDesc``, ``Tensor`` and ``KvCacheManager`` belong to the v1 package and are imported only when asked
for, as in the real package. Importing sets ``AUTO_USE_UC_MEMORY=0`` unless the variable is already set.
"""

from __future__ import annotations

import os
from typing import Any

from datadist_sim.llm_datadist.configs import LLMClusterInfo as LLMClusterInfo
from datadist_sim.llm_datadist.configs import LlmConfig as LlmConfig
from datadist_sim.llm_datadist.configs import LLMRole as LLMRole
from datadist_sim.llm_datadist.data_type import DataType as DataType
from datadist_sim.llm_datadist.status import LLMException as LLMException
from datadist_sim.llm_datadist.status import LLMStatusCode as LLMStatusCode
from datadist_sim.llm_datadist.status import Status as Status
from datadist_sim.llm_datadist.v2.llm_datadist import LLMDataDist as LLMDataDist
from datadist_sim.llm_datadist.v2.llm_types import BlocksCacheKey as BlocksCacheKey
from datadist_sim.llm_datadist.v2.llm_types import Cache as Cache
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

LLMConfig = LlmConfig

__all__ = [
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

# The names that belong to CacheManager mode and need no v1 import.
v2_list = __all__[:-3]

_V1_ONLY = ("TensorDesc", "Tensor", "KvCacheManager")


def __getattr__(name: str) -> Any:
    if name not in _V1_ONLY:
        raise AttributeError(f"Module 'llm_datadist' has no attribute '{name}'")
    import datadist_sim.llm_datadist_v1 as v1

    return getattr(v1, name)


_ENV_VAR_NAME_AUTO_USE_UC_MEMORY = "AUTO_USE_UC_MEMORY"
if _ENV_VAR_NAME_AUTO_USE_UC_MEMORY not in os.environ:
    os.environ[_ENV_VAR_NAME_AUTO_USE_UC_MEMORY] = "0"
