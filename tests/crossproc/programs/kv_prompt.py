"""KvCacheManager flow, Prompt side: listen, allocate with keys, fill, wait, finalize."""

from __future__ import annotations

import numpy as np
from _common import PORT, PROMPT_ID, PROMPT_IP, pattern, say, wait_for_go
from llm_datadist import CacheDesc, CacheKey, DataType, KvCache, LLMDataDist, LLMRole  # type: ignore[import-not-found]

import datadist_sim.fabric

REQS = 4
dd = LLMDataDist(LLMRole.PROMPT, PROMPT_ID)
dd.init(
    {"llm.listenIpInfo": f"{PROMPT_IP}:{PORT}", "ge.exec.deviceId": "0", "ge.flowGraphMemMaxSize": "67108864"}
)
kv = dd.kv_cache_manager
desc = CacheDesc(2, [REQS, 64], DataType.DT_FLOAT16)
cache = kv.allocate_cache(desc, [CacheKey(PROMPT_ID, req, 1) for req in range(REQS)])
views = datadist_sim.fabric.tensor_views(cache)
for index, view in enumerate(views):
    view[...] = pattern(index, [REQS, 64], np.float16)
tensors = kv.get_cache_tensors(cache, 1)
say("tensor1_matches", bool(np.array_equal(tensors[0].numpy().reshape(views[1].shape), views[1])))
say("is_kv_cache", isinstance(cache, KvCache), cache.cache_id, len(cache.per_device_tensor_addrs[0]))
say("ready", cache.cache_id)
wait_for_go()
kv.deallocate_cache(cache)
dd.finalize()
say("done")
