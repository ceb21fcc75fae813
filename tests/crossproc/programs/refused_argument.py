"""Passes the fabric an argument of a type the protocol does not carry (one that would create a marker
file if anyone decoded it), then carries on: the call fails with a ``TypeError`` naming the type, and
the next call succeeds on the same connection, in the same session."""

from __future__ import annotations

import os
import sys
from typing import Any

from _common import say
from llm_datadist import CacheDesc, DataType, LLMDataDist, LLMRole  # type: ignore[import-not-found]

import datadist_sim.fabric
from datadist_sim.fabric.client.client import current_client

marker = sys.argv[1]


class Payload:
    def __reduce__(self) -> Any:
        return (os.system, (f"touch {marker}",))


class NotCarried:
    """A class of this program's own, which no face takes."""


dd = LLMDataDist(LLMRole.DECODER, 2)
pool = '{"memory_size": 16777216}'
dd.init({"ge.exec.deviceId": "0", "llm.EnableCacheManager": "1", "llm.MemPoolConfig": pool})
cm = dd.cache_manager
client = current_client()
assert client is not None
connections = list(client._idle_calls)  # this thread's call connection, idle between calls
try:
    cm.allocate_cache(Payload())
    say("refused", "no: it was accepted")
except TypeError as exc:
    say("refused", exc)
try:
    cm.allocate_cache(NotCarried())
    say("refused_plain", "no: it was accepted")
except TypeError as exc:
    say("refused_plain", exc)
cache = cm.allocate_cache(CacheDesc(1, [4, 16], DataType.DT_FLOAT16))
say("after", type(cache).__name__)
say("same_connection", client._idle_calls == connections and len(connections) == 1)
status = datadist_sim.fabric.status()
say("processes", status["processes"])
say("clusters", " ".join(map(str, status["clusters"])))
cm.deallocate_cache(cache)
dd.finalize()
say("done")
