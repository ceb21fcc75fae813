"""What one run of the retry benchmark measured, from its requests and fault windows."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from datadist_sim.bench.workload import Request
from datadist_sim.faults.retime import Window

MIB = 1 << 20
RECOVERED_SHARE = 0.99
"""Recovered: from some arrival time after the heal on, at least this share of requests succeed."""
MIN_EVIDENCE = 20


@dataclass
class RunMetrics:
    policy: str
    scenario: str
    rate: float
    requests: int
    success_rate: float
    goodput_mib_s: float
    """MiB delivered by successful pulls per simulated second of the run."""
    p50_s: Optional[float]
    p99_s: Optional[float]
    """Latency (arrival to delivery) of successful requests, simulated seconds."""
    attempts: int
    attempts_per_success: float
    link_busy_s: float
    """Total link time all attempts and re-links occupied: the work the fabric did."""
    failed_mib: float
    """Bytes failed attempts spent on the wire before they failed."""
    healed_at: Optional[float]
    recovered: Optional[bool]
    """``None`` when the fault never heals (a killed cluster)."""
    recover_s: Optional[float]
    windows: List[Window]

    def to_json(self) -> Dict[str, Any]:
        out = asdict(self)
        out["windows"] = [list(w) for w in self.windows]
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in out.items()}


def percentile(values: Sequence[float], q: float) -> Optional[float]:
    """Nearest-rank percentile; ``None`` for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100.0 * len(ordered)))
    return ordered[rank - 1]


def recovery(requests: Sequence[Request], healed_at: float) -> Tuple[bool, Optional[float]]:
    """The earliest arrival after the heal from which ``RECOVERED_SHARE`` of requests succeed, as
    seconds after the heal. The evidence must cover at least a quarter of the requests that arrived
    after the heal (and 20 of them), so a lucky last few do not count as recovery."""
    after = sorted((r for r in requests if r.arrival >= healed_at), key=lambda r: r.arrival)
    needed = max(MIN_EVIDENCE, len(after) // 4)
    ok_from_here = 0
    best: Optional[float] = None
    for total, r in enumerate(reversed(after), start=1):
        ok_from_here += r.ok
        if total >= needed and ok_from_here >= RECOVERED_SHARE * total:
            best = r.arrival
    if best is None:
        return False, None
    return True, best - healed_at


def measure(
    policy: str,
    scenario: str,
    rate: float,
    requests: Sequence[Request],
    windows: List[Window],
    permanent: bool,
) -> RunMetrics:
    ok = [r for r in requests if r.ok]
    attempts = sum(len(r.codes) for r in requests)
    start = min(r.arrival for r in requests)
    end = max(r.finished or r.arrival for r in requests)
    latencies = [r.finished - r.arrival for r in ok if r.finished is not None]
    healed_at = None if permanent or not windows else max(b for _, b in windows)
    recovered: Optional[bool] = None
    recover_s: Optional[float] = None
    if healed_at is not None:
        recovered, recover_s = recovery(requests, healed_at)
    return RunMetrics(
        policy=policy,
        scenario=scenario,
        rate=rate,
        requests=len(requests),
        success_rate=len(ok) / len(requests),
        goodput_mib_s=sum(r.nbytes for r in ok) / MIB / max(end - start, 1e-9),
        p50_s=percentile(latencies, 50),
        p99_s=percentile(latencies, 99),
        attempts=attempts,
        attempts_per_success=attempts / len(ok) if ok else math.inf,
        link_busy_s=sum(r.busy_s for r in requests),
        failed_mib=sum(r.failed_bytes for r in requests) / MIB,
        healed_at=healed_at,
        recovered=recovered,
        recover_s=recover_s,
        windows=windows,
    )


def timeline(requests: Sequence[Request], bucket_s: float = 1.0) -> List[Tuple[float, float]]:
    """Success share of the requests arriving in each ``bucket_s`` of simulated time."""
    buckets: Dict[int, List[bool]] = {}
    for r in requests:
        buckets.setdefault(int(r.arrival // bucket_s), []).append(r.ok)
    return [(b * bucket_s, sum(v) / len(v)) for b, v in sorted(buckets.items())]
