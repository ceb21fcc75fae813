"""A ``CacheManager`` lives as long as the engine that made it.

``LLMDataDist.finalize`` marks its manager uninitialised (hixl ``llm_datadist/v2/llm_datadist.py:235-238``),
and from hixl ``3f38f679`` on every public operation of the manager first checks that mark
(``cache_manager.py`` ``_check_is_inited``, lines 93-98, called first in each operation): a manager
taken before ``finalize`` is refused with ``LLM_ENGINE_FINALIZED`` before any argument check and before
the engine is reached, whether the engine stayed down, was initialised again (it then has a new manager)
or was replaced by another instance. The check is the manager's own, so an old manager can never reach
a newer engine. The v1 ``KvCacheManager`` (hicann/ge) has no such check (``docs/vendor_facts.md``).
"""

from __future__ import annotations

from datadist_sim._status import LLMException, LLMStatusCode

_FINALIZED = "CacheManager is no longer initialized; obtain a new instance after LLMDataDist.init."


class ManagerLifecycle:
    """The refusal of a manager whose engine was finalized; mixed into ``CacheManager`` and its op
    mixins so that each operation can check first."""

    _initialized: bool

    def _check_is_inited(self) -> None:
        if not self._initialized:
            raise LLMException(_FINALIZED, status_code=LLMStatusCode.LLM_ENGINE_FINALIZED)
