"""The Prefill/Decode workload of the retry benchmark, driven event by event on simulated time.

N Prompt and M Decode clusters (KvCacheManager mode, the flow of the vendor's KvCacheManager samples); every
Decode links to every Prompt. Requests arrive as a Poisson process; each is prefilled on one Prompt (a cache
under a ``CacheKey``) and pulled by one Decode, whose retry policy decides what happens after each failed
attempt. Many clients interleave: each attempt is one event at its own simulated time, runs to its end
atomically (the ``EventClock`` moves to the event's time, the call advances it), and occupies its link until
then, since the engine serialises transfers per link. A retry that times out therefore delays every other
request on that link — which is how retry storms hurt."""

from __future__ import annotations

import contextlib
import heapq
import json
import random
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from datadist_sim._status import LLMStatusCode
from datadist_sim._status_v1 import LLM_ERRORS, as_code
from datadist_sim._world.surface import SimConfig, SimWorld, activate
from datadist_sim.llm_datadist import CacheDesc, CacheKey, DataType, LLMClusterInfo, LLMRole
from datadist_sim.llm_datadist.v2.llm_datadist import LLMDataDist, finalize_all
from datadist_sim.retry import RetryPolicy, Session

KIB = 1 << 10
LINK_TIMEOUT_MS = 5000


@dataclass
class Workload:
    """The shape of one run: clusters, requests, cache sizes, arrivals and timeouts."""

    mode: str = "v1"
    """``v1``: KvCacheManager mode; ``v2``: CacheManager mode (as a scenario's ``workload.mode`` says)."""
    prompts: int = 2
    decodes: int = 4
    requests: int = 500
    rate_per_s: float = 10.0
    """Mean arrivals per simulated second (Poisson), over all Decodes."""
    cache_kib: Tuple[int, ...] = (256, 1024, 4096)
    """Each request's KV cache size is one of these, drawn uniformly."""
    sync_kv_timeout_ms: int = 1000
    bandwidth_bytes_per_s: float = 1e9
    """Per-link bandwidth; slower than RoCE so that a 4 MiB pull takes a visible 4 ms."""
    seed: int = 0


@dataclass
class Request:
    """One request's life: arrival, the link it uses, every attempt's code, and how it ended."""

    rid: int
    arrival: float
    prompt: int
    decode: int
    nbytes: int
    codes: List[str] = field(default_factory=list)
    finished: Optional[float] = None
    ok: bool = False
    reason: str = ""
    failed_bytes: int = 0
    busy_s: float = 0.0
    """Link time this request's attempts and re-links occupied (its share of the total work)."""


class EventClock:
    """Simulated time for many interleaved clients: the driver moves it to each event's own time (it
    may step back between events); a call made inside the event advances it as usual."""

    def __init__(self) -> None:
        self._now = 0.0

    def now(self) -> float:
        return self._now

    def sleep(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"seconds must be >= 0, got {seconds}")
        self._now += seconds

    def advance_to(self, when: float) -> None:
        self._now = max(self._now, when)

    def set(self, when: float) -> None:
        self._now = when


PROMPT_BASE, DECODE_BASE = 1, 101
"""Cluster ids as the bundled scenarios name them: Prompt ``1..P``, Decode ``101..100+D``."""


def prompt_id(i: int) -> int:
    return PROMPT_BASE + i


def decode_id(j: int) -> int:
    return DECODE_BASE + j


def _endpoint(p: int) -> Tuple[str, int]:
    return (f"10.0.{p // 250}.{p % 250 + 1}", 26000)


def _info(p: int) -> LLMClusterInfo:
    info = LLMClusterInfo()
    info.remote_cluster_id = prompt_id(p)
    info.append_local_ip_info("10.1.0.1", 0)
    info.append_remote_ip_info(*_endpoint(p))
    return info


class Fabric:
    """The clusters of one run and the client actions on them (allocate, pull, re-link, release)."""

    def __init__(self, world: SimWorld, wl: Workload) -> None:
        self.world, self.wl = world, wl
        pool = max(wl.cache_kib) * KIB * 4 * 256
        self.prompts = [
            self._start(LLMRole.PROMPT, prompt_id(i), pool, _endpoint(i)) for i in range(wl.prompts)
        ]
        self.decodes = [self._start(LLMRole.DECODER, decode_id(j), pool, None) for j in range(wl.decodes)]
        for d in self.decodes:
            ret, rets = d.link_clusters([_info(i) for i in range(wl.prompts)], timeout=LINK_TIMEOUT_MS)
            if ret is not LLMStatusCode.LLM_SUCCESS:
                raise RuntimeError(f"initial link failed: {ret} {rets}")
        self._caches: Dict[int, Tuple[Any, Any, CacheKey]] = {}

    def _start(self, role: LLMRole, cid: int, pool: int, listen: Optional[Tuple[str, int]]) -> LLMDataDist:
        opts = {"ge.exec.deviceId": "0", "llm.SyncKvCacheWaitTime": str(self.wl.sync_kv_timeout_ms)}
        if self.wl.mode == "v2":
            opts["llm.EnableCacheManager"] = "1"
            opts["llm.MemPoolConfig"] = json.dumps({"memory_size": pool, "page_shift": 16})
        else:
            opts["ge.flowGraphMemMaxSize"] = str(pool)
        if listen is not None:
            opts["llm.listenIpInfo"] = f"{listen[0]}:{listen[1]}"
        dd = LLMDataDist(role, cid)
        dd.init(opts)
        return dd

    def _manager(self, dd: LLMDataDist) -> Any:
        return dd.cache_manager if self.wl.mode == "v2" else dd.kv_cache_manager

    def prefill(self, req: Request) -> Optional[LLMStatusCode]:
        """The Prompt side's cache under the request's key, and the Decode side's destination."""
        desc = CacheDesc(2, [1, req.nbytes // 4], DataType.DT_FLOAT16)
        key = CacheKey(prompt_cluster_id=prompt_id(req.prompt), req_id=req.rid, model_id=0)
        try:
            src = self._manager(self.prompts[req.prompt]).allocate_cache(desc, [key])
        except LLM_ERRORS as exc:
            return as_code(exc.status_code)
        try:
            dst = self._manager(self.decodes[req.decode]).allocate_cache(desc)
        except LLM_ERRORS as exc:
            self._manager(self.prompts[req.prompt]).deallocate_cache(src)
            return as_code(exc.status_code)
        self._caches[req.rid] = (src, dst, key)
        return None

    def pull(self, req: Request) -> Optional[LLMStatusCode]:
        _, dst, key = self._caches[req.rid]
        try:
            self._manager(self.decodes[req.decode]).pull_cache(key, dst, batch_index=0)
        except LLM_ERRORS as exc:
            return as_code(exc.status_code)
        return None

    def relink(self, req: Request) -> None:
        """The documented remedy: unlink (forced) and link again; the next pull tells how it went."""
        d, info = self.decodes[req.decode], _info(req.prompt)
        d.unlink_clusters([info], timeout=LINK_TIMEOUT_MS, force=True)
        d.link_clusters([info], timeout=LINK_TIMEOUT_MS)

    def release(self, req: Request) -> None:
        src, dst, key = self._caches.pop(req.rid)
        prompt, decode = self._manager(self.prompts[req.prompt]), self._manager(self.decodes[req.decode])
        steps: List[Callable[[], None]] = [
            lambda: prompt.remove_cache_key(key),
            lambda: prompt.deallocate_cache(src),
            lambda: decode.deallocate_cache(dst),
        ]
        for step in steps:
            with contextlib.suppress(*LLM_ERRORS):  # a killed cluster's memory is gone already
                step()


def make_requests(wl: Workload) -> List[Request]:
    rng = random.Random(f"workload:{wl.seed}")
    t, out = 1.0, []
    for rid in range(wl.requests):
        t += rng.expovariate(wl.rate_per_s)
        nbytes = rng.choice(wl.cache_kib) * KIB
        out.append(Request(rid, t, rng.randrange(wl.prompts), rng.randrange(wl.decodes), nbytes))
    return out


@dataclass
class _Live:
    req: Request
    session: Session
    prefilled: bool = False
    relink: bool = False


class Driver:
    """Runs the requests of a workload under one policy and fault rules, event by event."""

    def __init__(self, wl: Workload, policy: RetryPolicy, rules: Sequence[Any] = ()) -> None:
        self.wl, self.policy, self.rules = wl, policy, list(rules)
        self.clock = EventClock()
        self.fired: List[float] = []
        """Times of the attempts during which a fault rule fired (for the fault windows)."""
        config = SimConfig(
            metadata_only=True, pause_wall_limit_s=0.0, bandwidth_bytes_per_s=wl.bandwidth_bytes_per_s
        )
        self.world = SimWorld(seed=wl.seed, clock=self.clock, config=config, trace_size=1000)
        self._busy: Dict[Tuple[int, int], float] = {}
        self._queue: List[Tuple[float, int, int]] = []
        self._seq = 0

    def run(self) -> List[Request]:
        requests = make_requests(self.wl)
        with activate(self.world):
            fabric = Fabric(self.world, self.wl)
            if self.rules:
                self.world.faults.add(*self.rules)
            live: Dict[int, _Live] = {}
            for req in requests:
                self._push(req.arrival, req.rid)
            while self._queue:
                when, _, rid = heapq.heappop(self._queue)
                self._step(fabric, requests[rid], live, when)
            finalize_all(self.world)
        return requests

    def _push(self, when: float, rid: int) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (when, self._seq, rid))

    def _step(self, fabric: Fabric, req: Request, live: Dict[int, _Live], when: float) -> None:
        link = (req.decode, req.prompt)
        free = self._busy.get(link, 0.0)
        if free > when:  # the link is busy: wait in line (the engine's per-link mutex)
            self._push(free, req.rid)
            return
        self.clock.set(when)
        state = live.get(req.rid)
        if state is None:
            state = live[req.rid] = _Live(req, self.policy.start(when, "pull_cache"))
        before = self.world.faults.fired_total
        code = self._attempt(fabric, state)
        end = self.clock.now()
        if self.world.faults.fired_total != before:
            self.fired.append(when)
        self._busy[link] = end
        req.busy_s += end - when
        req.codes.append("LLM_SUCCESS" if code is None else code.name)
        decision = state.session.decide(code, end)
        if decision.retry:
            state.relink = decision.relink
            self._push(end + decision.wait_s, req.rid)
            return
        del live[req.rid]
        req.ok = code is None
        req.finished, req.reason = end, decision.reason
        if state.prefilled:
            fabric.release(req)

    def _attempt(self, fabric: Fabric, state: _Live) -> Optional[LLMStatusCode]:
        """Allocate (once it works), re-link if the policy said so, pull; the first failure's code."""
        req = state.req
        if not state.prefilled:
            code = fabric.prefill(req)
            if code is not None:
                return code
            state.prefilled = True
        if state.relink:
            fabric.relink(req)
        start = self.clock.now()
        code = fabric.pull(req)
        spent = self.clock.now() - start
        if code is not None and spent > self.world.config.message_rtt_s:
            req.failed_bytes += min(req.nbytes, int(spent * self.wl.bandwidth_bytes_per_s))
        return code
