"""switch_role between two processes, after the official switch_role_sample: ``a`` starts as Prompt
(listening on loopback), ``b`` as Decoder; b links and pulls blocks, both switch, and the port a closed
is reopened by b; a links to it and pushes blocks. Cluster ids near 2**48. Steps wait for the harness."""

from __future__ import annotations

import sys

import numpy as np
from _common import pattern, say, wait_for_go
from llm_datadist import (  # type: ignore[import-not-found]
    BlocksCacheKey,
    CacheDesc,
    DataType,
    LLMClusterInfo,
    LLMDataDist,
    LLMRole,
)

A_ID, B_ID = (1 << 48) - 2, (1 << 48) - 1
ENDPOINT = ("127.0.0.1", 26000)
side = sys.argv[1]
own, other = (A_ID, B_ID) if side == "a" else (B_ID, A_ID)
options = {"ge.exec.deviceId": "0", "llm.LocalCommRes": ""}
if side == "a":
    options["llm.listenIpInfo"] = f"{ENDPOINT[0]}:{ENDPOINT[1]}"
dd = LLMDataDist(LLMRole.PROMPT if side == "a" else LLMRole.DECODER, own)
dd.init(options)
cm = dd.cache_manager
arrays = [
    pattern(30 + i, [4, 16], np.float16) if side == "a" else np.zeros((4, 16), np.float16) for i in range(2)
]
cache = cm.register_blocks_cache(
    CacheDesc(2, [4, 16], DataType.DT_FLOAT16), [a.ctypes.data for a in arrays], BlocksCacheKey(own, 0)
)
cluster = LLMClusterInfo()
cluster.remote_cluster_id = other
cluster.append_local_ip_info("127.0.0.1", 0)
cluster.append_remote_ip_info(*ENDPOINT)
sent = [pattern(30 + i, [4, 16], np.float16) for i in range(2)]
say("up")
wait_for_go()
if side == "b":
    ret, _ = dd.link_clusters([cluster], 5000)
    say("link", ret.name)
    cm.pull_blocks(BlocksCacheKey(other, 0), cache, src_blocks=[0, 1], dst_blocks=[0, 2])
    say(
        "pulled", all(np.array_equal(a[0], s[0]) and np.array_equal(a[2], s[1]) for a, s in zip(arrays, sent))
    )
    ret, _ = dd.unlink_clusters([cluster], 5000)
    say("unlink", ret.name)
    wait_for_go()
    dd.switch_role(LLMRole.PROMPT, {"llm.listenIpInfo": f"{ENDPOINT[0]}:{ENDPOINT[1]}"})  # the port a closed
    say("switched")
    wait_for_go()
    say(
        "pushed_bytes",
        all(np.array_equal(a[1], s[2]) and np.array_equal(a[3], s[3]) for a, s in zip(arrays, sent)),
    )
    dd.unlink_clusters([cluster], 5000, force=True)
else:
    dd.switch_role(LLMRole.DECODER)
    say("switched")
    wait_for_go()
    ret, _ = dd.link_clusters([cluster], 5000)
    say("link", ret.name)
    cm.push_blocks(
        BlocksCacheKey(other, 0), cache, src_blocks=[2, 3], dst_blocks=[1, 3], tensor_num_per_layer=1
    )
    say("pushed")
    wait_for_go()
    dd.unlink_clusters([cluster], 5000, force=True)
cm.unregister_cache(cache.cache_id)
dd.finalize()
say("done")
