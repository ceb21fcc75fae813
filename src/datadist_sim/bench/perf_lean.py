"""The baselines a small pull is held to: plain-Python argument checks, and a lean hand-written model of the
same bookkeeping.

The lean model is what a pull would cost if the simulator were written for that one case only, and it is
kept honest: the same argument checks as ``CacheManager.pull_cache`` (written as plain comparisons), a
lock, the lookup of the source cache and of the key it consumes, the link check, the simulated clock moved
by size / bandwidth + round trip, the bytes copied between two numpy buffers (by memoryview slices, as
ours), and one trace record (a tuple of the time, cluster, operation, outcome and the argument objects,
formatted only when read, as ours). It has no faults, no timeouts, no threads and no layer ranges: what it
leaves out is what the simulator's fast path must make cheap, not skip.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any, Deque, Dict, Optional, Tuple

import numpy as np

from datadist_sim.llm_datadist import (
    Cache,
    CacheKey,
    CacheKeyByIdAndIndex,
    KvCache,
    LLMException,
    LLMStatusCode,
    Placement,
)

_U32 = 1 << 32
_I64 = 1 << 63
_INVALID = (1 << 64) - 1


def _bad(message: str) -> LLMException:
    return LLMException(message, status_code=LLMStatusCode.LLM_PARAM_INVALID)


def validate_plain(
    cache_key: Any, cache: Any, batch_index: int = 0, size: int = -1, v1: bool = False
) -> Tuple[int, ...]:
    """``pull_cache``'s argument checks in its order (v2 ``CacheManager``, or v1 ``KvCacheManager``), as
    plain comparisons (no helper functions, no tuples rebuilt per call); returns the packed key. What
    validation costs written by hand."""
    key_type = type(cache_key)
    if key_type is not CacheKey and key_type is not CacheKeyByIdAndIndex:
        raise _bad("cache_key must be CacheKey or CacheKeyByIdAndIndex")
    if not isinstance(cache, KvCache if v1 else Cache):
        raise _bad("cache must be Cache")
    if v1 and cache.cache_desc.placement == Placement.HOST:
        raise _bad("Only support device cache")
    if type(batch_index) is not int or not 0 <= batch_index < _U32:
        raise _bad("batch_index out of range")
    if type(size) is not int or not -_I64 <= size < _I64:
        raise _bad("size out of range")
    if not v1 and getattr(cache, "is_blocks_cache"):  # noqa: B009  (a v2 Cache here)
        raise _bad("param check failed, cache can not be blocks cache.")
    if size != -1 and size <= 0:
        raise _bad(f"size ({size}) is invalid")
    if key_type is CacheKey:
        return (cache_key.cluster_id, -1, 0, cache_key.req_id, cache_key.prefix_id, cache_key.model_id, 0)
    return (cache_key.cluster_id, cache_key.cache_id, cache_key.batch_index, _INVALID, _INVALID, 0, 0)


class LeanPull:
    """One Decode pulling from one Prompt: the bookkeeping of ``pull_cache`` and nothing else."""

    def __init__(
        self, nbytes: int, *, v1: bool = False, bandwidth: float = 25e9, rtt_s: float = 2e-6
    ) -> None:
        self.v1 = v1
        self.lock = threading.Lock()
        self.now = 0.0
        self.bandwidth, self.rtt_s = bandwidth, rtt_s
        self.linked = {1}
        self.src_caches: Dict[int, Tuple[np.ndarray, int]] = {}  # cache_id -> (buffer, batch bytes)
        self.req_at: Dict[Tuple[int, int], Tuple[str, int, int]] = {}  # (cache_id, batch) -> req key
        self.key_table: Dict[Tuple[str, int, int], Tuple[int, int]] = {}
        self.dst_caches: Dict[int, np.ndarray] = {}
        self.trace: Deque[Tuple[Any, ...]] = deque(maxlen=10_000)
        self.src_caches[1] = (np.zeros(nbytes, np.uint8), nbytes)
        self.nbytes = nbytes

    def pull_cache(self, cache_key: Any, cache: Any, batch_index: int = 0, size: int = -1) -> None:
        packed = validate_plain(cache_key, cache, batch_index, size, self.v1)
        outcome = "LLM_SUCCESS"
        try:
            with self.lock:
                if packed[0] not in self.linked:
                    raise LLMException("not linked", status_code=LLMStatusCode.LLM_NOT_YET_LINK)
                consume: Optional[Tuple[str, int, int]] = None
                if packed[1] >= 0:
                    found = self.src_caches.get(packed[1])
                    if found is None:
                        raise LLMException("no cache", status_code=LLMStatusCode.LLM_KV_CACHE_NOT_EXIST)
                    src_batch = packed[2]
                    consume = self.req_at.get((packed[1], src_batch))
                    src_id = packed[1]
                else:
                    ek = ("req", packed[3], packed[5])
                    where = self.key_table.get(ek)
                    if where is None:
                        raise LLMException("no key", status_code=LLMStatusCode.LLM_KV_CACHE_NOT_EXIST)
                    src_id, src_batch = where
                    consume = ek
                    found = self.src_caches[src_id]
                buffer, batch_bytes = found
                dst = self.dst_caches.get(cache.cache_id)
                if dst is None:
                    dst = self.dst_caches[cache.cache_id] = np.zeros(self.nbytes, np.uint8)
                nbytes = batch_bytes if size == -1 else size
                if nbytes > batch_bytes or (batch_index + 1) * nbytes > dst.nbytes:
                    raise _bad("size exceeds the batch")
                self.now += nbytes / self.bandwidth + self.rtt_s
                start = src_batch * batch_bytes
                offset = batch_index * nbytes
                dst.data[offset : offset + nbytes] = buffer.data[start : start + nbytes]
                if consume is not None:
                    self.key_table.pop(consume, None)
                    self.req_at.pop((src_id, src_batch), None)
        except LLMException as exc:
            outcome = exc.status_code.name
            raise
        finally:
            self.trace.append((self.now, 100_000, "pull_cache", outcome, (cache_key, cache, batch_index)))
