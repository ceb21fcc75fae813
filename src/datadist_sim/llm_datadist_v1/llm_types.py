"""The v1 data classes: the same objects as ``llm_datadist.v2.llm_types``.

Sharing them means a ``KvCache`` made in either face passes the other's ``isinstance`` checks.
"""

from __future__ import annotations

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
from datadist_sim.llm_datadist.v2.llm_types import PushType as PushType
from datadist_sim.llm_datadist.v2.llm_types import RegisterMemStatus as RegisterMemStatus
from datadist_sim.llm_datadist.v2.llm_types import TransferConfig as TransferConfig
from datadist_sim.llm_datadist.v2.llm_types import TransferWithCacheKeyConfig as TransferWithCacheKeyConfig
from datadist_sim.llm_datadist.v2.llm_types import check_layer_range as check_layer_range
from datadist_sim.llm_datadist.v2.llm_types import int_to_mem_status_dict as int_to_mem_status_dict

__all__ = [
    "CacheDesc",
    "CacheKey",
    "CacheKeyByIdAndIndex",
    "KvCache",
    "BlocksCacheKey",
    "Placement",
    "CacheTask",
    "TransferConfig",
    "LayerSynchronizer",
]
