"""Large transfers (past the inline limit) between raw pointers and shared caches of two processes:
raw -> raw, raw -> shared and shared -> raw, each repeated so reused scratch files are exercised."""

from __future__ import annotations

import sys

import numpy as np
from _common import DECODE_ID, PROMPT_ID, RANK_TABLE, pattern, poll_until_ready, say, wait_for_go
from llm_datadist import (  # type: ignore[import-not-found]
    CacheDesc,
    CacheKey,
    CacheKeyByIdAndIndex,
    DataType,
    LLMDataDist,
    LLMRole,
)

import datadist_sim.fabric

SHAPE = [1, 1 << 19]  # 1 MiB of float16 per tensor
side = sys.argv[1]
own = PROMPT_ID if side == "prompt" else DECODE_ID
dd = LLMDataDist(LLMRole.PROMPT if side == "prompt" else LLMRole.DECODER, own)
dd.init(
    {"ge.exec.deviceId": "0", "llm.EnableCacheManager": "1", "llm.MemPoolConfig": '{"memory_size": 67108864}'}
)
cm = dd.cache_manager
desc = CacheDesc(2, SHAPE, DataType.DT_FLOAT16)
if side == "prompt":
    raw = [pattern(50 + i, SHAPE, np.float16) for i in range(2)]
    registered = cm.register_cache(desc, [a.ctypes.data for a in raw], [CacheKey(PROMPT_ID, 1)])
    shared = cm.allocate_cache(desc)
    for i, view in enumerate(datadist_sim.fabric.tensor_views(shared)):
        view[...] = pattern(60 + i, SHAPE, np.float16)
    say("shared_id", shared.cache_id)
else:
    from datadist_sim.fabric.transport import peer_memory

    # parts of 1 MiB, so the raw -> raw pull's 2 MiB is read split among threads as a large one is
    peer_memory.PART_MIN_BYTES = 1 << 20
    parts: list = []
    read_part = peer_memory._read_part
    peer_memory._read_part = lambda pid, copies: (parts.append(pid), read_part(pid, copies))[1]
    raw = [np.zeros(SHAPE, dtype=np.float16) for _ in range(2)]
    registered = cm.register_cache(desc, [a.ctypes.data for a in raw])
    shared = cm.allocate_cache(desc)
wait_for_go()
comm_id = dd.link("large", {PROMPT_ID: 0, DECODE_ID: 1}, RANK_TABLE)
say("status", poll_until_ready(dd, comm_id))
if side == "decode":
    prompt_shared = int(sys.stdin.readline())
    sent_raw = [pattern(50 + i, SHAPE, np.float16) for i in range(2)]
    sent_shared = [pattern(60 + i, SHAPE, np.float16) for i in range(2)]
    for _ in range(2):
        for array in raw:
            array[...] = 0
        cm.pull_cache(CacheKey(PROMPT_ID, 1), registered)
        say("raw_to_raw", all(np.array_equal(a, s) for a, s in zip(raw, sent_raw)))
        cm.pull_cache(CacheKey(PROMPT_ID, 1), shared)
        views = datadist_sim.fabric.tensor_views(shared)
        say("raw_to_shared", all(np.array_equal(v, s) for v, s in zip(views, sent_raw)))
        cm.pull_cache(CacheKeyByIdAndIndex(PROMPT_ID, prompt_shared, 0), registered)
        say("shared_to_raw", all(np.array_equal(a, s) for a, s in zip(raw, sent_shared)))
    say("scratch_files_made", datadist_sim.fabric.status()["scratch_files_made"])
    say("direct_copies", datadist_sim.fabric.status()["direct_copies"])
    say("parts_read", len(parts))
    say("pulled")
wait_for_go()
dd.unlink(comm_id)
cm.unregister_cache(registered.cache_id)
cm.deallocate_cache(shared)
dd.finalize()
say("done")
