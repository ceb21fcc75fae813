"""A long virtual-time workload: many Prompts and Decoders, a stream of requests, a fault plan, and a
client that retries, re-links and gives up cleanly. Shared by the load test and ``python -m``.

Each request: the Prompt allocates a one-batch cache under the request's key and drops its own reference
at once (the memory now lives as long as the key, §7.1); a Decoder pulls the key, retrying up to
``ATTEMPTS`` times and re-making the link after a timeout; a request it gives up on has its key removed.
A request ends exactly one way: delivered, delivered by a timed-out pull whose bytes did land (the key
is gone when the client retries), abandoned, or rejected at allocation.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional

from tests.reliability._common import link_info, listen_on

from datadist_sim._status_v1 import LLM_ERRORS, as_code
from datadist_sim._world.current import activate
from datadist_sim._world.world import SimConfig, SimWorld
from datadist_sim.faults.rules import Fault
from datadist_sim.llm_datadist.configs import LLMRole
from datadist_sim.llm_datadist.data_type import DataType
from datadist_sim.llm_datadist.status import LLMStatusCode
from datadist_sim.llm_datadist.v2.llm_datadist import LLMDataDist, finalize_all
from datadist_sim.llm_datadist.v2.llm_types import Cache, CacheDesc, CacheKey

S = LLMStatusCode
ATTEMPTS = 4
DST_BATCH = 8
PROMPT_BASE, DECODER_BASE = 1, 1001


@dataclass
class LoadReport:
    requests: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    codes: Counter[str] = field(default_factory=Counter)
    relinks: int = 0
    faults_fired: int = 0
    simulated_s: float = 0.0
    wall_s: float = 0.0
    trace_total: int = 0
    trace_kept: int = 0
    world: Optional[SimWorld] = None


def _instance(role: LLMRole, cid: int) -> LLMDataDist:
    opts = {
        "ge.exec.deviceId": "0",
        "llm.EnableCacheManager": "1",
        "llm.MemPoolConfig": '{"memory_size": 1073741824, "page_shift": 16}',
    }
    if role is LLMRole.PROMPT:
        opts["llm.listenIpInfo"] = listen_on(cid)
    dd = LLMDataDist(role, cid)
    dd.init(opts)
    return dd


def fault_plan(prompts: List[int], decoders: List[int]) -> List[Fault]:
    """Faults of every kind the fabric sees in production, at rates a long run meets many times."""
    return [
        Fault.fail(S.LLM_TIMEOUT, op="pull_cache", probability=0.003, name="pull fails"),
        Fault.timeout(op="pull_cache", landed=None, probability=0.002, name="pull times out"),
        Fault.cut_link(op="pull_cache", probability=0.0005, name="link cut mid-pull"),
        Fault.delay(2.0, op="pull_cache", probability=0.001, name="pull slowed past sync_kv_timeout"),
        Fault.hang(prompts[2], start_s=10.0, heal_after_s=5.0, name="prompt hangs"),
        Fault.partition(decoders[1], prompts[4], start_s=20.0, heal_after_s=5.0, name="partition"),
        Fault.cap_pool(prompts[5], 0, start_s=30.0, heal_after_s=5.0, name="prompt pool capped"),
    ]


def run_load(
    requests: int,
    *,
    prompts: int = 16,
    decoders: int = 16,
    seed: int = 1,
    trace_size: int = 10_000,
    checkpoint: Optional[Callable[[int, SimWorld], None]] = None,
    every: int = 10_000,
) -> LoadReport:
    """Run ``requests`` requests; ``checkpoint(done, world)`` is called every ``every`` requests and
    once more before the world is finalized at the end (``report.world`` keeps it)."""
    world = SimWorld(seed=seed, config=SimConfig(metadata_only=True), trace_size=trace_size)
    report = LoadReport(requests=requests, world=world)
    rng = random.Random(seed)
    desc = CacheDesc(2, [1, 128, 1024], DataType.DT_FLOAT16)
    started = time.perf_counter()
    with activate(world):
        p_ids = [PROMPT_BASE + i for i in range(prompts)]
        d_ids = [DECODER_BASE + i for i in range(decoders)]
        ps = {p: _instance(LLMRole.PROMPT, p) for p in p_ids}
        ds = {d: _instance(LLMRole.DECODER, d) for d in d_ids}
        for dd in ds.values():
            ret, _ = dd.link_clusters([link_info(p) for p in p_ids])
            assert ret is S.LLM_SUCCESS, ret
        dsts: Dict[int, Cache] = {
            d: dd.cache_manager.allocate_cache(CacheDesc(2, [DST_BATCH, 128, 1024], DataType.DT_FLOAT16))
            for d, dd in ds.items()
        }
        world.faults.add(*fault_plan(p_ids, d_ids))
        for r in range(requests):
            p, d = rng.choice(p_ids), rng.choice(d_ids)
            report.outcomes[_one(report, ps[p], ds[d], dsts[d], CacheKey(p, r), desc, r % DST_BATCH)] += 1
            if checkpoint is not None and (r + 1) % every == 0:
                checkpoint(r + 1, world)
        if checkpoint is not None:
            checkpoint(requests, world)
        report.faults_fired = world.faults.fired_total
        report.simulated_s = world.now()
        finalize_all(world)
    report.wall_s = time.perf_counter() - started
    report.trace_total, report.trace_kept = world.trace.total, len(world.trace)
    return report


def _one(
    report: LoadReport, p: LLMDataDist, d: LLMDataDist, dst: Cache, key: CacheKey, desc: CacheDesc, index: int
) -> str:
    try:
        p.cache_manager.deallocate_cache(p.cache_manager.allocate_cache(desc, [key]))
    except LLM_ERRORS as exc:
        report.codes[f"allocate_cache {exc.status_code.name}"] += 1
        return "rejected"
    timed_out = False
    for _ in range(ATTEMPTS):
        try:
            d.cache_manager.pull_cache(key, dst, index)
            return "delivered"
        except LLM_ERRORS as exc:
            code = as_code(exc.status_code)
            report.codes[f"pull_cache {code.name}"] += 1
        if code is S.LLM_KV_CACHE_NOT_EXIST and timed_out:
            return "delivered by a timed-out pull"
        timed_out = timed_out or code is S.LLM_TIMEOUT
        if code in (S.LLM_TIMEOUT, S.LLM_NOT_YET_LINK):
            _relink(report, d, key.cluster_id)
    p.cache_manager.remove_cache_key(key)
    return "abandoned"


def _relink(report: LoadReport, d: LLMDataDist, p: int) -> None:
    d.unlink_clusters([link_info(p)], force=True)
    ret, _ = d.link_clusters([link_info(p)])
    report.codes[f"link_clusters {ret.name}"] += 1
    report.relinks += 1


if __name__ == "__main__":
    import sys

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    rep = run_load(n)
    print(f"{rep.requests} requests in {rep.wall_s:.1f} s wall, {rep.simulated_s:.1f} s simulated")
    print(dict(rep.outcomes), dict(rep.codes), rep.relinks, rep.faults_fired, rep.trace_total, rep.trace_kept)
