"""Data classes of the drop-in face (real module: ``llm_datadist.v2.llm_types``).

The classes live in three small private modules; this module re-exports every public name the real one
defines, so ``from llm_datadist.v2.llm_types import X`` keeps working for each of them.
"""

from __future__ import annotations

from datadist_sim.llm_datadist.v2._caches import Cache as Cache
from datadist_sim.llm_datadist.v2._caches import CacheDesc as CacheDesc
from datadist_sim.llm_datadist.v2._caches import KvCache as KvCache
from datadist_sim.llm_datadist.v2._caches import MemInfo as MemInfo
from datadist_sim.llm_datadist.v2._caches import Memtype as Memtype
from datadist_sim.llm_datadist.v2._caches import Placement as Placement
from datadist_sim.llm_datadist.v2._caches import PushType as PushType
from datadist_sim.llm_datadist.v2._caches import RegisterMemStatus as RegisterMemStatus
from datadist_sim.llm_datadist.v2._caches import int_to_mem_status_dict as int_to_mem_status_dict
from datadist_sim.llm_datadist.v2._keys import _INVALID_ID as _INVALID_ID
from datadist_sim.llm_datadist.v2._keys import BlocksCacheKey as BlocksCacheKey
from datadist_sim.llm_datadist.v2._keys import CacheKey as CacheKey
from datadist_sim.llm_datadist.v2._keys import CacheKeyByIdAndIndex as CacheKeyByIdAndIndex
from datadist_sim.llm_datadist.v2._transfer import CacheTask as CacheTask
from datadist_sim.llm_datadist.v2._transfer import LayerSynchronizer as LayerSynchronizer
from datadist_sim.llm_datadist.v2._transfer import TransferConfig as TransferConfig
from datadist_sim.llm_datadist.v2._transfer import TransferWithCacheKeyConfig as TransferWithCacheKeyConfig
from datadist_sim.llm_datadist.v2._transfer import check_layer_range as check_layer_range

# The real module's ``__all__`` (it omits several names it also defines, re-exported above all the same).
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
    "Cache",
]
