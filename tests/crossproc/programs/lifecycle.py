"""Handles and instances over a process's life: a dropped KvCache is freed as in real, the fabric
forgets objects a process no longer holds, and a second LLMDataDist in one process is refused."""

from __future__ import annotations

import gc

from _common import PROMPT_ID, code_of, say
from llm_datadist import CacheDesc, CacheKey, DataType, LLMDataDist, LLMRole  # type: ignore[import-not-found]

import datadist_sim.fabric

dd = LLMDataDist(LLMRole.PROMPT, PROMPT_ID)
dd.init({"ge.exec.deviceId": "0", "ge.flowGraphMemMaxSize": "67108864", "llm.listenIpInfo": "10.0.0.1:26000"})
kv = dd.kv_cache_manager
desc = CacheDesc(2, [4, 64], DataType.DT_FLOAT16)
for req in range(200):
    cache = kv.allocate_cache(desc, [CacheKey(PROMPT_ID, req, 1)])
    kv.remove_cache_key(CacheKey(PROMPT_ID, req, 1))
    kv.deallocate_cache(cache)
del cache
gc.collect()
status = datadist_sim.fabric.status()
say("objects_after_200", status["objects"])
forgotten = kv.allocate_cache(desc)
say("segments_held", datadist_sim.fabric.status()["shared_segments"])
del forgotten  # never deallocated: the real KvCache frees itself when collected
gc.collect()
say("segments_after_drop", datadist_sim.fabric.status()["shared_segments"])
second = LLMDataDist(LLMRole.DECODER, PROMPT_ID + 1)
say("second_init", code_of(lambda: second.init({"ge.exec.deviceId": "0"})))
dd.finalize()
say("done")
