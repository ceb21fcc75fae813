"""Map a cache's bytes many times over (each mapping is a descriptor handed over by the fabric) and say
how many descriptors and memory-file mappings this process holds before and after: none may be left."""

from __future__ import annotations

import gc
import os

import numpy as np
from _common import PORT, PROMPT_ID, PROMPT_IP, pattern, say
from llm_datadist import CacheDesc, CacheKey, DataType, LLMDataDist, LLMRole  # type: ignore[import-not-found]

import datadist_sim.fabric

ROUNDS = 300


def held() -> tuple[int, int]:
    """(open descriptors, mappings of memory files) of this process."""
    with open("/proc/self/maps", encoding="ascii", errors="replace") as maps:
        mapped = sum("/memfd:" in line for line in maps)
    return len(os.listdir("/proc/self/fd")), mapped


dd = LLMDataDist(LLMRole.PROMPT, PROMPT_ID)
dd.init(
    {"llm.listenIpInfo": f"{PROMPT_IP}:{PORT}", "ge.exec.deviceId": "0", "ge.flowGraphMemMaxSize": "67108864"}
)
kv = dd.kv_cache_manager
cache = kv.allocate_cache(CacheDesc(2, [4, 64], DataType.DT_FLOAT16), [CacheKey(PROMPT_ID, 0, 1)])
for index, view in enumerate(datadist_sim.fabric.tensor_views(cache)):  # warm: call connections opened
    view[...] = pattern(index, [4, 64], np.float16)
del view
gc.collect()
before = held()
intact = True
for _ in range(ROUNDS):
    views = datadist_sim.fabric.tensor_views(cache)
    intact = intact and all(np.array_equal(v, pattern(i, [4, 64], np.float16)) for i, v in enumerate(views))
    tensors = kv.get_cache_tensors(cache, 0)
    del views, tensors
gc.collect()
after = held()
say("intact", intact)
say("held", *before, *after)
kv.deallocate_cache(cache)
dd.finalize()
say("done")
