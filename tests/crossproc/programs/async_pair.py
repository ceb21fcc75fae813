"""transfer_cache_async across processes: ``prompt`` sends a registered cache layer by layer into the
raw addresses ``decode`` registered, with a ``LayerSynchronizer`` that runs in the Prompt process."""

from __future__ import annotations

import json
import os
import sys
from typing import List, Optional

import numpy as np
from _common import DECODE_ID, PROMPT_ID, RANK_TABLE, pattern, poll_until_ready, say, wait_for_go
from llm_datadist import (  # type: ignore[import-not-found]
    CacheDesc,
    DataType,
    LayerSynchronizer,
    LLMDataDist,
    LLMRole,
    TransferConfig,
)


class Sync(LayerSynchronizer):  # type: ignore[misc]
    def __init__(self) -> None:
        self.seen: List[int] = []

    def synchronize_layer(self, layer_index: int, timeout_in_millis: Optional[int]) -> bool:
        self.seen.append(layer_index)
        say("sync", layer_index, os.getpid())
        return True


side = sys.argv[1]
own = PROMPT_ID if side == "prompt" else DECODE_ID
dd = LLMDataDist(LLMRole.PROMPT if side == "prompt" else LLMRole.DECODER, own)
dd.init({"ge.exec.deviceId": "0", "llm.EnableCacheManager": "1"})
cm = dd.cache_manager
if side == "prompt":
    arrays = [pattern(40 + i, [2, 4, 8], np.float16) for i in range(4)]
    cache = cm.register_cache(CacheDesc(4, [2, 4, 8], DataType.DT_FLOAT16), [a.ctypes.data for a in arrays])
else:
    arrays = [np.zeros((1, 4, 8), dtype=np.float16) for _ in range(4)]
    cache = cm.register_cache(CacheDesc(4, [1, 4, 8], DataType.DT_FLOAT16), [a.ctypes.data for a in arrays])
    say("addrs", json.dumps(cache.tensor_addrs))
say("pid", os.getpid())
wait_for_go()
comm_id = dd.link("async", {PROMPT_ID: 0, DECODE_ID: 1}, RANK_TABLE)
say("status", poll_until_ready(dd, comm_id))
if side == "prompt":
    addrs = json.loads(sys.stdin.readline())
    sync = Sync()
    task = cm.transfer_cache_async(cache, sync, [TransferConfig(DECODE_ID, addrs, src_batch_index=1)])
    say("result", task.synchronize().name, sync.seen)
    wait_for_go()
else:
    wait_for_go()
    sent = [pattern(40 + i, [2, 4, 8], np.float16) for i in range(4)]
    say("received", all(np.array_equal(a[0], s[1]) for a, s in zip(arrays, sent)))
dd.unlink(comm_id)
cm.unregister_cache(cache.cache_id)
dd.finalize()
say("done")
