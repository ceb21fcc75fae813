"""CacheManager flow, Prompt side: register numpy arrays by raw pointer, link with a rank table, wait."""

from __future__ import annotations

import numpy as np
from _common import PROMPT_ID, RANK_TABLE, pattern, poll_until_ready, say, wait_for_go
from llm_datadist import (  # type: ignore[import-not-found]
    BlocksCacheKey,
    CacheDesc,
    CacheKey,
    DataType,
    LLMDataDist,
    LLMRole,
)

dd = LLMDataDist(LLMRole.PROMPT, PROMPT_ID)
dd.init({"ge.exec.deviceId": "0", "llm.EnableCacheManager": "1"})
cm = dd.cache_manager
contiguous = [pattern(10 + i, [2, 4, 16], np.float16) for i in range(2)]
blocks = [pattern(20 + i, [4, 16], np.float16) for i in range(2)]
cache = cm.register_cache(
    CacheDesc(2, [2, 4, 16], DataType.DT_FLOAT16),
    [a.ctypes.data for a in contiguous],
    [CacheKey(PROMPT_ID, 7)],
)
blocks_cache = cm.register_blocks_cache(
    CacheDesc(2, [4, 16], DataType.DT_FLOAT16), [a.ctypes.data for a in blocks], BlocksCacheKey(PROMPT_ID, 0)
)
say("up")
wait_for_go()
comm_id = dd.link("pd", {PROMPT_ID: 0, 2: 1}, RANK_TABLE)
say("status", poll_until_ready(dd, comm_id))
wait_for_go()
dd.unlink(comm_id)
cm.unregister_cache(cache.cache_id)
cm.unregister_cache(blocks_cache.cache_id)
dd.finalize()
say("done")
