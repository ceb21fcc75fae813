"""Threads: many clients pulling over shared links and allocating from one pool at once, and pulls racing
the Prompt's own ``transfer_cache_async`` on the same links.

Every run is bounded (a fixed number of operations per thread) and guarded against hangs: a thread
still alive after ``HANG_S`` of wall time is reported as a deadlock, not waited on forever. What is
checked is correctness, never speed: each key is delivered exactly once with its exact bytes, only
documented codes come out, and the books balance afterwards.
"""

from __future__ import annotations

import json
import random
import threading
from typing import Callable, Dict, List, Optional, Set, Tuple

import numpy as np
import pytest
from tests.reliability._common import NIGHTLY, STATS, check_books, link_info, listen_on

from datadist_sim._world.address_space import tensor_views
from datadist_sim._world.clock import Clock, RealClock, VirtualClock
from datadist_sim._world.current import activate
from datadist_sim._world.world import SimConfig, SimWorld
from datadist_sim.llm_datadist.configs import LLMRole
from datadist_sim.llm_datadist.data_type import DataType
from datadist_sim.llm_datadist.status import LLMException, LLMStatusCode
from datadist_sim.llm_datadist.v2.llm_datadist import LLMDataDist, finalize_all
from datadist_sim.llm_datadist.v2.llm_types import (
    Cache,
    CacheDesc,
    CacheKey,
    LayerSynchronizer,
    TransferConfig,
)

S = LLMStatusCode
HANG_S = 120.0
PROMPTS = (1, 2)
DECODERS = (11, 12, 13, 14)
BATCH = 4
REQS = 48 if not NIGHTLY else 192
OPS = 120 if not NIGHTLY else 2000
"""Random calls per thread in the random-calls test."""
"""Requests per Prompt."""
ROW = 2048


def _dd(role: LLMRole, cid: int) -> LLMDataDist:
    opts = {
        "ge.exec.deviceId": "0",
        "llm.EnableCacheManager": "1",
        "llm.MemPoolConfig": json.dumps({"memory_size": 64 << 20, "page_shift": 12}),
    }
    if role is LLMRole.PROMPT:
        opts["llm.listenIpInfo"] = listen_on(cid)
    dd = LLMDataDist(role, cid)
    dd.init(opts)
    return dd


def _desc(batch: int) -> CacheDesc:
    return CacheDesc(2, [batch, 16, 64], DataType.DT_FLOAT16)


def _pattern(p: int, req: int) -> np.ndarray:
    return np.random.default_rng(p * 100_003 + req).integers(0, 256, (2, ROW), dtype=np.uint8)


def _run(workers: List[Callable[[], None]]) -> List[BaseException]:
    """Start every worker, join them all; a thread alive after HANG_S is a deadlock."""
    errors: List[BaseException] = []

    def guarded(fn: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                fn()
            except BaseException as exc:  # collected and re-raised in the test thread
                errors.append(exc)

        return run

    threads = [threading.Thread(target=guarded(fn), daemon=True) for fn in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(HANG_S)
    stuck = [t.name for t in threads if t.is_alive()]
    assert not stuck, f"deadlock: {stuck} still running after {HANG_S} s"
    return errors


@pytest.fixture(params=["virtual", "real"])
def world(request: pytest.FixtureRequest) -> SimWorld:
    clock: Clock = VirtualClock() if request.param == "virtual" else RealClock()
    w = SimWorld(seed=11, clock=clock, config=SimConfig(link_setup_s=0.001))
    with activate(w):
        yield w  # type: ignore[misc]
    finalize_all(w)
    assert w.memory.backed_bytes == 0


def test_contended_pulls_deliver_every_key_exactly_once_while_the_pool_churns(world: SimWorld) -> None:
    """Two threads per Decoder pull every key of both Prompts (so four Decoders x two threads race for
    each key) while two threads per Prompt allocate and free from the Prompt's pool that is being read."""
    prompts = {p: _dd(LLMRole.PROMPT, p) for p in PROMPTS}
    decoders = {d: _dd(LLMRole.DECODER, d) for d in DECODERS}
    for dd in decoders.values():
        ret, _ = dd.link_clusters([link_info(p) for p in PROMPTS])
        assert ret is S.LLM_SUCCESS
    sources: Dict[int, List[Cache]] = {p: [] for p in PROMPTS}
    for p, dd in prompts.items():
        for first in range(0, REQS, BATCH):
            keys = [CacheKey(p, r) for r in range(first, first + BATCH)]
            cache = dd.cache_manager.allocate_cache(_desc(BATCH), keys)
            views = tensor_views(world.memory, cache.tensor_addrs, (BATCH, ROW), np.uint8)
            for b in range(BATCH):
                for t in range(2):
                    views[t][b] = _pattern(p, first + b)[t]
            sources[p].append(cache)
    todo = [(p, r) for p in PROMPTS for r in range(REQS)]
    wins: Dict[Tuple[int, int], List[Tuple[Cache, int]]] = {key: [] for key in todo}
    codes: Set[Optional[LLMStatusCode]] = set()
    lock = threading.Lock()

    def puller(dd: LLMDataDist, seed: int) -> Callable[[], None]:
        def run() -> None:
            dst = dd.cache_manager.allocate_cache(_desc(len(todo)))
            order = list(enumerate(todo))
            random.Random(seed).shuffle(order)
            for index, (p, r) in order:
                try:
                    dd.cache_manager.pull_cache(CacheKey(p, r), dst, index)
                    code: Optional[LLMStatusCode] = None
                except LLMException as exc:
                    code = exc.status_code
                with lock:
                    codes.add(code)
                    if code is None:
                        wins[(p, r)].append((dst, index))
                STATS["thread pulls"] += 1

        return run

    def churner(dd: LLMDataDist, seed: int) -> Callable[[], None]:
        def run() -> None:
            rng = random.Random(seed)
            held: List[Cache] = []
            for _ in range(150):
                if held and rng.random() < 0.5:
                    dd.cache_manager.deallocate_cache(held.pop(rng.randrange(len(held))))
                else:
                    held.append(dd.cache_manager.allocate_cache(_desc(rng.randint(1, 8))))
                STATS["thread allocations/frees"] += 1
            for cache in held:
                dd.cache_manager.deallocate_cache(cache)

        return run

    workers = [puller(dd, 2 * d + i) for d, dd in decoders.items() for i in range(2)]
    workers += [churner(dd, 7 * p + i) for p, dd in prompts.items() for i in range(2)]
    errors = _run(workers)
    assert not errors, errors[:3]
    assert codes <= {None, S.LLM_KV_CACHE_NOT_EXIST}
    for (p, r), got in wins.items():
        assert len(got) == 1, f"key ({p}, {r}) delivered {len(got)} times"
        dst, index = got[0]
        views = tensor_views(world.memory, dst.tensor_addrs, (dst.cache_desc.batch_size, ROW), np.uint8)
        for t in range(2):
            assert np.array_equal(views[t][index], _pattern(p, r)[t])
    for p in PROMPTS:
        assert not world.caches[p].key_table, "every pulled key is consumed"
    check_books(world)
    for p, dd in prompts.items():
        for cache in sources[p]:
            dd.cache_manager.deallocate_cache(cache)
        pool = world.caches[p].device_pool
        assert pool is not None
        assert pool.used == 0, "consumed and deallocated: the Prompt pool is empty again"
    check_books(world)


_ALLOWED = {
    "allocate_cache": {S.LLM_PARAM_INVALID, S.LLM_OUT_OF_MEMORY},
    "deallocate_cache": set(),
    "remove_cache_key": set(),
    "pull_cache": {S.LLM_KV_CACHE_NOT_EXIST, S.LLM_NOT_YET_LINK, S.LLM_REPEAT_REQUEST},
    "unlink_clusters": {S.LLM_LINK_BUSY},
    "link_clusters": {S.LLM_ALREADY_LINK},
}
"""What each call may answer under concurrency: a key another thread bound (allocate) or consumed (pull), a
link another thread just unlinked, the same pull in flight from another thread, an unlink during a pull."""


def test_random_calls_from_many_threads_keep_the_books(world: SimWorld) -> None:
    """Threads call allocate / deallocate / remove_cache_key / pull / unlink / link at random on shared
    instances (two per Decoder, sharing its destination cache); every failure is an LLMException with a
    code documented for that call, and the books balance afterwards."""
    prompts = {p: _dd(LLMRole.PROMPT, p) for p in PROMPTS}
    decoders = {d: _dd(LLMRole.DECODER, d) for d in DECODERS}
    for dd in decoders.values():
        dd.link_clusters([link_info(p) for p in PROMPTS])
    dsts = {d: dd.cache_manager.allocate_cache(_desc(4)) for d, dd in decoders.items()}
    seen: Dict[str, int] = {}
    lock = threading.Lock()

    def note(op: str, code: Optional[LLMStatusCode]) -> None:
        assert code is None or code in _ALLOWED[op], (op, code)
        with lock:
            name = f"{op} -> {code.name if code else 'LLM_SUCCESS'}"
            seen[name] = seen.get(name, 0) + 1
            STATS[f"threads: {name}"] += 1
            STATS["thread random calls"] += 1

    def attempt(op: str, fn: Callable[..., object], *args: object) -> object:
        try:
            result = fn(*args)
        except LLMException as exc:
            note(op, exc.status_code)
            return None
        note(op, None)
        return result

    def prompt_worker(p: int, seed: int) -> Callable[[], None]:
        def run() -> None:
            rng = random.Random(seed)
            cm = prompts[p].cache_manager
            held: List[Cache] = []
            for _ in range(OPS):
                roll = rng.random()
                if roll < 0.4:
                    keys = [CacheKey(p, rng.randrange(32)) for _ in range(rng.randint(0, 2))]
                    cache = attempt("allocate_cache", cm.allocate_cache, _desc(2), keys)
                    if isinstance(cache, Cache):
                        held.append(cache)
                elif roll < 0.7 and held:
                    attempt("deallocate_cache", cm.deallocate_cache, held.pop(rng.randrange(len(held))))
                else:
                    attempt("remove_cache_key", cm.remove_cache_key, CacheKey(p, rng.randrange(32)))

        return run

    def decoder_worker(d: int, seed: int) -> Callable[[], None]:
        def run() -> None:
            rng = random.Random(seed)
            dd = decoders[d]
            for _ in range(OPS):
                p = rng.choice(PROMPTS)
                roll = rng.random()
                if roll < 0.8:
                    key = CacheKey(p, rng.randrange(32))
                    attempt("pull_cache", dd.cache_manager.pull_cache, key, dsts[d], rng.randrange(4))
                else:
                    op = "unlink_clusters" if roll < 0.9 else "link_clusters"
                    ret, rets = getattr(dd, op)([link_info(p)])
                    assert rets == [ret]
                    note(op, None if ret is S.LLM_SUCCESS else ret)

        return run

    workers = [prompt_worker(p, 31 * p + i) for p in PROMPTS for i in range(2)]
    workers += [decoder_worker(d, 17 * d + i) for d in DECODERS for i in range(2)]
    errors = _run(workers)
    assert not errors, errors[:3]
    check_books(world)
    ends = set(world.links())
    assert ends == {(b, a) for a, b in ends}, "no half-open link without force unlink or finalize"
    assert seen.get("pull_cache -> LLM_SUCCESS", 0) > 0


class _Ready(LayerSynchronizer):
    """Every layer is computed already."""

    def synchronize_layer(self, layer_index: int, timeout_in_millis: Optional[int]) -> bool:
        return True


def test_pulls_and_async_transfers_share_links_without_mixing_bytes() -> None:
    """Decoders pull from a Prompt while the Prompt sends to them with ``transfer_cache_async`` over the
    same links, on the real clock so the two overlap. The documented conflict (§11) is ``LLM_LINK_BUSY``:
    a refused pull consumes nothing and succeeds on retry; a refused transfer stops at a layer boundary,
    so each layer it was sending holds either its old bytes or exactly the sent ones."""
    config = SimConfig(link_setup_s=0.001, bandwidth_bytes_per_s=4e6)
    world = SimWorld(seed=12, clock=RealClock(), config=config)
    two_layers = CacheDesc(4, [1, 16, 64], DataType.DT_FLOAT16)  # two layers of two 2 KiB tensors
    reqs = list(range(16))
    with activate(world):
        p = _dd(LLMRole.PROMPT, PROMPTS[0])
        ds = {d: _dd(LLMRole.DECODER, d) for d in DECODERS[:2]}
        for dd in ds.values():
            assert dd.link_clusters([link_info(PROMPTS[0])])[0] is S.LLM_SUCCESS
        for r in reqs:
            src = p.cache_manager.allocate_cache(two_layers, [CacheKey(PROMPTS[0], r)])
            p.cache_manager.deallocate_cache(src)  # lives as long as its key
            for t, view in enumerate(
                tensor_views(world.memory, src_addrs(world, PROMPTS[0], r), (ROW,), np.uint8)
            ):
                view[...] = _pattern(PROMPTS[0], r)[t % 2]
        sent = p.cache_manager.allocate_cache(two_layers)
        _set(world, sent.tensor_addrs, 0xAB)
        pull_desc = CacheDesc(4, [len(reqs), 16, 64], DataType.DT_FLOAT16)
        dsts = {d: dd.cache_manager.allocate_cache(pull_desc) for d, dd in ds.items()}
        attempts: List[Tuple[Cache, LLMStatusCode]] = []
        pulls_done = threading.Event()
        delivered: List[int] = []

        def puller(d: int) -> Callable[[], None]:
            def run() -> None:
                for r in reqs[d % 2 :: 2]:
                    code = _pull_until_not_busy(ds[d], CacheKey(PROMPTS[0], r), dsts[d], r)
                    delivered.append(code)

            return run

        def sender() -> None:
            extra = 2
            while extra:
                extra -= pulls_done.is_set()
                for d, dd in ds.items():
                    landing = dd.cache_manager.allocate_cache(two_layers)
                    _set(world, landing.tensor_addrs, 0)
                    task = p.cache_manager.transfer_cache_async(
                        sent, _Ready(), [TransferConfig(d, landing.tensor_addrs)]
                    )
                    attempts.append((landing, task.synchronize()))
                    STATS[f"threads: transfer_cache_async -> {attempts[-1][1].name}"] += 1

        pullers = [puller(d) for d in ds]

        def pull_all() -> None:
            errors = _run(pullers)
            pulls_done.set()
            assert not errors, errors[:3]

        errors = _run([pull_all, sender])
        assert not errors, errors[:3]
        assert sum(delivered) == len(reqs), "every key was delivered once"
        for d, dst in dsts.items():
            views = tensor_views(world.memory, dst.tensor_addrs, (len(reqs), ROW), np.uint8)
            for r in reqs[d % 2 :: 2]:
                for t in range(4):
                    assert np.array_equal(views[t][r], _pattern(PROMPTS[0], r)[t % 2])
        assert not world.caches[PROMPTS[0]].key_table, "every key consumed exactly once"
        for landing, code in attempts:
            assert code in (S.LLM_SUCCESS, S.LLM_LINK_BUSY), code
            views = tensor_views(world.memory, landing.tensor_addrs, (ROW,), np.uint8)
            layers = [_layer_state(views[2 * i : 2 * i + 2]) for i in (0, 1)]
            assert "mixed" not in layers, layers
            if code is S.LLM_SUCCESS:
                assert layers == ["sent", "sent"]
            else:
                assert layers in (["old", "old"], ["sent", "old"]), "a refused transfer stops at a layer"
        assert any(code is S.LLM_SUCCESS for _, code in attempts)
        check_books(world)
        finalize_all(world)
    assert world.memory.backed_bytes == 0


def src_addrs(world: SimWorld, cluster: int, req: int) -> List[int]:
    """The tensor addresses of the cache ``req``'s key names on ``cluster`` (its handle was dropped)."""
    store = world.caches[cluster]
    cache_id, _ = store.key_table[("req", req, 0)]
    return list(store.caches[cache_id].addrs)


def _set(world: SimWorld, addrs: List[int], value: int) -> None:
    for view in tensor_views(world.memory, addrs, (ROW,), np.uint8):
        view[...] = value


def _layer_state(views: List[np.ndarray]) -> str:
    if all((v == 0).all() for v in views):
        return "old"
    if all((v == 0xAB).all() for v in views):
        return "sent"
    return "mixed"


def _pull_until_not_busy(dd: LLMDataDist, key: CacheKey, dst: Cache, index: int) -> int:
    """Pull, retrying while the link is busy with a transfer; 1 once it succeeded."""
    while True:
        try:
            dd.cache_manager.pull_cache(key, dst, index)
        except LLMException as exc:
            if exc.status_code is not S.LLM_LINK_BUSY:
                raise
            STATS["threads: pull_cache -> LLM_LINK_BUSY"] += 1
            continue
        STATS["threads: pull_cache -> LLM_SUCCESS"] += 1
        return 1
