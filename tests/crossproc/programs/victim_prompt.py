"""A Prompt process that dies: v2 (``cm``) it registers numpy arrays and kills itself (SIGKILL) the moment
the fabric asks it to read them for a pull; v1 (``kv``) it allocates caches and is killed by the test."""

from __future__ import annotations

import sys

import numpy as np
from _common import PORT, PROMPT_ID, PROMPT_IP, RANK_TABLE, pattern, poll_until_ready, say, wait_for_go
from llm_datadist import CacheDesc, CacheKey, DataType, LLMDataDist, LLMRole  # type: ignore[import-not-found]

import datadist_sim.fabric.client.client

mode = sys.argv[1]
dd = LLMDataDist(LLMRole.PROMPT, PROMPT_ID)
if mode in ("cm", "stop"):
    dd.init({"ge.exec.deviceId": "0", "llm.EnableCacheManager": "1"})
    arrays = [pattern(i, [1, 4, 16], np.float16) for i in range(2)]
    dd.cache_manager.register_cache(
        CacheDesc(2, [1, 4, 16], DataType.DT_FLOAT16),
        [a.ctypes.data for a in arrays],
        [CacheKey(PROMPT_ID, 1)],
    )
    say("up")
    wait_for_go()
    comm_id = dd.link("pd", {PROMPT_ID: 0, 2: 1}, RANK_TABLE)
    say("linked")
    say("status", poll_until_ready(dd, comm_id))
    if mode == "cm":
        datadist_sim.fabric.client.client.before_serving = datadist_sim.fabric.client.client.kill_self
else:
    dd.init(
        {
            "llm.listenIpInfo": f"{PROMPT_IP}:{PORT}",
            "ge.exec.deviceId": "0",
            "ge.flowGraphMemMaxSize": "67108864",
        }
    )
    kv = dd.kv_cache_manager
    caches = [
        kv.allocate_cache(CacheDesc(2, [4, 64], DataType.DT_FLOAT16), [CacheKey(PROMPT_ID, i, 1)])
        for i in range(3)
    ]
say("ready", datadist_sim.fabric.status()["shared_segments"])
wait_for_go()
say("still alive")
dd.finalize()
