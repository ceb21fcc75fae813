"""What the baseline run saw, and the fault schedules explore runs: systematic first, then swarm.

A schedule is a list of rule specs (the dicts of a scenario file's ``[[rules]]``), so it pickles to a
worker process or a Ray task, prints as TOML, and becomes ``Fault`` objects only inside the world that
runs it. Everything is drawn from ``random.Random`` seeded by the explore seed and the run index, so the
same ``--seed`` gives the same schedules on any engine and any number of workers.
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Sequence, Tuple, Union

from datadist_sim._world.surface import TraceEvent
from datadist_sim.faults import engine_codes
from datadist_sim.faults.actions import (
    ACTION_TABLE,
    ACTIONS,
    CALL_ACTIONS,
    TRANSFER_OPS,
    WORLD_ACTIONS,
    applies_to,
)
from datadist_sim.faults.files import rule_from_spec

Spec = Dict[str, object]
Schedule = List[Spec]

CALL_KINDS = CALL_ACTIONS
WORLD_KINDS = WORLD_ACTIONS
_REQ = re.compile(r"req_id=(\d+)")
_FORCED = re.compile(r"\bforce=True\b|, True$")
"""A traced call's arguments that pass ``force=True`` (by name, or as the last positional argument)."""
Where = Union[int, str]
"""A cluster id, or the name of a ``hixl`` engine (what a rule's ``cluster`` names)."""


def _order(where: Where) -> Tuple[bool, int, str]:
    """Cluster ids in number order, then engine names."""
    return (isinstance(where, str), where if isinstance(where, int) else 0, str(where))


def codes_for(
    op: str, mode: Optional[engine_codes.EngineMode] = None, force: bool = False
) -> Tuple[str, ...]:
    """The codes a correct client can meet from ``op`` in ``mode`` (in any mode when None; with
    ``force``, from its ``force=True`` form), from the engine's table (``faults.engine_codes``); the first
    is the one the systematic pass injects."""
    return engine_codes.fault_labels(op, None if mode is None else (mode,), force)


def can_time_out(op: str, mode: Optional[engine_codes.EngineMode] = None, force: bool = False) -> bool:
    """Whether ``op`` (with ``force``, its ``force=True`` form) has a timeout to run out in ``mode`` (in
    some mode when None)."""
    return engine_codes.can_time_out(op, None if mode is None else (mode,), force)


@dataclass(frozen=True)
class CallSite:
    """One call the baseline made: the ``nth`` call of ``op`` on ``cluster`` (counted from 1)."""

    op: str
    cluster: Optional[Where]
    nth: int
    req_id: Optional[int] = None
    time: float = field(default=0.0, compare=False)
    """Simulated time the call returned at in the baseline."""
    force: bool = field(default=False, compare=False)
    """The call was the ``force=True`` form of an operation that has one (``engine_codes.FORCE_OPS``),
    whose codes may be fewer: its rules draw from that form's row."""


@dataclass
class Baseline:
    """What the fault-free run showed: its calls in order, the clusters, and the simulated time."""

    calls: List[CallSite] = field(default_factory=list)
    clusters: List[Where] = field(default_factory=list)
    sim_time: float = 0.0
    modes: Dict[Where, engine_codes.EngineMode] = field(default_factory=dict)
    """The engine mode of each cluster the baseline brought up (``engine_codes.trace_modes``)."""
    min_transfer_s: float = 0.0
    """The least simulated time a transfer lasts (its message round trip, ``SimConfig.message_rtt_s``;
    the bytes add to it): a transfer call that returned at ``t`` was running over ``(t - this, t)``."""

    @classmethod
    def from_trace(
        cls, events: Sequence[TraceEvent], sim_time: float, min_transfer_s: float = 0.0
    ) -> Baseline:
        counts: Dict[Tuple[str, Optional[Where]], int] = {}
        calls: List[CallSite] = []
        clusters: List[Where] = []
        for event in events:
            if event.cluster_id is not None and event.cluster_id not in clusters:
                clusters.append(event.cluster_id)
            if event.kind != "call":
                continue
            key = (event.op, event.cluster_id)
            counts[key] = counts.get(key, 0) + 1
            found = _REQ.search(event.args) if event.op in TRANSFER_OPS else None
            req = int(found.group(1)) if found else None
            force = event.op in engine_codes.FORCE_OPS and _FORCED.search(event.args) is not None
            calls.append(CallSite(event.op, event.cluster_id, counts[key], req, event.time, force))
        return cls(
            calls, sorted(clusters, key=_order), sim_time, engine_codes.trace_modes(events), min_transfer_s
        )

    def mode_of(self, cluster: Optional[Where]) -> Optional[engine_codes.EngineMode]:
        """The mode of ``cluster`` in the baseline, or None when it did not show."""
        return None if cluster is None else self.modes.get(cluster)

    @property
    def ops(self) -> List[str]:
        return sorted({c.op for c in self.calls})

    def others(self, cluster: Optional[Where]) -> List[Where]:
        return [c for c in self.clusters if c != cluster] or list(self.clusters)


def run_seed(seed: int, index: int) -> int:
    """The world seed of run ``index`` of an exploration seeded ``seed`` (stable across Pythons)."""
    digest = hashlib.sha256(f"datadist-sim explore {seed} {index}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


def parse_kinds(text: Optional[str]) -> Tuple[str, ...]:
    """``fail,timeout`` -> the kinds in canonical order; ValueError naming an unknown one."""
    if not text:
        return ACTIONS
    wanted = [k.strip() for k in text.split(",") if k.strip()]
    unknown = [k for k in wanted if k not in ACTIONS]
    if unknown or not wanted:
        raise ValueError(f"unknown fault kind(s) {unknown}; kinds: {', '.join(ACTIONS)}")
    return tuple(k for k in ACTIONS if k in wanted)


# -- the systematic pass --------------------------------------------------------------------------


def at_call(kind: str, site: CallSite, baseline: Baseline) -> Iterator[Spec]:
    """Rules of ``kind`` that fire at ``site`` only (a world kind hits each other cluster in turn)."""
    where: Spec = {"op": site.op, "nth": site.nth}
    if site.cluster is not None:
        where["cluster"] = site.cluster
    mode = baseline.mode_of(site.cluster)
    if kind == "fail":
        codes = codes_for(site.op, mode, site.force)
        if codes:
            yield {"action": "fail", "code": codes[0], **where}
    elif kind == "delay":
        yield {"action": "delay", "seconds": 5.0, **where}
    elif kind == "timeout":
        if can_time_out(site.op, mode, site.force):
            yield {"action": "timeout", "landed": False, **where}
    elif kind in CALL_KINDS:  # cut_link, poison: inside transfers only
        if applies_to(kind, site.op):
            yield {"action": kind, **where}
    elif ACTION_TABLE[kind].hits == "pool":
        if site.cluster is not None:
            sizes = ACTION_TABLE[kind].sizes
            extra: Spec = {"nbytes": sizes[0]} if sizes else {}
            yield {"action": kind, **extra, **where}
    elif ACTION_TABLE[kind].world:
        # A world rule's cluster is the one it hits; it counts the op's calls on every cluster.
        nth = _global_nth(site, baseline)
        for other in baseline.others(site.cluster):
            rule: Spec = {"action": kind, "op": site.op, "nth": nth, "cluster": other}
            if ACTION_TABLE[kind].hits == "pair":
                if site.cluster is None or site.cluster == other:
                    continue
                rule = {**rule, "cluster": site.cluster, "remote": other}
            if ACTION_TABLE[kind].heals:
                rule["heal_after_s"] = 30.0
            yield rule


def _global_nth(site: CallSite, baseline: Baseline) -> int:
    """Which call of ``site.op`` on any cluster ``site`` is (a retry not in the baseline: the next)."""
    if site in baseline.calls:
        return sum(1 for c in baseline.calls[: baseline.calls.index(site) + 1] if c.op == site.op)
    before = CallSite(site.op, site.cluster, site.nth - 1, site.req_id)
    return _global_nth(before, baseline) + 1 if before in baseline.calls else site.nth


def mid_transfer(site: CallSite, baseline: Baseline) -> Iterator[Spec]:
    """Each peer of ``site`` killed while its transfer runs: a timed kill half a round trip before the
    call returned, which is after the transfer began (every transfer lasts at least one round trip) and
    before it completed, wherever the bytes make it end. The world stops the transfer there and it times
    out with nothing written. A call that returns before its transfer ends (``transfer_cache_async``)
    gives no such moment."""
    margin = baseline.min_transfer_s / 2
    if margin <= 0 or site.op not in _SYNC_TRANSFERS or site.cluster is None:
        return
    for other in baseline.others(site.cluster):
        if other != site.cluster:
            yield {"action": "kill", "cluster": other, "start_s": site.time - margin}


_SYNC_TRANSFERS = TRANSFER_OPS - {"transfer_cache_async"}


def ambiguous(baseline: Baseline, kinds: Sequence[str]) -> Iterator[Spec]:
    """The outcomes real connectors most often get wrong, at each transfer call of the baseline: a
    timeout whose bytes landed (the key consumed: a retry gets ``LLM_KV_CACHE_NOT_EXIST``) and one whose
    bytes did not, the peer killed at that call (its rule fires as the transfer starts, before a byte
    moves) and killed while the transfer runs (``mid_transfer``); then the link broken between two
    transfers of one request (the second finds no link)."""
    transfers = [site for site in baseline.calls if site.op in TRANSFER_OPS]
    for site in transfers:
        where: Spec = {"op": site.op, "nth": site.nth}
        if site.cluster is not None:
            where["cluster"] = site.cluster
        if "timeout" in kinds and can_time_out(site.op, baseline.mode_of(site.cluster)):
            yield {"action": "timeout", "landed": True, **where}
            yield {"action": "timeout", "landed": False, **where}
        if "kill" in kinds:
            yield from at_call("kill", site, baseline)
            yield from mid_transfer(site, baseline)
    if "cut_link" not in kinds:
        return
    for before, after in zip(transfers, transfers[1:]):
        if before.req_id is None or before.req_id != after.req_id or before.cluster is None:
            continue
        for other in baseline.others(before.cluster):
            if other != before.cluster:
                yield {
                    "action": "cut_link",
                    "cluster": before.cluster,
                    "remote": other,
                    "start_s": before.time,
                }


def systematic(baseline: Baseline, kinds: Sequence[str]) -> Iterator[Schedule]:
    """The ambiguous outcomes first (``ambiguous``); then each kind at each call, one at a time; then
    pairs on one request: a fault at a call and a second one at the next call of the same operation on
    the same cluster (the client's retry)."""
    tried: List[Spec] = []
    for rule in ambiguous(baseline, kinds):
        tried.append(rule)
        yield [rule]
    singles: List[Tuple[CallSite, Spec]] = []
    for site in baseline.calls:
        for kind in kinds:
            for rule in at_call(kind, site, baseline):
                singles.append((site, rule))
                if rule not in tried:
                    yield [rule]
    for site, first in singles:
        if first["action"] not in CALL_ACTIONS:
            continue
        retry = CallSite(site.op, site.cluster, site.nth + 1, site.req_id)
        for kind in kinds:
            for second in at_call(kind, retry, baseline):
                yield [first, second]


# -- swarm runs -----------------------------------------------------------------------------------


def swarm(rng: random.Random, baseline: Baseline, kinds: Sequence[str], max_rules: int) -> Schedule:
    """A random schedule: a random subset of the kinds, 1..max_rules rules of them at high rates on the
    operations, clusters and time the baseline used (swarm testing: few kinds per run, each often)."""
    enabled = [k for k in kinds if rng.random() < 0.5] or [rng.choice(list(kinds))]
    return [_rule(rng, baseline, rng.choice(enabled)) for _ in range(rng.randint(1, max(1, max_rules)))]


def _rule(rng: random.Random, baseline: Baseline, kind: str) -> Spec:
    horizon = max(2.0 * baseline.sim_time, 0.01)
    sites = baseline.calls or [CallSite("pull_cache", None, 1)]
    sites = [s for s in sites if _usable(kind, s, baseline)] or sites
    site = rng.choice(sites)
    spec: Spec = {"action": kind}
    if kind in WORLD_ACTIONS or (kind == "cut_link" and rng.random() < 0.3):
        spec.update(_world_target(rng, baseline, kind, site))
        if rng.random() < 0.5 or kind == "cut_link":
            spec["start_s"] = round(rng.uniform(0.0, horizon), 6)
        else:
            spec.update(op=site.op, **_trigger(rng, site, baseline))
        if ACTION_TABLE[kind].heals and rng.random() < 0.7:
            spec["heal_after_s"] = round(rng.uniform(0.001, 10.0 * horizon + 1.0), 6)
        return spec
    spec["op"] = site.op
    if site.cluster is not None and rng.random() < 0.7:
        spec["cluster"] = site.cluster
    if kind == "fail":
        codes = codes_for(site.op, baseline.mode_of(site.cluster), site.force)
        if not codes:  # the operation gives no code a fault could: slow it instead
            return _rule(rng, baseline, "delay")
        spec["code"] = rng.choice(codes)
    elif kind == "delay":
        spec["seconds"] = round(10 ** rng.uniform(-3, 1.3), 6)  # 1 ms to ~20 s: past most timeouts
    elif kind == "timeout":
        spec["landed"] = rng.choice([False, True, None])
    elif kind == "poison":
        spec["side"] = rng.choice(["remote", "local"])
    spec.update(_trigger(rng, site, baseline))
    if rng.random() < 0.2:
        start = rng.uniform(0.0, horizon)
        spec["start_s"] = round(start, 6)
        spec["end_s"] = round(start + rng.uniform(0.0, horizon), 6)
    return spec


def _usable(kind: str, site: CallSite, baseline: Baseline) -> bool:
    """Whether a rule of ``kind`` at ``site`` can act as the engine would (``faults.engine_codes``)."""
    if kind == "fail":
        return bool(codes_for(site.op, baseline.mode_of(site.cluster), site.force))
    if kind == "timeout":
        return can_time_out(site.op, baseline.mode_of(site.cluster), site.force)
    return applies_to(kind, site.op)


def _trigger(rng: random.Random, site: CallSite, baseline: Baseline) -> Spec:
    count = max(1, sum(1 for c in baseline.calls if c.op == site.op and c.cluster == site.cluster))
    pick = rng.random()
    if pick < 0.35:
        return {"nth": rng.randint(1, count + 1)}
    if pick < 0.6:
        return {"first": rng.randint(1, 3)}
    if pick < 0.75:
        return {"after": rng.randint(1, count), "first": count + 3}
    return {"probability": round(rng.choice([0.1, 0.25, 0.5, 0.75, 1.0]), 2), "first": count + 3}


def _world_target(rng: random.Random, baseline: Baseline, kind: str, site: CallSite) -> Spec:
    clusters = baseline.clusters or [0]
    cluster = rng.choice(clusters)
    action = ACTION_TABLE[kind]
    if action.hits == "pair":
        others = baseline.others(cluster)
        return {"cluster": cluster, "remote": rng.choice(others)}
    if action.sizes:
        return {"cluster": cluster, "nbytes": rng.choice(action.sizes)}
    return {"cluster": cluster}


def valid(spec: Spec) -> bool:
    """Whether the fault plan accepts ``spec`` (an operation it does not know, for one, it refuses)."""
    try:
        rule_from_spec(spec)
    except (ValueError, TypeError):
        return False
    return True


def schedules(
    seed: int, baseline: Baseline, kinds: Sequence[str], runs: int, max_rules: int, systematic_first: bool
) -> List[Tuple[int, Schedule]]:
    """``runs`` (world seed, schedule) pairs in run order: the systematic ones first, then swarm.
    Rules the plan would refuse are left out (a traced call that is not a rule's operation)."""
    out: List[Tuple[int, Schedule]] = []
    if systematic_first:
        for schedule in systematic(baseline, kinds):
            if len(out) >= runs:
                break
            if all(valid(spec) for spec in schedule):
                out.append((run_seed(seed, len(out)), schedule))
    while len(out) < runs:
        index = len(out)
        rng = random.Random(f"datadist-sim explore {seed} {index}")
        drawn = [spec for spec in swarm(rng, baseline, kinds, max_rules) if valid(spec)]
        out.append((run_seed(seed, index), drawn))
    return out
