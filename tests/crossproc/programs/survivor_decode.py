"""The Decode process that survives its Prompt's death: what every call shows afterwards."""

from __future__ import annotations

import sys

import numpy as np
from _common import (
    DECODE_ID,
    DECODE_IP,
    PORT,
    PROMPT_ID,
    PROMPT_IP,
    RANK_TABLE,
    code_of,
    poll_until_ready,
    say,
    wait_for_go,
    wait_until_gone,
)
from llm_datadist import (  # type: ignore[import-not-found]
    CacheDesc,
    CacheKey,
    DataType,
    LLMClusterInfo,
    LLMDataDist,
    LLMRole,
)

import datadist_sim.fabric

mode = sys.argv[1]
dd = LLMDataDist(LLMRole.DECODER, DECODE_ID)
if mode in ("cm", "stop"):
    dd.init({"ge.exec.deviceId": "0", "llm.EnableCacheManager": "1", "llm.LinkTotalTime": "2"})
    cm = dd.cache_manager
    arrays = [np.zeros((1, 4, 16), dtype=np.float16) for _ in range(2)]
    cache = cm.register_cache(CacheDesc(2, [1, 4, 16], DataType.DT_FLOAT16), [a.ctypes.data for a in arrays])
    say("up")
    wait_for_go()
    comm_id = dd.link("pd", {PROMPT_ID: 0, DECODE_ID: 1}, RANK_TABLE)
    say("status", poll_until_ready(dd, comm_id))
    wait_for_go()
    say("pull", code_of(lambda: cm.pull_cache(CacheKey(PROMPT_ID, 1), cache)))  # the Prompt dies serving it
if mode == "stop":  # the Prompt process is stopped (SIGSTOP), not dead
    say("pull_again", code_of(lambda: cm.pull_cache(CacheKey(PROMPT_ID, 1), cache)))
    say("untouched", not any(a.any() for a in arrays))
    say("unlink", code_of(lambda: dd.unlink(comm_id)))
    cm.unregister_cache(cache.cache_id)
elif mode == "cm":
    say("untouched", not any(a.any() for a in arrays))
    say("gone", wait_until_gone(PROMPT_ID))
    say("pull_again", code_of(lambda: cm.pull_cache(CacheKey(PROMPT_ID, 1), cache)))
    say("unlink", code_of(lambda: dd.unlink(comm_id)))
    relink = dd.link("pd2", {PROMPT_ID: 0, DECODE_ID: 1}, RANK_TABLE)
    say("relink_status", poll_until_ready(dd, relink))
    cm.unregister_cache(cache.cache_id)
else:
    dd.init({"ge.exec.deviceId": "0", "ge.flowGraphMemMaxSize": "67108864"})
    kv = dd.kv_cache_manager
    cluster = LLMClusterInfo()
    cluster.remote_cluster_id = PROMPT_ID
    cluster.append_local_ip_info(DECODE_IP, 0)
    cluster.append_remote_ip_info(PROMPT_IP, PORT)
    ret, _ = dd.link_clusters([cluster], 5000)
    say("link", ret.name)
    cache = kv.allocate_cache(CacheDesc(2, [4, 64], DataType.DT_FLOAT16))
    say("ready")
    wait_for_go()  # the test kills the Prompt process here
    say("gone", wait_until_gone(PROMPT_ID))
    say("segments", datadist_sim.fabric.status()["shared_segments"])
    say("pull", code_of(lambda: kv.pull_cache(CacheKey(PROMPT_ID, 0, 1), cache, 0)))
    say("pull_again", code_of(lambda: kv.pull_cache(CacheKey(PROMPT_ID, 0, 1), cache, 0)))
    ret, rets = dd.link_clusters([cluster], 1000)  # the entry stays until unlinked (GE)
    say("relink_kept", ret.name, [r.name for r in rets])
    ret, rets = dd.unlink_clusters([cluster], 1000)
    say("unlink", ret.name, [r.name for r in rets])
    ret, rets = dd.link_clusters([cluster], 1000)
    say("relink", ret.name, [r.name for r in rets])
    kv.deallocate_cache(cache)
dd.finalize()
say("done")
