"""``KvCacheManager`` (KvCacheManager mode, real module ``llm_datadist_v1.kv_cache_manager``).

The data-plane methods (allocate/pull/copy/swap/transfer) arrive with the memory layer (issue 4); this
holds the state the instance hands over at ``init`` and its role.
"""

from __future__ import annotations

from datadist_sim._world.cluster import ClusterNode
from datadist_sim._world.world import SimWorld
from datadist_sim.llm_datadist.configs import LLMRole


class KvCacheManager:
    """Caches of one KvCacheManager-mode instance. Obtained through ``LLMDataDist.kv_cache_manager``."""

    def __init__(self, world: SimWorld, node: ClusterNode, role: LLMRole) -> None:
        self._world = world
        self._node = node
        self._role = role
        self._initialized = True

    def is_initialized(self) -> bool:
        """False once the owning instance is finalized."""
        return self._initialized

    def _switch_role(self, role: LLMRole) -> None:
        self._role = role
