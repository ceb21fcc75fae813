"""Remote cache access, Decode side: link, pull the Prompt's cache (the link reads the Prompt's cache
table here), then pull one the Prompt registered after that, before and after linking again."""

from __future__ import annotations

import sys

import numpy as np
from _common import DECODE_ID, DECODE_IP, PORT, PROMPT_ID, PROMPT_IP, code_of, pattern, say
from llm_datadist import (  # type: ignore[import-not-found]
    CacheDesc,
    CacheKeyByIdAndIndex,
    DataType,
    LLMClusterInfo,
    LLMDataDist,
    LLMRole,
)

dd = LLMDataDist(LLMRole.DECODER, DECODE_ID)
dd.init({"ge.exec.deviceId": "0", "llm.EnableCacheManager": "1", "llm.EnableRemoteCacheAccessible": "1"})
cm = dd.cache_manager
mine = [np.zeros((2, 4, 16), dtype=np.float16) for _ in range(2)]
dst = cm.register_cache(CacheDesc(2, [2, 4, 16], DataType.DT_FLOAT16), [t.ctypes.data for t in mine])
target = LLMClusterInfo()
target.remote_cluster_id = PROMPT_ID
target.append_local_ip_info(DECODE_IP, 0)
target.append_remote_ip_info(PROMPT_IP, PORT)
say("up")
first_id = int(sys.stdin.readline())
say("link", dd.link_clusters([target], 5000)[0].name)
cm.pull_cache(CacheKeyByIdAndIndex(PROMPT_ID, first_id, 1), dst, 0)
say(
    "first_bytes",
    all(np.array_equal(m[0], pattern(30 + i, [2, 4, 16], np.float16)[1]) for i, m in enumerate(mine)),
)
late_id = int(sys.stdin.readline())
say("late", code_of(lambda: cm.pull_cache(CacheKeyByIdAndIndex(PROMPT_ID, late_id, 0), dst, 1)))
say("untouched", not any(m[1].any() for m in mine))
dd.unlink_clusters([target], 5000)
dd.link_clusters([target], 5000)
say("after_relink", code_of(lambda: cm.pull_cache(CacheKeyByIdAndIndex(PROMPT_ID, late_id, 0), dst, 1)))
say(
    "late_bytes",
    all(np.array_equal(m[1], pattern(40 + i, [2, 4, 16], np.float16)[0]) for i, m in enumerate(mine)),
)
cm.unregister_cache(dst.cache_id)
dd.finalize()
say("done")
