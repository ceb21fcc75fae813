"""KvCacheManager flow, Decode side: link_clusters, pull every key with the bytes checked, unlink."""

from __future__ import annotations

import json
import sys

import numpy as np
from _common import DECODE_ID, DECODE_IP, PORT, PROMPT_ID, PROMPT_IP, pattern, say
from llm_datadist import (  # type: ignore[import-not-found]
    CacheDesc,
    CacheKey,
    DataType,
    LLMClusterInfo,
    LLMDataDist,
    LLMRole,
)
from llm_datadist_v1 import LLMException  # type: ignore[import-not-found]  # what a KvCacheManager raises

import datadist_sim.fabric

REQS = 4
own_id = int(sys.argv[1]) if len(sys.argv) > 1 else DECODE_ID
mine = [int(req) for req in sys.argv[2:]] or list(range(REQS))  # which requests this Decode pulls
dd = LLMDataDist(LLMRole.DECODER, own_id)
dd.init({"ge.exec.deviceId": "0", "ge.flowGraphMemMaxSize": "67108864"})
cluster = LLMClusterInfo()
cluster.remote_cluster_id = PROMPT_ID
cluster.append_local_ip_info(DECODE_IP, 0)
cluster.append_remote_ip_info(PROMPT_IP, PORT)
ret, rets = dd.link_clusters([cluster], 5000)
say("link", ret.name, [r.name for r in rets])
kv = dd.kv_cache_manager
cache = kv.allocate_cache(CacheDesc(2, [REQS, 64], DataType.DT_FLOAT16))
for req in mine:
    kv.pull_cache(CacheKey(PROMPT_ID, req, 1), cache, req)
views = datadist_sim.fabric.tensor_views(cache)
same = all(
    np.array_equal(view[mine], pattern(i, [REQS, 64], np.float16)[mine]) for i, view in enumerate(views)
)
say("bytes_match", same)
try:
    kv.pull_cache(CacheKey(PROMPT_ID, mine[0], 1), cache, mine[0])
    say("second_pull", "LLM_SUCCESS")
except LLMException as exc:
    say("second_pull", exc.status_code.name)
ret, rets = dd.unlink_clusters([cluster], 5000)
say("unlink", ret.name)
kv.deallocate_cache(cache)
dd.finalize()
say("trace", json.dumps([(e["time"], e["cluster_id"], e["op"]) for e in datadist_sim.fabric.trace_events()]))
say("done")
