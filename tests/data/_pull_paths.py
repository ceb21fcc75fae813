"""A script of calls around a pull (``_pull_script``) run in a fresh world with the pull fast path on (as
shipped) or off (``pulls.fast_pull`` patched to decline, so every pull takes ``plan_pull`` through
``transfer.run_transfer``), and what a run leaves behind to compare: each step's outcome, the books, every
cache's bytes, the clock, the trace. ``test_pull_paths_agree`` makes the scripts and compares the runs.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, Dict, Iterator, List, NamedTuple, Optional, Tuple, Union

import numpy as np
import pytest
from tests.fabric.conftest import DECODE_IP, PROMPT_IP, info
from tests.fabric.test_comm_link import RANK_TABLE
from tests.reliability._common import snapshot

from datadist_sim._status_v1 import LLM_ERRORS
from datadist_sim._world import pulls
from datadist_sim._world.clock import VirtualClock
from datadist_sim._world.current import activate
from datadist_sim._world.world import SimConfig, SimWorld
from datadist_sim.llm_datadist.configs import LLMRole
from datadist_sim.llm_datadist.data_type import DataType
from datadist_sim.llm_datadist.status import LLMStatusCode
from datadist_sim.llm_datadist.v2.cache_manager import CacheManager
from datadist_sim.llm_datadist.v2.llm_datadist import finalize_all
from datadist_sim.llm_datadist.v2.llm_types import (
    BlocksCacheKey,
    CacheDesc,
    CacheKey,
    CacheKeyByIdAndIndex,
    RegisterMemStatus,
)
from datadist_sim.llm_datadist_v1 import kv_cache_manager

from ._pull_script import (
    HIDDEN,
    SLOW_BYTES_PER_S,
    Alloc,
    BlocksKey,
    Case,
    Dealloc,
    Key,
    Layers,
    Pull,
    PullBlocks,
    Register,
    RemoveKey,
    ReqKey,
    Setup,
    Step,
)
from .conftest import D_ID, P_ID, make, v1_options, v2_options

PORT = 26000


class Record(NamedTuple):
    """What one step left: its outcome, then the books (keys, caches, pools, links, clock) and bytes."""

    index: int
    step: Step
    outcome: Any
    books: Any
    bytes_: Dict[Tuple[int, int], bytes]


class Result(NamedTuple):
    records: List[Record]
    trace: List[Tuple[float, str]]
    fast: int
    """Pulls the fast path finished by itself (moved the bytes, or raised what the plan found)."""
    fast_done: int
    """Of those, the ones that moved the bytes (or failed on time): pulls the general path would have
    taken to ``transfer.run_transfer``."""
    general: int
    """Pulls that went through ``transfer.run_transfer``."""


class _OtherClock(VirtualClock):
    """The virtual clock under another type name (see ``Setup.other_clock``)."""


def buffers_for(case: Case) -> Dict[int, List[np.ndarray]]:
    """The numpy buffers each ``Register`` step registers, made once for both runs: a run's trace names
    the addresses it registered, so both runs must register the same ones."""
    out: Dict[int, List[np.ndarray]] = {}
    for i, step in enumerate(case.steps):
        if isinstance(step, Register):
            nbytes = max(step.batch * step.seq * HIDDEN * 2, 1)
            out[i] = [np.zeros(nbytes, np.uint8) for _ in range(step.tensors)]
    return out


@contextmanager
def paths(fast: bool, face_shortcut: bool = True) -> Iterator[Dict[str, int]]:
    """Count the pulls each path takes; with ``fast=False`` the fast path declines every pull, so
    ``pulls.pull`` goes on to its general path (``link_activity`` and ``run_transfer``, planned by
    ``plan_pull``).
    With ``face_shortcut=False`` each face's ``pull_cache`` runs its checks in the vendor's order on
    every call (``_check_pull_cache``) instead of first trying its plain happy-path comparison, which
    takes no key type then (``CacheManager._pull_key_types``, ``kv_cache_manager._PULL_KEY_TYPES``)."""
    counts = {"fast": 0, "fast_done": 0, "general": 0}
    real_fast, real_run = pulls.fast_pull, pulls.run_transfer

    def fast_pull(*args: Any) -> bool:
        if not fast:
            return False
        try:
            taken = real_fast(*args)
        except Exception:
            counts["fast"] += 1  # it planned the pull and found it failing
            raise
        counts["fast"] += taken
        counts["fast_done"] += taken
        return taken

    def run(*args: Any, **kwargs: Any) -> None:
        counts["general"] += 1
        real_run(*args, **kwargs)

    real_init = CacheManager.__init__

    def init(self: CacheManager, *args: Any) -> None:
        real_init(self, *args)
        self._pull_key_types = frozenset()

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(pulls, "fast_pull", fast_pull)
        mp.setattr(pulls, "run_transfer", run)
        if not face_shortcut:
            mp.setattr(CacheManager, "__init__", init)
            mp.setattr(kv_cache_manager, "_PULL_KEY_TYPES", frozenset())
        yield counts


def run(
    case: Case, buffers: Dict[int, List[np.ndarray]], *, fast: bool, face_shortcut: bool = True
) -> Result:
    """Run ``case`` in a fresh world (same seed every time) with the fast paths on or off (``paths``)."""
    setup = case.setup
    clock = _OtherClock() if setup.other_clock else VirtualClock()
    config = SimConfig(
        pause_wall_limit_s=0.05,
        legacy_codes=setup.legacy,
        metadata_only=setup.metadata_only,
        comm_timeout_keeps_link=setup.comm_keeps_link,
    )
    world = SimWorld(seed=11, clock=clock, config=config)
    for bufs in buffers.values():
        for b in bufs:
            b[...] = 0
    with paths(fast, face_shortcut) as counts, activate(world), thread_beside(setup.beside_thread):
        try:
            records = _Runner(world, setup, buffers).run(case.steps)
        finally:
            finalize_all(world)
    trace = [(e.time, str(e)) for e in world.trace]
    return Result(records, trace, counts["fast"], counts["fast_done"], counts["general"])


@contextmanager
def thread_beside(wanted: bool = True) -> Iterator[None]:
    """An idle thread alive meanwhile, if ``wanted`` (``Setup.beside_thread``)."""
    if not wanted:
        yield
        return
    done = threading.Event()
    idle = threading.Thread(target=done.wait, name="idle-beside-the-script")
    idle.start()
    try:
        yield
    finally:
        done.set()
        idle.join()


class _Runner:
    def __init__(self, world: SimWorld, setup: Setup, buffers: Dict[int, List[np.ndarray]]) -> None:
        self.world, self.setup, self.buffers = world, setup, buffers
        self.extra: Dict[str, str] = {}
        if setup.hixl:
            self.extra["llm.TransferBackend"] = "hixl"
        if setup.sync_ms is not None:
            self.extra["llm.SyncKvCacheWaitTime"] = setup.sync_ms
        build = v2_options if setup.v2 else v1_options
        self.p = make(LLMRole.PROMPT, P_ID, build(f"{PROMPT_IP}:{PORT}", **self.extra))
        # the hixl backend wants every instance listening (``LLMDataDist.init``)
        self.d = make(
            LLMRole.DECODER, D_ID, build(f"{DECODE_IP}:{PORT + 1}" if setup.hixl else "", **self.extra)
        )
        if setup.linked and setup.comm:
            self.comm_link()
        elif setup.linked:
            assert self.act("link")[0] is LLMStatusCode.LLM_SUCCESS
        if setup.bandwidth is not None:
            world.set_link_bandwidth(D_ID, P_ID, setup.bandwidth)
        self.handles: Dict[int, List[Any]] = {P_ID: [], D_ID: []}
        """Handles by side: ``P_ID`` the side pulled from, ``D_ID`` the side that pulls."""
        self.real = {P_ID: D_ID, D_ID: P_ID} if setup.reverse else {P_ID: P_ID, D_ID: D_ID}
        """The cluster that plays each side (see ``Setup.reverse``)."""
        self.blocks: Dict[int, bool] = {}
        """Whether each handle (by ``id``) is a blocks cache."""

    def comm_link(self) -> None:
        """Both ends join one rank-table comm; poll until it is OK (time passes as the comm sets up)."""
        ranks = {P_ID: 0, D_ID: 1}
        self.p.link("pull", ranks, RANK_TABLE)
        comm_id = self.d.link("pull", ranks, RANK_TABLE)
        for _ in range(100):
            if self.d.query_register_mem_status(comm_id) is not RegisterMemStatus.PREPARING:
                break
        assert self.d.query_register_mem_status(comm_id) is RegisterMemStatus.OK

    def manager(self, side: int) -> Any:
        dd = self.p if self.real[side] == P_ID else self.d
        return dd.cache_manager if self.setup.v2 else dd.kv_cache_manager

    def run(self, steps: Tuple[Step, ...]) -> List[Record]:
        records = []
        for i, step in enumerate(steps):
            before = self.bytes_()
            try:
                outcome: Any = ("ok", self.do(i, step))
            except LLM_ERRORS as exc:
                code = exc.status_code
                outcome = (type(exc).__module__, type(exc).__name__, code.name, repr(code), str(exc))
            except (TypeError, ValueError, RuntimeError) as exc:  # the real API raises these too
                outcome = (type(exc).__module__, type(exc).__name__, "", "", str(exc))
            after = self.bytes_()
            if isinstance(step, (Pull, PullBlocks)):
                _check_pull_changed_only_its_destination(step, outcome, before, after, self.real[D_ID])
            records.append(Record(i, step, outcome, self.books(), after))
        return records

    # -- steps -----------------------------------------------------------------------------------

    def do(self, i: int, step: Step) -> Any:
        if isinstance(step, Alloc):
            return self.alloc(i, step)
        if isinstance(step, Register):
            return self.register(i, step)
        if isinstance(step, Dealloc):
            handles = self.handles[step.side]
            if not handles:
                return "skipped"
            cache = handles[step.cache % len(handles)]
            cm = self.manager(step.side)
            if self.setup.v2 and cache.is_blocks_cache:
                return cm.deallocate_blocks_cache(cache)
            return cm.deallocate_cache(cache)
        if isinstance(step, RemoveKey):
            return self.manager(P_ID).remove_cache_key(self.key(step.key))
        if isinstance(step, Pull):
            dst = self.dst(step.dst, blocks=False)
            if dst is None:
                return "skipped"
            kwargs = self.kwargs(step.layers)
            return self.manager(D_ID).pull_cache(
                self.key(step.key), dst, step.batch_index, step.size, **kwargs
            )
        if isinstance(step, PullBlocks):
            dst = self.dst(step.dst, blocks=True)
            if dst is None:
                return "skipped"
            kwargs = self.kwargs(step.layers)
            key, src, dsts = self.key(step.key), list(step.src_blocks), list(step.dst_blocks)
            return self.manager(D_ID).pull_blocks(key, dst, src, dsts, **kwargs)
        return self.act(step.what)

    def alloc(self, i: int, step: Alloc) -> Any:
        desc = CacheDesc(step.tensors, [step.batch, step.seq, HIDDEN], DataType.DT_FLOAT16)
        cm = self.manager(step.side)
        if step.blocks:
            first = step.keys[0] if step.keys else None
            key = BlocksCacheKey(first.cluster, first.model) if isinstance(first, BlocksKey) else None
            cache = cm.allocate_blocks_cache(desc, key)
        else:
            cache = cm.allocate_cache(desc, [self.key(k) for k in step.keys if isinstance(k, ReqKey)])
        self.added(i, step.side, cache, step.blocks)
        return cache.cache_id

    def register(self, i: int, step: Register) -> Any:
        if not self.setup.v2:  # a KvCacheManager registers nothing: the nearest is an allocation
            return self.alloc(i, Alloc(step.side, False, step.batch, step.tensors, step.seq, step.keys))
        desc = CacheDesc(step.tensors, [step.batch, step.seq, HIDDEN], DataType.DT_FLOAT16)
        addrs = [int(b.ctypes.data) for b in self.buffers[i]]
        keys = [self.key(k) for k in step.keys]
        cache = self.manager(step.side).register_cache(desc, addrs, keys)
        self.added(i, step.side, cache, False)
        return cache.cache_id

    def added(self, i: int, side: int, cache: Any, blocks: bool) -> None:
        """Keep the new cache's handle and fill its bytes (a different pattern per step)."""
        self.handles[side].append(cache)
        self.blocks[id(cache)] = blocks
        entry = self.world.caches[self.real[side]].caches[cache.cache_id]
        if self.world.config.metadata_only or entry.tensor_size == 0:
            return
        rng = np.random.default_rng(i)
        for addr in entry.addrs:
            view = self.world.memory.view(addr, entry.tensor_size)
            view[...] = rng.integers(0, 256, entry.tensor_size, dtype=np.uint8)

    def act(self, what: str) -> Any:
        world, extra = self.world, self.extra
        if what == "unlink":
            return self.d.unlink_clusters([info(P_ID, PORT)], 5000)
        if what == "link":
            return self.d.link_clusters([info(P_ID, PORT)], 5000)
        if what == "finalize_prompt":
            return self.p.finalize()
        if what == "restart_prompt":
            self.p.finalize()
            build = v2_options if self.setup.v2 else v1_options
            self.p = make(LLMRole.PROMPT, P_ID, build(f"{PROMPT_IP}:{PORT}", **extra))
            return "restarted"
        if what == "kill_prompt":
            return world.kill(P_ID)
        if what == "kill_decode":
            return world.kill(D_ID)
        if what == "slow_link":
            return world.set_link_bandwidth(D_ID, P_ID, SLOW_BYTES_PER_S)
        if what == "fast_link":
            return world.set_link_bandwidth(D_ID, P_ID, world.config.bandwidth_bytes_per_s)
        raise AssertionError(f"unknown act {what!r}")

    # -- arguments -------------------------------------------------------------------------------

    def key(self, key: Key) -> Any:
        cluster = self.real.get(key.cluster, key.cluster)
        if isinstance(key, ReqKey):
            return CacheKey(cluster, key.req, model_id=key.model, prefix_id=key.prefix)
        if isinstance(key, BlocksKey):
            return BlocksCacheKey(cluster, key.model)
        prompt = self.handles[P_ID]
        cache_id = 99 if key.cache < 0 or not prompt else prompt[key.cache % len(prompt)].cache_id
        return CacheKeyByIdAndIndex(cluster, cache_id, key.batch)

    def dst(self, index: int, *, blocks: bool) -> Any:
        handles = self.handles[D_ID]
        if index < 0:
            index = ~index
        else:
            handles = [h for h in handles if self.blocks[id(h)] == blocks] or handles
        return handles[index % len(handles)] if handles else None

    def kwargs(self, layers: Optional[Layers]) -> Dict[str, Any]:
        if layers is None:
            return {}
        out: Dict[str, Any] = {}
        if layers.src is not None:
            out["src_layer_range"] = range(*layers.src)
        if layers.dst is not None:
            out["dst_layer_range"] = range(*layers.dst)
        if layers.per_layer is not None:
            out["tensor_num_per_layer"] = layers.per_layer
        if not self.setup.v2:
            if layers.src_offset is not None:
                out["src_cache_offset"] = layers.src_offset
            if layers.dst_offset is not None:
                out["dst_cache_offset"] = layers.dst_offset
        return out

    # -- what a step leaves ----------------------------------------------------------------------

    def books(self) -> Any:
        """``snapshot`` (keys, caches, pools, links, clock) and what it leaves out that a pull may
        change: the consumed keys a store remembers (legacy codes), each cache's key per batch, each
        link end's state, the killed clusters, and the simulated time exactly."""
        world = self.world
        stores = tuple(
            (
                cid,
                tuple(store.completed),
                tuple((e.cache_id, tuple(sorted(e.req_at.items()))) for e in _entries(store)),
            )
            for cid, store in sorted(world.caches.items())
        )
        ends = tuple(
            (n.cluster_id, tuple(sorted((r, p.broken, p.peer_lost, p.since) for r, p in n.peers.items())))
            for n in sorted(world.nodes, key=lambda n: n.cluster_id)
        )
        return snapshot(world), stores, ends, tuple(sorted(world.killed)), repr(world.now())

    def bytes_(self) -> Dict[Tuple[int, int], bytes]:
        """Every live cache's bytes, tensor after tensor, by ``(cluster, cache id)``."""
        world = self.world
        if world.config.metadata_only:
            return {}
        out = {}
        for cid, store in sorted(world.caches.items()):
            for e in _entries(store):
                if e.tensor_size:
                    out[(cid, e.cache_id)] = b"".join(
                        world.memory.view(a, e.tensor_size).tobytes() for a in e.addrs
                    )
        return out


def _entries(store: Any) -> List[Any]:
    return sorted(store.caches.values(), key=lambda e: e.cache_id)


def _check_pull_changed_only_its_destination(
    step: Union[Pull, PullBlocks],
    outcome: Any,
    before: Dict[Tuple[int, int], bytes],
    after: Dict[Tuple[int, int], bytes],
    puller: int,
) -> None:
    """A pull writes only on the side that pulls, and a failed one writes nothing (on either path)."""
    for where, old in before.items():
        if where in after and (where[0] != puller or outcome[0] != "ok"):
            assert after[where] == old, f"{step} -> {outcome} changed the bytes of cache {where}"


def first_difference(a: Result, b: Result) -> Optional[str]:
    """Where the fast-path run ``a`` and the general-path run ``b`` first differ, or None."""
    for ra, rb in zip(a.records, b.records):
        for name in ("outcome", "books", "bytes_"):
            va, vb = getattr(ra, name), getattr(rb, name)
            if va != vb:
                return f"step {ra.index} {ra.step}: {name} differs\n  fast:    {va!r}\n  general: {vb!r}"
    if len(a.records) != len(b.records):
        return f"{len(a.records)} records (fast) vs {len(b.records)} (general)"
    for i, (ea, eb) in enumerate(zip(a.trace, b.trace)):
        if ea != eb:
            return f"trace event {i} differs\n  fast:    {ea!r}\n  general: {eb!r}"
    if len(a.trace) != len(b.trace):
        return f"trace of {len(a.trace)} events (fast) vs {len(b.trace)} (general)"
    return None


def agree(case: Case) -> Tuple[Result, Result]:
    """Run ``case`` as shipped, with the world's pull fast path off, and with the v2 face's happy-path
    shortcut off; fail naming the first difference of either from the first."""
    buffers = buffers_for(case)
    fast = run(case, buffers, fast=True)
    general = run(case, buffers, fast=False)
    difference = first_difference(fast, general)
    assert difference is None, f"world fast path on (fast) and off (general): {difference}"
    vendor_order = run(case, buffers, fast=True, face_shortcut=False)
    difference = first_difference(fast, vendor_order)
    assert difference is None, f"face shortcut on (fast) and off (general): {difference}"
    assert general.fast == 0
    assert general.general >= fast.fast_done, "a fast-path pull did not reach transfer.run_transfer"
    return fast, general
