"""Small pulls by cache id between two processes (CacheManager mode): the Prompt allocates and waits; the
Decode links and pulls ``argv[2]`` times, checking the bytes each time (with ``frames``, then reports
the first byte of one more pull's request and reply frames)."""

from __future__ import annotations

import sys

from _common import DECODE_ID, DECODE_IP, PORT, PROMPT_ID, PROMPT_IP, say, wait_for_go
from llm_datadist import (  # type: ignore[import-not-found]
    CacheDesc,
    CacheKeyByIdAndIndex,
    DataType,
    LLMClusterInfo,
    LLMDataDist,
    LLMRole,
)

import datadist_sim.fabric

side = sys.argv[1]
options = {
    "ge.exec.deviceId": "0",
    "llm.EnableCacheManager": "1",
    "llm.MemPoolConfig": '{"memory_size": 16777216}',
}
if side == "prompt":
    options["llm.listenIpInfo"] = f"{PROMPT_IP}:{PORT}"
dd = LLMDataDist(
    LLMRole.PROMPT if side == "prompt" else LLMRole.DECODER, PROMPT_ID if side == "prompt" else DECODE_ID
)
dd.init(options)
cm = dd.cache_manager
desc = CacheDesc(1, [1, 256], DataType.DT_FLOAT16)
cache = cm.allocate_cache(desc)
if side == "prompt":
    (view,) = datadist_sim.fabric.tensor_views(cache)
    view[...] = 7
    say("ready", cache.cache_id)
    wait_for_go()
else:
    source = int(sys.stdin.readline())
    info = LLMClusterInfo()
    info.remote_cluster_id = PROMPT_ID
    info.append_local_ip_info(DECODE_IP, 0)
    info.append_remote_ip_info(PROMPT_IP, PORT)
    dd.link_clusters([info], 5000)
    key = CacheKeyByIdAndIndex(PROMPT_ID, source, 0)
    (view,) = datadist_sim.fabric.tensor_views(cache)
    good = 0
    for _ in range(int(sys.argv[2])):
        view[...] = 0
        cm.pull_cache(key, cache, 0)
        good += int((view == 7).all())
    say("pulled", good)
    if sys.argv[3:] == ["frames"]:  # the first byte of the last pull's request and of its reply
        from datadist_sim.fabric.client.client import current_client

        conn = current_client()._idle_calls[-1]
        sent, got = [], []
        dumps, loads = conn._dumps, conn._loads
        conn._dumps = lambda message: sent.append(dumps(message)) or sent[-1]
        conn._loads = lambda frame: got.append(frame) or loads(frame)
        cm.pull_cache(key, cache, 0)
        conn._dumps, conn._loads = dumps, loads
        say("frames", sent[0][:1].hex(), got[0][:1].hex(), int((view == 7).all()))
dd.finalize()
say("done")
