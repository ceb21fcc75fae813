"""``CacheManager`` (CacheManager mode, real module ``llm_datadist.v2.cache_manager``).

The data-plane methods (register/allocate/pull/push/copy/swap) arrive with the memory layer (issue 4);
this holds the state the instance hands over at ``init``.
"""

from __future__ import annotations

from typing import Dict

from datadist_sim._world.cluster import ClusterNode
from datadist_sim._world.world import SimWorld


class CacheManager:
    """Caches of one CacheManager-mode instance. Obtained through ``LLMDataDist.cache_manager``."""

    def __init__(self, world: SimWorld, node: ClusterNode, engine_options: Dict[str, str]) -> None:
        self._world = world
        self._node = node
        self._initialized = True
        self._enabled_mem_pool = bool(engine_options.get("llm.MemPoolConfig"))
        self._enable_host_mem_pool = bool(engine_options.get("llm.HostMemPoolConfig"))
        self._enable_remote_cache_accessible = engine_options.get("llm.EnableRemoteCacheAccessible") == "1"
        self._is_call_linked = False

    def set_is_call_linked(self) -> None:
        """``link()`` was called: registrations default to not remotely accessible from now on."""
        self._is_call_linked = True
