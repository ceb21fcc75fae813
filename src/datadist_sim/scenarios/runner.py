"""Run a scenario against the reference Prompt/Decode workload and report what happened.

The reference client is a careful one, written the way the docs and the status table advise: it
re-establishes a link after a timeout or a lost link, retries what the table marks retryable with a
backoff on the simulated clock, checks the bytes of every pull, and treats a key that vanished after a
timed-out pull as "maybe landed" (it checks the bytes). Everything runs in one world on the virtual
clock; the same seed gives the same trace, byte for byte.
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

import numpy as np

from datadist_sim._status import LLMStatusCode
from datadist_sim._status_table import status_info
from datadist_sim._status_v1 import LLM_ERRORS, as_code
from datadist_sim._views import tensor_views
from datadist_sim._world.surface import (
    SimConfig,
    SimWorld,
    TraceSummary,
    expand_trace_path,
    open_trace_sink,
    summarise,
)
from datadist_sim.faults.files import Scenario, Workload, load
from datadist_sim.faults.plan import only_masked, unfired_notes
from datadist_sim.llm_datadist.configs import LLMClusterInfo, LLMRole
from datadist_sim.llm_datadist.data_type import DataType
from datadist_sim.llm_datadist.v2.llm_datadist import LLMDataDist, finalize_all
from datadist_sim.llm_datadist.v2.llm_types import CacheDesc, CacheKey
from datadist_sim.scenarios.hixl_workload import HixlClient, prompt_ip

S = LLMStatusCode
PORT = 26000
DECODE_BASE = 100
_RELINK = {S.LLM_TIMEOUT, S.LLM_WAIT_PROCESS_TIMEOUT, S.LLM_NOT_YET_LINK}
_NEEDS_A_FIX = {
    S.LLM_PARAM_INVALID,
    S.LLM_KV_CACHE_NOT_EXIST,
    S.LLM_ALREADY_LINK,
    S.LLM_EXIST_LINK,
    S.LLM_FEATURE_NOT_ENABLED,
    S.LLM_CLUSTER_NUM_EXCEED_LIMIT,
}


def transient(code: LLMStatusCode) -> bool:
    """Worth the same call again after a pause: retryable in the status table, and not one whose
    remedy is to change the call (a bad parameter, a missing key, a link that already exists)."""
    return status_info(code).retryable == "yes" and code not in _NEEDS_A_FIX


@dataclass
class RunReport:
    """What one run did: requests delivered, codes seen per operation, faults fired, times."""

    scenario: str
    seed: int
    requests: int
    delivered: int
    lost: int
    bytes_checked: int
    maybe_landed: int
    faults_fired: int
    simulated_s: float
    wall_s: float
    summary: TraceSummary
    notes: List[str] = field(default_factory=list)
    never_fired: List[str] = field(default_factory=list)
    masked: List[str] = field(default_factory=list)
    """Rules that matched calls but whose effect another rule on the same call always overrode."""
    """The scenario's rules that did not fire once in this run (each as ``repr(rule)``)."""

    def codes(self) -> Dict[str, int]:
        return dict(self.summary.per_code)

    def as_dict(self) -> Dict[str, Any]:
        return {
            "scenario": self.scenario,
            "seed": self.seed,
            "requests": self.requests,
            "delivered": self.delivered,
            "lost": self.lost,
            "bytes_checked": self.bytes_checked,
            "maybe_landed": self.maybe_landed,
            "faults_fired": self.faults_fired,
            "simulated_s": round(self.simulated_s, 6),
            "wall_s": round(self.wall_s, 4),
            "codes": self.summary.per_code,
            "per_op": self.summary.per_op,
            "notes": self.notes,
            "never_fired": self.never_fired,
            "masked": self.masked,
        }

    def render(self) -> str:
        head = (
            f"scenario {self.scenario} (seed {self.seed}): {self.delivered}/{self.requests} requests "
            f"delivered with bytes checked, {self.lost} lost, {self.maybe_landed} recovered after an "
            f"indeterminate timeout; {self.faults_fired} fault(s) fired; simulated {self.simulated_s:.3f} s "
            f"in {self.wall_s:.3f} s of wall time"
        )
        unfired = [f"rule never fired: {rule}" for rule in self.never_fired]
        unfired += [f"rule masked (matched, but another rule on the same call won): {r}" for r in self.masked]
        return "\n".join([head, "", "codes seen per operation:", self.summary.table(), *self.notes, *unfired])


class _Client:
    """The reference client over P Prompt and D Decode clusters of one mode."""

    def __init__(self, world: SimWorld, workload: Workload) -> None:
        self.world = world
        self.w = workload
        self.v2 = workload.mode == "v2"
        self.prompts: Dict[int, LLMDataDist] = {}
        self.decodes: Dict[int, LLMDataDist] = {}
        self.rng = np.random.default_rng(world.seed)
        self.notes: List[str] = []

    # -- set-up -----------------------------------------------------------------------------------

    def _options(self, listen: str) -> Dict[str, str]:
        opts = {"ge.exec.deviceId": "0", "llm.SyncKvCacheWaitTime": str(self.w.sync_kv_timeout_ms)}
        pool = self.w.pool_mib << 20
        if self.v2:
            opts["llm.EnableCacheManager"] = "1"
            opts["llm.MemPoolConfig"] = json.dumps({"memory_size": pool})
        else:
            opts["ge.flowGraphMemMaxSize"] = str(pool)
        if listen:
            opts["llm.listenIpInfo"] = listen
        return opts

    def start(self) -> None:
        for i in range(1, self.w.prompts + 1):
            dd = LLMDataDist(LLMRole.PROMPT, i)
            dd.init(self._options(f"{prompt_ip(i)}:{PORT}"))
            self.prompts[i] = dd
        for j in range(1, self.w.decodes + 1):
            dd = LLMDataDist(LLMRole.DECODER, DECODE_BASE + j)
            dd.init(self._options(""))
            self.decodes[DECODE_BASE + j] = dd

    def info(self, prompt_id: int, decode_id: int) -> LLMClusterInfo:
        info = LLMClusterInfo()
        info.remote_cluster_id = prompt_id
        info.append_local_ip_info(f"192.168.{decode_id % 250}.1", 0)
        info.append_remote_ip_info(prompt_ip(prompt_id), PORT)
        return info

    def link_all(self) -> None:
        """Each Decode links every Prompt, ``link_batch`` per call; a refused batch is split to 16."""
        for decode_id, decode in self.decodes.items():
            infos = [self.info(p, decode_id) for p in self.prompts]
            batch = self.w.link_batch
            while infos:
                chunk, rest = infos[:batch], infos[batch:]
                ret, _ = decode.link_clusters(chunk, timeout=5000)
                if ret is S.LLM_CLUSTER_NUM_EXCEED_LIMIT and batch > 16:
                    self.notes.append(
                        f"cluster {decode_id}: {len(chunk)} clusters per call refused, using 16"
                    )
                    batch = 16
                    continue
                infos = rest

    def relink(self, decode_id: int, prompt_id: int) -> bool:
        decode = self.decodes[decode_id]
        info = self.info(prompt_id, decode_id)
        decode.unlink_clusters([info], timeout=1000, force=True)
        for attempt in range(self.w.tries):
            ret, rets = decode.link_clusters([info], timeout=2000)
            if ret is S.LLM_SUCCESS or (rets and rets[0] is S.LLM_ALREADY_LINK):
                return True
            self.world.clock.sleep(self.w.backoff_s * 2**attempt)
        return False

    # -- one request --------------------------------------------------------------------------------

    def _desc(self) -> CacheDesc:
        return CacheDesc(2, [1, 4, 256], DataType.DT_FLOAT16)

    def _manager(self, dd: LLMDataDist) -> Any:
        return dd.cache_manager if self.v2 else dd.kv_cache_manager

    def _allocate_source(self, prompt_id: int, req_id: int) -> Optional[Any]:
        manager = self._manager(self.prompts[prompt_id])
        key = CacheKey(prompt_cluster_id=prompt_id, req_id=req_id, model_id=0)
        for attempt in range(self.w.tries):
            try:
                cache = manager.allocate_cache(self._desc(), [key])
            except LLM_ERRORS as exc:
                if not transient(as_code(exc.status_code)):
                    return None
                self.world.clock.sleep(self.w.backoff_s * 2**attempt)
                continue
            if self.w.duplicate_keys:
                with contextlib.suppress(*LLM_ERRORS):
                    manager.allocate_cache(self._desc(), [key])
            for view in tensor_views(cache):
                view[...] = self.rng.standard_normal(view.shape).astype(view.dtype)
            return cache
        return None

    def request(self, req_id: int) -> Tuple[bool, bool]:
        """Serve one request; returns (delivered, recovered after an indeterminate timeout)."""
        prompt_id = list(self.prompts)[req_id % len(self.prompts)]
        decode_id = list(self.decodes)[req_id % len(self.decodes)]
        src = self._allocate_source(prompt_id, req_id)
        if src is None:
            return False, False
        manager = self._manager(self.decodes[decode_id])
        try:
            dst = manager.allocate_cache(self._desc())
        except LLM_ERRORS:
            self._release(prompt_id, src)
            return False, False
        key = CacheKey(prompt_cluster_id=prompt_id, req_id=req_id, model_id=0)
        delivered = recovered = False
        timed_out = False
        for attempt in range(self.w.tries):
            try:
                manager.pull_cache(key, dst, batch_index=0)
            except LLM_ERRORS as exc:
                code = as_code(exc.status_code)
                if code is S.LLM_KV_CACHE_NOT_EXIST and timed_out and self._same(src, dst):
                    delivered = recovered = True
                    break
                if code in _RELINK:
                    timed_out = timed_out or code is not S.LLM_NOT_YET_LINK
                    if not self.relink(decode_id, prompt_id):
                        break
                    continue
                if not transient(code):
                    break
                self.world.clock.sleep(self.w.backoff_s * 2**attempt)
                continue
            delivered = self._same(src, dst)
            if self.w.duplicate_keys:
                with contextlib.suppress(*LLM_ERRORS):
                    manager.pull_cache(key, dst, batch_index=0)
            break
        self._release(prompt_id, src)
        with contextlib.suppress(*LLM_ERRORS):
            manager.deallocate_cache(dst)
        return delivered, recovered

    def _same(self, src: Any, dst: Any) -> bool:
        try:
            return all(np.array_equal(a, b) for a, b in zip(tensor_views(src), tensor_views(dst)))
        except LLM_ERRORS:
            return False

    def _release(self, prompt_id: int, cache: Any) -> None:
        manager = self._manager(self.prompts[prompt_id])
        with contextlib.suppress(*LLM_ERRORS):
            manager.deallocate_cache(cache)

    # -- tail ---------------------------------------------------------------------------------------

    def switch_roles(self) -> None:
        """The first Prompt tries to become a Decoder with links live (refused), then after unlinking."""
        prompt_id = next(iter(self.prompts))
        prompt = self.prompts[prompt_id]
        try:
            prompt.switch_role(LLMRole.DECODER)
        except LLM_ERRORS as exc:
            self.notes.append(f"switch_role with live links: {as_code(exc.status_code).name}")
        for decode_id, decode in self.decodes.items():
            decode.unlink_clusters([self.info(prompt_id, decode_id)], timeout=1000)
        prompt.switch_role(LLMRole.DECODER)
        self.notes.append("switch_role after unlinking: LLM_SUCCESS")


def run(
    scenario: Union[str, Path, Scenario],
    *,
    seed: int = 0,
    rate: float = 1.0,
    trace_path: Optional[Union[str, Path]] = None,
    world: Optional[SimWorld] = None,
) -> RunReport:
    """Run ``scenario`` (a bundled name, a TOML path or a ``Scenario``) against the reference workload."""
    loaded = scenario if isinstance(scenario, Scenario) else load(scenario)
    wall = time.perf_counter()
    sink = open_trace_sink(trace_path) if trace_path is not None and world is None else None
    if world is None:
        world = SimWorld(seed=seed, config=SimConfig(pause_wall_limit_s=0.001), trace_sink=sink)
    hixl = loaded.workload.mode == "hixl"
    client = HixlClient(world, loaded.workload, PORT) if hixl else _Client(world, loaded.workload)
    delivered = recovered = checked = 0
    with world.activate():
        client.start()
        world.faults.load(loaded, rate=rate)
        client.link_all()
        for req_id in range(loaded.workload.requests):
            world.clock.sleep(loaded.workload.interval_s)
            ok, maybe = client.request(req_id)
            delivered += ok
            recovered += maybe
            checked += ok
        if loaded.workload.switch_role and isinstance(client, _Client):
            client.switch_roles()
        finalize_all(world)
        if isinstance(client, HixlClient):
            client.close()
    summary = summarise(world.trace)
    if sink is not None:
        sink.close()
    elif trace_path is not None:
        world.trace.to_jsonl(expand_trace_path(trace_path))
    return RunReport(
        scenario=loaded.name,
        seed=world.seed,
        requests=loaded.workload.requests,
        delivered=delivered,
        lost=loaded.workload.requests - delivered,
        bytes_checked=checked,
        maybe_landed=recovered,
        faults_fired=world.faults.fired_total,
        simulated_s=world.now(),
        wall_s=time.perf_counter() - wall,
        summary=summary,
        notes=client.notes,
        never_fired=unfired_notes(world.faults),
        masked=[repr(rule) for rule in only_masked(world.faults)],
    )


def trace_of(scenario: Union[str, Path, Scenario], seed: int) -> str:
    """The JSON-lines trace of one run, as text (for comparing runs)."""
    loaded = scenario if isinstance(scenario, Scenario) else load(scenario)
    world = SimWorld(seed=seed, config=SimConfig(pause_wall_limit_s=0.001), trace_size=1_000_000)
    run(loaded, world=world)
    return "".join(e.to_json() + "\n" for e in world.trace)


def self_check(scenario: Union[str, Path, Scenario], seed: int = 0) -> bool:
    """Run the scenario twice with one seed; True when the two traces are byte-identical."""
    return trace_of(scenario, seed) == trace_of(scenario, seed)
