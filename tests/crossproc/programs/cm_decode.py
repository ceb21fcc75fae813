"""CacheManager flow, Decode side: link with a rank table, poll, pull_cache and pull_blocks into numpy
arrays registered by raw pointer (the fabric writes them through this process), check, unlink."""

from __future__ import annotations

import numpy as np
from _common import DECODE_ID, PROMPT_ID, RANK_TABLE, pattern, poll_until_ready, say, wait_for_go
from llm_datadist import (  # type: ignore[import-not-found]
    BlocksCacheKey,
    CacheDesc,
    CacheKey,
    DataType,
    LLMDataDist,
    LLMException,
    LLMRole,
)

dd = LLMDataDist(LLMRole.DECODER, DECODE_ID)
dd.init({"ge.exec.deviceId": "0", "llm.EnableCacheManager": "1"})
cm = dd.cache_manager
contiguous = [np.zeros((2, 4, 16), dtype=np.float16) for _ in range(2)]
blocks = [np.zeros((4, 16), dtype=np.float16) for _ in range(2)]
cache = cm.register_cache(CacheDesc(2, [2, 4, 16], DataType.DT_FLOAT16), [a.ctypes.data for a in contiguous])
blocks_cache = cm.register_blocks_cache(
    CacheDesc(2, [4, 16], DataType.DT_FLOAT16), [a.ctypes.data for a in blocks]
)
say("up")
wait_for_go()
comm_id = dd.link("pd", {PROMPT_ID: 0, DECODE_ID: 1}, RANK_TABLE)
say("status", poll_until_ready(dd, comm_id))
cm.pull_cache(CacheKey(PROMPT_ID, 7), cache, batch_index=1)
expected = [pattern(10 + i, [2, 4, 16], np.float16) for i in range(2)]
say(
    "pull_cache_bytes",
    all(np.array_equal(a[1], e[0]) and not a[0].any() for a, e in zip(contiguous, expected)),
)
cm.pull_blocks(BlocksCacheKey(PROMPT_ID, 0), blocks_cache, src_blocks=[0, 1], dst_blocks=[3, 0])
expected = [pattern(20 + i, [4, 16], np.float16) for i in range(2)]
same = all(np.array_equal(a[3], e[0]) and np.array_equal(a[0], e[1]) for a, e in zip(blocks, expected))
say("pull_blocks_bytes", same and not blocks[0][1].any() and not blocks[0][2].any())
dd.unlink(comm_id)
try:
    cm.pull_cache(CacheKey(PROMPT_ID, 7), cache)
    say("after_unlink", "LLM_SUCCESS")
except LLMException as exc:
    say("after_unlink", exc.status_code.name)
cm.unregister_cache(cache.cache_id)
cm.unregister_cache(blocks_cache.cache_id)
dd.finalize()
say("done")
