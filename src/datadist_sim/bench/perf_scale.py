"""How the cost of a pull grows with links, live keys and requests, and memory per live key.

Each row's baseline is the smallest size of its own sweep in the same run, so the ratio reads as
"how much slower at this scale" (1.0 = flat). Metadata-only worlds: the sizes stay small on purpose,
so what is measured is bookkeeping, not memcpy.
"""

from __future__ import annotations

from typing import Callable, List, Sequence, Tuple

from datadist_sim.bench.perf_setup import CLOCK, Figure, Pair, best_of, traced_memory
from datadist_sim.llm_datadist import CacheDesc, CacheKey, CacheKeyByIdAndIndex, DataType

KEYS_PER_CACHE = 100
TINY = CacheDesc(1, [1, 64], DataType.DT_FLOAT16)


def _sweep(
    group: str, label: str, sizes: Sequence[int], cost: Callable[[int], float], target: str
) -> List[Figure]:
    rows: List[Figure] = []
    first = 0.0
    for n in sizes:
        us = cost(n) * 1e6
        first = first or us
        rows.append(
            Figure(
                group, f"{label} = {n:,}", us, "µs/pull", first, f"{label} = {sizes[0]:,}", us / first, target
            )
        )
    return rows


def pull_cost_vs_links(links: int) -> float:
    """Pulls by id spread round-robin over ``links`` linked Prompts."""
    with Pair(prompts=links, backed=False) as pair:
        keys = []
        for i, dd in enumerate(pair.prompts):
            src = dd.cache_manager.allocate_cache(TINY)
            keys.append(CacheKeyByIdAndIndex(i + 1, src.cache_id, 0))
        manager = pair.decode_cm
        dst = manager.allocate_cache(TINY)
        cursor = [0]

        def pull() -> None:
            cursor[0] = (cursor[0] + 1) % len(keys)
            manager.pull_cache(keys[cursor[0]], dst, 0)

        return best_of(3, pull, 1000)


def _keyed(pair: Pair, count: int, first_req: int = 0) -> List[CacheKey]:
    """``count`` live keys on the first Prompt, ``KEYS_PER_CACHE`` per allocation (one per batch)."""
    keys: List[CacheKey] = []
    desc = CacheDesc(1, [KEYS_PER_CACHE, 64], DataType.DT_FLOAT16)
    for start in range(first_req, first_req + count, KEYS_PER_CACHE):
        batch = [
            CacheKey(pair.prompt_id, req_id=r)
            for r in range(start, min(start + KEYS_PER_CACHE, first_req + count))
        ]
        if len(batch) < KEYS_PER_CACHE:
            pair.prompt_cm.allocate_cache(CacheDesc(1, [len(batch), 64], DataType.DT_FLOAT16), batch)
        else:
            pair.prompt_cm.allocate_cache(desc, batch)
        keys.extend(batch)
    return keys


def pull_cost_vs_live_keys(live: int, pulls: int = 300, repeat: int = 3) -> float:
    """Pulls by ``CacheKey`` (each consumes its key) while ``live`` other keys wait; best of ``repeat``."""
    with Pair(backed=False, pool_bytes=1 << 34) as pair:
        _keyed(pair, live)
        manager = pair.decode_cm
        dst = manager.allocate_cache(TINY)
        best = float("inf")
        for i in range(repeat):
            pulled = _keyed(pair, pulls, first_req=live + i * pulls)
            start = CLOCK()
            for key in pulled:
                manager.pull_cache(key, dst, 0)
            best = min(best, (CLOCK() - start) / pulls)
        return best


def _request(pair: Pair, r: int) -> None:
    """One whole request: a keyed Prompt cache, the Decode destination, the pull by key, both freed."""
    prompt, decode = pair.prompt_cm, pair.decode_cm
    key = CacheKey(pair.prompt_id, req_id=r)
    src = prompt.allocate_cache(TINY, [key])
    dst = decode.allocate_cache(TINY)
    decode.pull_cache(key, dst, 0)
    decode.deallocate_cache(dst)
    prompt.deallocate_cache(src)


def request_costs(marks: Sequence[int], chunk: int = 500) -> List[Tuple[int, float]]:
    """Cost per request after ``n`` requests of history, for each ``n`` in ``marks``: one long run timed
    in chunks, each mark reporting the best of the chunks just before it (noise is one-sided)."""
    out: List[Tuple[int, float]] = []
    with Pair(backed=False) as pair:
        done, chunks = 0, []
        for mark in sorted(marks):
            while done < mark:
                size = min(chunk, mark - done)
                start = CLOCK()
                for r in range(done, done + size):
                    _request(pair, r)
                chunks.append((CLOCK() - start) / size)
                done += size
            out.append((mark, min(chunks[-3:])))
    return out


def memory_per_live_key(live: int) -> float:
    """Bytes of Python memory per live key (metadata-only, so no cache bytes are counted)."""
    with Pair(backed=False, pool_bytes=1 << 34) as pair:
        _keyed(pair, 100)  # warm the allocator and the trace ring first
        grown, _ = traced_memory(lambda: _keyed(pair, live, first_req=100))
        return grown / live


def memory_after_requests(requests: int) -> float:
    """Bytes still held after ``requests`` finished request cycles (history must not accumulate)."""
    with Pair(backed=False) as pair:

        def run() -> None:
            for r in range(requests):
                _request(pair, r)

        grown, _ = traced_memory(run)
        return float(grown)


def _relative(
    group: str, label: str, unit: str, target: str, values: List[Tuple[int, float]]
) -> List[Figure]:
    """Rows against the first value of the sweep."""
    first = values[0][1] or 1.0
    return [
        Figure(group, label.format(n), v, unit, first, "first size", v / first, target) for n, v in values
    ]


def scaling(quick: bool) -> List[Figure]:
    links = (1, 16, 64) if quick else (1, 16, 128, 512)
    keys = (10, 1000, 10_000) if quick else (10, 1000, 10_000, 100_000)
    requests = (10, 1000, 10_000) if quick else (10, 1000, 10_000, 100_000)
    rows = _sweep("scale", "links", links, pull_cost_vs_links, "flat")
    rows += _sweep("scale", "live keys", keys, pull_cost_vs_live_keys, "flat")
    costs = dict(request_costs(requests))
    rows += _sweep("scale", "requests done", requests, lambda n: costs[n], "flat")
    for row in rows[-len(requests) :]:
        row.unit = "µs/request"
    per_key = [(n, memory_per_live_key(n)) for n in keys[1:]]
    rows += _relative("memory", "per live key, {:,} live", "B/key", "linear in live keys", per_key)
    done = (1000, 5000) if quick else (1000, 10_000, 20_000)
    held = [(n, memory_after_requests(n) / 1024) for n in done]
    rows += _relative("memory", "held after {:,} finished requests", "KiB", "not growing with history", held)
    return rows
