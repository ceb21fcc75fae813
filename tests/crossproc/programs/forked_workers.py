"""Three workers ``fork``ed from one parent after it allocated a buffer, so each holds its own copy of
that buffer at the same virtual address: a Prompt that registers it with a key, and two Decoders (A, B)
that register theirs. A pulls; later A unregisters and reuses its buffer, and B pulls. Each worker
checks its own bytes and reports them; the parent prints every report as ``name value``.

Usage: ``forked_workers.py NBYTES``."""

from __future__ import annotations

import multiprocessing as mp
import sys
import traceback
from typing import Any

import numpy as np
from _common import PROMPT_ID, RANK_TABLE, pattern, poll_until_ready

NBYTES = int(sys.argv[1])
SHAPE = [1, NBYTES // 2]
A_ID, B_ID = 2, 3
SENT = pattern(7, SHAPE, np.float16)
B_OWN = np.full(SHAPE, 5, np.float16)
A_REUSED = np.full(SHAPE, 9, np.float16)
buffer = np.zeros(SHAPE, np.float16)  # before the fork: the same address in every worker


def worker(role: str, steps: Any, out: Any) -> None:
    from llm_datadist import CacheDesc, CacheKey, DataType, LLMDataDist, LLMRole  # type: ignore

    def step() -> None:
        steps.wait(60)

    try:
        own = {"prompt": PROMPT_ID, "a": A_ID, "b": B_ID}[role]
        dd = LLMDataDist(LLMRole.PROMPT if role == "prompt" else LLMRole.DECODER, own)
        options = {"ge.exec.deviceId": "0", "llm.EnableCacheManager": "1"}
        dd.init({**options, "llm.MemPoolConfig": '{"memory_size": 67108864}'})
        cm = dd.cache_manager
        desc = CacheDesc(1, SHAPE, DataType.DT_FLOAT16)
        out.put((f"{role}_address", buffer.ctypes.data))
        # registered in this order: prompt, B, A (an address-only table would pick the last for any)
        if role == "prompt":
            buffer[...] = SENT
            cache = cm.register_cache(desc, [buffer.ctypes.data], [CacheKey(PROMPT_ID, 1)])
        step()
        if role == "b":
            buffer[...] = B_OWN
            cache = cm.register_cache(desc, [buffer.ctypes.data])
        step()
        if role == "a":
            cache = cm.register_cache(desc, [buffer.ctypes.data])
        step()
        links = {"a": [("ca", A_ID)], "b": [("cb", B_ID)], "prompt": [("ca", A_ID), ("cb", B_ID)]}[role]
        comms = [dd.link(name, {PROMPT_ID: 0, other: 1}, RANK_TABLE) for name, other in links]
        out.put((f"{role}_linked", all(poll_until_ready(dd, c) == "OK" for c in comms)))
        step()
        if role == "a":
            cm.pull_cache(CacheKey(PROMPT_ID, 1), cache)
            out.put(("a_pulled", bool(np.array_equal(buffer, SENT))))
        step()

        def report(name: str, want: np.ndarray) -> None:
            out.put((name, bool(np.array_equal(buffer, want))))

        if role == "b":
            report("b_untouched", B_OWN)
        if role == "prompt":
            report("prompt_intact", SENT)
        step()
        if role == "a":  # the process takes its buffer back and uses it for something else
            cm.unregister_cache(cache.cache_id)
            buffer[...] = A_REUSED
        step()
        if role == "b":
            cm.pull_cache(CacheKey(PROMPT_ID, 1), cache)
            report("b_pulled", SENT)
        step()
        if role == "a":
            report("a_reused_untouched", A_REUSED)
        step()
        for comm in comms:
            dd.unlink(comm)
        dd.finalize()
        out.put((f"{role}_done", True))
    except BaseException:
        out.put((f"{role}_error", traceback.format_exc().replace("\n", " | ")))
        steps.abort()


if __name__ == "__main__":
    context = mp.get_context("fork")
    steps = context.Barrier(3)
    out = context.Queue()
    workers = [context.Process(target=worker, args=(r, steps, out)) for r in ("prompt", "a", "b")]
    for w in workers:
        w.start()
    for w in workers:
        w.join(120)
    while not out.empty():
        name, value = out.get()
        print(name, value, flush=True)
    print("exit", [w.exitcode for w in workers], flush=True)
