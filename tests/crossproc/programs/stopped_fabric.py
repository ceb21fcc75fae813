"""Calls into a fabric that stops answering: each fails within its bound with a timeout code; then the
fabric is killed and the next call fails with LLM_FAILED at once. Prints each code and how long it took."""

from __future__ import annotations

import time

from _common import DECODE_ID, PROMPT_ID, code_of, say, wait_for_go
from llm_datadist import CacheDesc, CacheKeyByIdAndIndex, DataType, LLMDataDist, LLMRole  # type: ignore[import-not-found]

POOL = '{"memory_size": 16777216}'
dd = LLMDataDist(LLMRole.DECODER, DECODE_ID)
dd.init(
    {
        "ge.exec.deviceId": "0",
        "llm.EnableCacheManager": "1",
        "llm.SyncKvCacheWaitTime": "1000",
        "llm.MemPoolConfig": POOL,
    }
)
cm = dd.cache_manager
desc = CacheDesc(1, [1, 256], DataType.DT_FLOAT16)
cache = cm.allocate_cache(desc)
say("ready")
wait_for_go()  # the fabric is stopped now


def timed(name: str, call: object) -> None:
    start = time.monotonic()
    code = code_of(call)
    say(name, code, f"{time.monotonic() - start:.2f}")


timed("pull", lambda: cm.pull_cache(CacheKeyByIdAndIndex(PROMPT_ID, 1, 0), cache, 0))
timed("allocate", lambda: cm.allocate_cache(desc))
wait_for_go()  # the fabric is dead now
timed("after_death", lambda: cm.allocate_cache(desc))
