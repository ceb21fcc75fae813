"""What the performance figures share: the ``Figure`` row, best-of timing, worlds with one Decode linked
to P Prompts (CacheManager mode), and the baseline that does ``pull_cache``'s argument checks only."""

from __future__ import annotations

import gc
import json
import time
import tracemalloc
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Callable, List, Optional, Tuple, Type

from datadist_sim._world.surface import SimConfig, SimWorld, activate
from datadist_sim.llm_datadist import (
    Cache,
    CacheKey,
    CacheKeyByIdAndIndex,
    KvCache,
    LLMClusterInfo,
    LLMRole,
    LLMStatusCode,
    Placement,
)
from datadist_sim.llm_datadist.status import raise_if_false, raise_if_true
from datadist_sim.llm_datadist.utils.utils import check_int64, check_isinstance, check_uint32
from datadist_sim.llm_datadist.v2.llm_datadist import LLMDataDist, finalize_all
from datadist_sim.llm_datadist.v2.llm_utils import (
    layer_range_to_tensor_indices,
    pack_pulled_key,
)


@dataclass
class Figure:
    """One measured case: our cost, the baseline's, their ratio, and the target it is held to."""

    group: str
    case: str
    ours: float
    unit: str
    baseline: Optional[float] = None
    baseline_case: str = ""
    ratio: Optional[float] = None
    target: str = ""
    met: Optional[bool] = None


CLOCK = time.process_time
"""CPU time of this process: the benchmark machines are shared, and other processes' load must not
count against the simulator (every baseline is timed with the same clock)."""


def traced_memory(action: Callable[[], Any]) -> Tuple[int, Any]:
    """Bytes of Python memory (tracemalloc, numpy buffers included) that ``action`` leaves held, and
    what it returned (kept alive by the caller while it is measured)."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = action()
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before, kept
    finally:
        tracemalloc.stop()


def best_of(repeat: int, action: Callable[[], object], inner: int = 1) -> float:
    """Seconds per call: the best of ``repeat`` timings of ``inner`` calls each (after a warm-up)."""
    action()
    best = float("inf")
    for _ in range(repeat):
        start = CLOCK()
        for _ in range(inner):
            action()
        best = min(best, (CLOCK() - start) / inner)
    return best


DECODE_ID = 100_000
LINK_BATCH = 16


def validate_like_pull_cache(
    cache_key: Any, cache: Any, batch_index: int = 0, size: int = -1, v1: bool = False
) -> Any:
    """The argument checks of ``CacheManager.pull_cache`` (or, ``v1``, ``KvCacheManager.pull_cache``),
    in its order, with the same helpers; then return the packed key instead of calling the engine."""
    check_isinstance("cache_key", cache_key, [CacheKey, CacheKeyByIdAndIndex])
    check_isinstance("cache", cache, KvCache if v1 else Cache)
    if v1:
        raise_if_true(cache.cache_desc.placement == Placement.HOST, "Only support device cache")
    check_uint32("batch_index", batch_index)
    check_int64("size", size)
    if not v1:
        raise_if_true(cache.is_blocks_cache, "param check failed, cache can not be blocks cache.")
    raise_if_false(size == -1 or size > 0, "size ({0}) is invalid", size)
    check_uint32("tensor_num_per_layer", 2)
    packed = pack_pulled_key(cache_key)
    layer_range_to_tensor_indices(None, None, 2)
    return packed


def _info(prompt_id: int) -> LLMClusterInfo:
    info = LLMClusterInfo()
    info.remote_cluster_id = prompt_id
    info.append_local_ip_info("10.200.0.1", 0)
    info.append_remote_ip_info(*_endpoint(prompt_id))
    return info


def _endpoint(prompt_id: int) -> tuple[str, int]:
    return (f"10.{prompt_id // 65536 % 256}.{prompt_id // 256 % 256}.{prompt_id % 256}", 26000)


class Pair:
    """``with Pair(prompts=P) as pair:`` a world with P Prompts and one Decode linked to all of them."""

    def __init__(
        self, *, prompts: int = 1, backed: bool = True, pool_bytes: int = 1 << 28, v1: bool = False
    ) -> None:
        config = SimConfig(metadata_only=not backed, max_links=max(512, prompts))
        self.world = SimWorld(seed=0, config=config, trace_size=10_000)
        self._scope = activate(self.world)
        self._prompts_n, self._pool, self.v1 = prompts, pool_bytes, v1
        self.prompts: List[LLMDataDist] = []

    def _start(self, role: LLMRole, cluster_id: int, listen: bool) -> LLMDataDist:
        opts = {"ge.exec.deviceId": "0"}
        if self.v1:  # the KvCacheManager (no cache manager option); its pool is flowGraphMemMaxSize
            opts.update({"ge.flowGraphMemMaxSize": str(self._pool), "llm.MemUtilization": "1.0"})
        else:
            opts["llm.EnableCacheManager"] = "1"
            opts["llm.MemPoolConfig"] = json.dumps({"memory_size": self._pool, "page_shift": 16})
        if listen:
            opts["llm.listenIpInfo"] = "{}:{}".format(*_endpoint(cluster_id))
        dd = LLMDataDist(role, cluster_id)
        dd.init(opts)
        return dd

    def __enter__(self) -> Pair:
        self._scope.__enter__()
        self.prompts = [self._start(LLMRole.PROMPT, i + 1, True) for i in range(self._prompts_n)]
        self.decode = self._start(LLMRole.DECODER, DECODE_ID, False)
        ids = [i + 1 for i in range(self._prompts_n)]
        for start in range(0, len(ids), LINK_BATCH):
            ret, rets = self.decode.link_clusters([_info(p) for p in ids[start : start + LINK_BATCH]], 5000)
            if ret is not LLMStatusCode.LLM_SUCCESS:
                raise RuntimeError(f"link failed: {ret} {rets}")
        return self

    @property
    def prompt_id(self) -> int:
        return 1

    @property
    def prompt_cm(self) -> Any:
        return self.prompts[0].kv_cache_manager if self.v1 else self.prompts[0].cache_manager

    @property
    def decode_cm(self) -> Any:
        return self.decode.kv_cache_manager if self.v1 else self.decode.cache_manager

    def __exit__(
        self, kind: Optional[Type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        finalize_all(self.world)
        self._scope.__exit__(kind, exc, tb)
