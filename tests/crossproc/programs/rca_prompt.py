"""Remote cache access, Prompt side: register one cache, wait while the Decode pulls it, then register
a second one the Decode's link has not read."""

from __future__ import annotations

import numpy as np
from _common import PORT, PROMPT_ID, PROMPT_IP, pattern, say, wait_for_go
from llm_datadist import CacheDesc, DataType, LLMDataDist, LLMRole  # type: ignore[import-not-found]

DESC = CacheDesc(2, [2, 4, 16], DataType.DT_FLOAT16)
dd = LLMDataDist(LLMRole.PROMPT, PROMPT_ID)
dd.init(
    {
        "ge.exec.deviceId": "0",
        "llm.EnableCacheManager": "1",
        "llm.EnableRemoteCacheAccessible": "1",
        "llm.listenIpInfo": f"{PROMPT_IP}:{PORT}",
    }
)
cm = dd.cache_manager
first = [pattern(30 + i, [2, 4, 16], np.float16) for i in range(2)]
a = cm.register_cache(DESC, [t.ctypes.data for t in first])
say("up", a.cache_id)
wait_for_go()  # the Decode linked and pulled the first cache
late = [pattern(40 + i, [2, 4, 16], np.float16) for i in range(2)]
b = cm.register_cache(DESC, [t.ctypes.data for t in late])
say("late", b.cache_id)
wait_for_go()  # the Decode is done
cm.unregister_cache(a.cache_id)
cm.unregister_cache(b.cache_id)
dd.finalize()
say("done")
