"""Allocate a cache and fill it; on "go", map its bytes again (a fresh mapping, as any client maps a
cache it is handed) and say whether they are still the ones written."""

from __future__ import annotations

import numpy as np
from _common import PORT, PROMPT_ID, PROMPT_IP, pattern, say, wait_for_go
from llm_datadist import CacheDesc, CacheKey, DataType, LLMDataDist, LLMRole  # type: ignore[import-not-found]

import datadist_sim.fabric

dd = LLMDataDist(LLMRole.PROMPT, PROMPT_ID)
dd.init(
    {"llm.listenIpInfo": f"{PROMPT_IP}:{PORT}", "ge.exec.deviceId": "0", "ge.flowGraphMemMaxSize": "67108864"}
)
kv = dd.kv_cache_manager
desc = CacheDesc(2, [4, 64], DataType.DT_FLOAT16)
cache = kv.allocate_cache(desc, [CacheKey(PROMPT_ID, req, 1) for req in range(4)])
for index, view in enumerate(datadist_sim.fabric.tensor_views(cache)):
    view[...] = pattern(index, [4, 64], np.float16)
say("ready")
wait_for_go()
try:
    views = datadist_sim.fabric.tensor_views(cache)
    intact = all(np.array_equal(v, pattern(i, [4, 64], np.float16)) for i, v in enumerate(views))
    say("mapped", intact)
except OSError as exc:
    say("mapped", f"failed: {exc}")
kv.deallocate_cache(cache)
dd.finalize()
say("done")
