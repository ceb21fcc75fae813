"""One side of a cross-process mix: ``prompt`` is an ``llm_datadist`` v2 instance on the hixl backend
holding a cache from its pool and one over a numpy buffer of its own process (``register_cache``);
``client`` is a ``hixl.Hixl`` engine in another process that connects to where the Prompt listens and
READs and WRITEs both caches (docs/hixl_engine_facts.md §6)."""

from __future__ import annotations

import json
import sys

import _common  # noqa: F401  (installs the fake)
import hixl
import llm_datadist as llm
import numpy as np
from _common import digest, line, say

from datadist_sim.fabric import tensor_views

PROMPT = "127.0.0.1:16201"
SIZE = 8 << 10


def prompt() -> None:
    dd = llm.LLMDataDist(llm.LLMRole.PROMPT, 1)
    dd.init(
        {
            "ge.exec.deviceId": "0",
            "llm.EnableCacheManager": "1",
            "llm.TransferBackend": "hixl",
            "llm.listenIpInfo": PROMPT,
            "llm.MemPoolConfig": json.dumps({"memory_size": 1 << 20, "page_shift": 16}),
        }
    )
    desc = llm.CacheDesc(1, [SIZE], llm.DataType.DT_UINT8)
    pooled = dd.cache_manager.allocate_cache(desc)
    (view,) = tensor_views(pooled)
    view[:] = np.arange(SIZE) % 253
    own = (np.arange(SIZE) % 241).astype(np.uint8)
    registered = dd.cache_manager.register_cache(desc, [own.ctypes.data], remote_accessible=True)
    say("addrs", pooled.tensor_addrs[0], registered.tensor_addrs[0])
    say("pattern", digest(view), digest(own))
    while True:
        command = line()
        if command == "digest":
            say("digest", digest(view), digest(own))
        else:
            break
    dd.finalize()
    say("done")


def client() -> None:
    pooled, own = (int(x) for x in line().split())
    engine = hixl.Hixl()
    assert engine.initialize("127.0.0.1:0", {}) == hixl.SUCCESS
    buf = np.zeros(2 * SIZE, dtype=np.uint8)
    addr = buf.ctypes.data
    assert engine.register_mem(hixl.MemDesc(addr, buf.nbytes), hixl.MEM_HOST)[0] == hixl.SUCCESS
    say("connect", engine.connect(PROMPT, 5000))
    read = [hixl.TransferOpDesc(addr, pooled, SIZE), hixl.TransferOpDesc(addr + SIZE, own, SIZE)]
    say("read", engine.transfer_sync(PROMPT, hixl.READ, read, 30000))
    say("local", digest(buf[:SIZE]), digest(buf[SIZE:]))
    buf[:] = 0x77
    write = [hixl.TransferOpDesc(addr, pooled, 16), hixl.TransferOpDesc(addr + SIZE, own, 16)]
    say("write", engine.transfer_sync(PROMPT, hixl.WRITE, write, 30000))
    line()  # the Prompt has finalized
    say("after_finalize", engine.transfer_sync(PROMPT, hixl.READ, read, 30000))
    engine.finalize()
    say("done")


if __name__ == "__main__":
    {"prompt": prompt, "client": client}[sys.argv[1]]()
