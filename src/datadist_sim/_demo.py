"""The main job: a Prompt and a Decode cluster, a link, real pulls, a fault with a retrying client, a summary.

Everything runs on the virtual clock, so the simulated seconds of timeouts and backoff cost no wall time.
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable, Dict, List, Tuple

import numpy as np

from datadist_sim._status_v1 import LLM_ERRORS, as_code
from datadist_sim._views import tensor_views
from datadist_sim._world.surface import SimConfig, SimWorld, summarise
from datadist_sim.faults.rules import Fault
from datadist_sim.llm_datadist import (
    CacheDesc,
    CacheKey,
    DataType,
    LLMClusterInfo,
    LLMConfig,
    LLMDataDist,
    LLMRole,
    LLMStatusCode,
)
from datadist_sim.llm_datadist.v2.llm_datadist import finalize_all

PROMPT_ID, DECODE_ID = 0, 1
PROMPT_EP = ("192.168.1.1", 26000)


def _cluster_info() -> LLMClusterInfo:
    info = LLMClusterInfo()
    info.remote_cluster_id = PROMPT_ID
    info.append_local_ip_info("192.168.2.1", 0)
    info.append_remote_ip_info(*PROMPT_EP)
    return info


def _start(role: LLMRole, cluster_id: int, listen: bool) -> LLMDataDist:
    cfg = LLMConfig()
    cfg.device_id = 0
    cfg.sync_kv_timeout = 1000
    if listen:
        cfg.listen_ip_info = f"{PROMPT_EP[0]}:{PROMPT_EP[1]}"
    dd = LLMDataDist(role, cluster_id)
    dd.init(cfg.generate_options())
    return dd


def _pull_requests(prompt: LLMDataDist, decode: LLMDataDist, requests: int = 8) -> Dict[str, bool]:
    """The official KvCacheManager flow: keys on the Prompt side, pulls by key, bytes checked."""
    desc = CacheDesc(2, [requests, 4, 16], DataType.DT_FLOAT16)
    keys = [CacheKey(prompt_cluster_id=PROMPT_ID, req_id=i, model_id=0) for i in range(requests)]
    src = prompt.kv_cache_manager.allocate_cache(desc, keys)
    rng = np.random.default_rng(0)
    for view in tensor_views(src):
        view[...] = rng.standard_normal(view.shape).astype(view.dtype)
    dst = decode.kv_cache_manager.allocate_cache(desc)
    for i, key in enumerate(keys):
        decode.kv_cache_manager.pull_cache(key, dst, batch_index=i)
    same = all(np.array_equal(a, b) for a, b in zip(tensor_views(src), tensor_views(dst)))
    try:
        decode.kv_cache_manager.pull_cache(keys[0], dst, batch_index=0)
        consumed = False
    except LLM_ERRORS as exc:  # the v1 manager raises llm_datadist_v1.LLMException
        consumed = as_code(exc.status_code) is LLMStatusCode.LLM_KV_CACHE_NOT_EXIST
    decode.kv_cache_manager.deallocate_cache(dst)
    prompt.kv_cache_manager.deallocate_cache(src)
    return {f"{requests} pulls delivered the exact bytes": same, "a pulled key is consumed": consumed}


def _retry_link(
    world: SimWorld, link: Callable[[], Tuple[LLMStatusCode, List[LLMStatusCode]]], tries: int
) -> List[str]:
    """Exponential backoff on the simulated clock: 0.5 s, 1 s, 2 s, ..."""
    outcomes = []
    for attempt in range(tries):
        ret, _ = link()
        outcomes.append(ret.name)
        if ret is LLMStatusCode.LLM_SUCCESS:
            break
        world.clock.sleep(0.5 * 2**attempt)
    return outcomes


def run_demo(seed: int = 0, as_json: bool = False) -> int:
    wall = time.perf_counter()
    world = SimWorld(seed=seed, config=SimConfig(pause_wall_limit_s=0.001))
    checks: Dict[str, bool] = {}
    with world.activate():
        prompt = _start(LLMRole.PROMPT, PROMPT_ID, listen=True)
        decode = _start(LLMRole.DECODER, DECODE_ID, listen=False)
        ret, _rets = decode.link_clusters([_cluster_info()], timeout=5000)
        checks["link"] = ret is LLMStatusCode.LLM_SUCCESS and world.is_linked(DECODE_ID, PROMPT_ID)
        decode.check_link_status(PROMPT_ID)
        checks.update(_pull_requests(prompt, decode))
        checks["unlink"] = decode.unlink_clusters([_cluster_info()])[0] is LLMStatusCode.LLM_SUCCESS

        # Fault: the Prompt hangs for four simulated seconds; a retrying client backs off until it answers.
        world.faults.add(Fault.hang(PROMPT_ID, heal_after_s=4.0))
        outcomes = _retry_link(world, lambda: decode.link_clusters([_cluster_info()], timeout=500), tries=6)
        checks["recovered after the fault"] = outcomes[-1] == "LLM_SUCCESS" and len(outcomes) > 1
        decode.unlink_clusters([_cluster_info()])
        finalize_all(world)
    summary: Dict[str, Any] = {
        "seed": seed,
        "simulated_seconds": round(world.now(), 4),
        "wall_seconds": round(time.perf_counter() - wall, 4),
        "retry_outcomes": outcomes,
        "codes": summarise(world.trace).per_code,
        "per_operation": summarise(world.trace).table(),
        "checks": checks,
    }
    _print(summary, as_json)
    return 0 if all(checks.values()) else 1


def _print(summary: Dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(summary, indent=2))
        return
    print(f"datadist-sim demo (seed {summary['seed']})")
    print(
        f"  simulated time  {summary['simulated_seconds']:.3f} s   wall time {summary['wall_seconds']:.3f} s"
    )
    print(f"  retrying link during a hung Prompt: {' -> '.join(summary['retry_outcomes'])}")
    print("  API calls by outcome:")
    for line in summary["per_operation"].splitlines():
        print(f"    {line}")
    print("  checks:")
    for name, ok in summary["checks"].items():
        print(f"    [{'ok' if ok else 'FAILED'}] {name}")
