"""Decode side under a fault scenario loaded into the fabric: the first pull meets the rule."""

from __future__ import annotations

from _common import DECODE_ID, DECODE_IP, PORT, PROMPT_ID, PROMPT_IP, code_of, say
from llm_datadist import CacheDesc, CacheKey, DataType, LLMClusterInfo, LLMDataDist, LLMRole  # type: ignore[import-not-found]

dd = LLMDataDist(LLMRole.DECODER, DECODE_ID)
dd.init({"ge.exec.deviceId": "0", "ge.flowGraphMemMaxSize": "67108864"})
cluster = LLMClusterInfo()
cluster.remote_cluster_id = PROMPT_ID
cluster.append_local_ip_info(DECODE_IP, 0)
cluster.append_remote_ip_info(PROMPT_IP, PORT)
ret, _ = dd.link_clusters([cluster], 5000)
kv = dd.kv_cache_manager
cache = kv.allocate_cache(CacheDesc(2, [4, 64], DataType.DT_FLOAT16))
say("first", code_of(lambda: kv.pull_cache(CacheKey(PROMPT_ID, 0, 1), cache, 0)))
say("second", code_of(lambda: kv.pull_cache(CacheKey(PROMPT_ID, 0, 1), cache, 0)))
dd.unlink_clusters([cluster], 5000)
dd.finalize()
say("done")
