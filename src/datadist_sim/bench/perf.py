"""Simulator performance, each figure against a baseline measured in the same run (DESIGN.md targets).

- control plane: a small ``pull_cache`` on the virtual clock vs a bare call doing the same argument
  validation (target: >= 50,000 simulated pulls per second on one core);
- data plane: a 64 MiB pull vs ``numpy.copyto`` of the same bytes (target: >= 0.70 of numpy);
- scale: cost per pull as links, live keys and requests grow, and memory per live key (tracemalloc);
- cross-process: a small pull's round trip through a fabric vs a Unix-socket ping-pong, and a large
  pull between raw pointers of two processes vs a shared-memory memcpy (``perf_fabric``).

Wall time is the best of several repeats (the machines are noisy); nothing here asserts a speed.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np

from datadist_sim._views import tensor_views
from datadist_sim.bench.perf_fabric import cross_process
from datadist_sim.bench.perf_scale import scaling
from datadist_sim.bench.perf_setup import Figure, Pair, best_of, validate_like_pull_cache
from datadist_sim.llm_datadist import CacheDesc, CacheKeyByIdAndIndex, DataType

PULLS_PER_S_TARGET = 50_000
COPY_RATIO_TARGET = 0.70


def control_plane(repeat: int, inner: int) -> List[Figure]:
    with Pair(backed=True) as pair:
        desc = CacheDesc(1, [1, 256], DataType.DT_FLOAT16)
        src, dst = pair.prompt_cm.allocate_cache(desc), pair.decode_cm.allocate_cache(desc)
        key = CacheKeyByIdAndIndex(pair.prompt_id, src.cache_id, 0)
        bare = best_of(repeat, lambda: validate_like_pull_cache(key, dst, 0), inner)
        pull = best_of(repeat, lambda: pair.decode_cm.pull_cache(key, dst, 0), inner)
        simulated = pair.world.now()
    rate = 1.0 / pull
    return [
        Figure("control", "bare call: pull_cache's argument validation", bare * 1e6, "µs"),
        Figure(
            "control",
            "pull_cache of a 512 B cache (v2, by id), virtual clock",
            pull * 1e6,
            "µs",
            bare * 1e6,
            "bare call",
            pull / bare,
            f">= {PULLS_PER_S_TARGET:,} pulls/s",
        ),
        Figure(
            "control",
            "simulated pulls per wall second",
            rate,
            "pulls/s",
            target=f">= {PULLS_PER_S_TARGET:,}",
            met=rate >= PULLS_PER_S_TARGET,
        ),
        Figure("control", "simulated seconds that passed during the pulls", simulated, "s"),
    ]


def data_plane(mib: int, repeat: int) -> List[Figure]:
    nbytes = mib << 20
    with Pair(backed=True, pool_bytes=4 * nbytes) as pair:
        desc = CacheDesc(1, [1, nbytes // 2], DataType.DT_FLOAT16)
        src, dst = pair.prompt_cm.allocate_cache(desc), pair.decode_cm.allocate_cache(desc)
        (src_view,), (dst_view,) = tensor_views(src), tensor_views(dst)
        src_view[...] = np.random.default_rng(0).standard_normal(src_view.shape).astype(src_view.dtype)
        key = CacheKeyByIdAndIndex(pair.prompt_id, src.cache_id, 0)
        plain = best_of(repeat, lambda: np.copyto(dst_view, src_view))
        dst_view[...] = 0
        ours = best_of(repeat, lambda: pair.decode_cm.pull_cache(key, dst, 0))
        same = bool(np.array_equal(src_view, dst_view))
    ratio = plain / ours
    return [
        Figure(
            "data",
            f"pull_cache of {mib} MiB (bytes checked: {same})",
            ours * 1e3,
            "ms",
            plain * 1e3,
            "numpy.copyto, same bytes",
            ratio,
            f">= {COPY_RATIO_TARGET} of numpy",
            ratio >= COPY_RATIO_TARGET and same,
        )
    ]


def main(quick: bool = False, out: Path = Path("bench-results")) -> int:
    wall = time.perf_counter()
    figures = control_plane(repeat=3 if quick else 7, inner=500 if quick else 3000)
    figures += data_plane(mib=16 if quick else 64, repeat=3 if quick else 10)
    figures += scaling(quick)
    figures += cross_process(quick)
    print(table(figures))
    out.mkdir(parents=True, exist_ok=True)
    path = out / "perf.json"
    path.write_text(json.dumps(report(figures), indent=1) + "\n")
    print(f"\nwall {time.perf_counter() - wall:.1f} s; wrote {path}")
    return 0


def report(figures: List[Figure]) -> Dict[str, Any]:
    import platform

    return {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "machine": platform.machine(),
        "figures": [asdict(f) for f in figures],
    }


def _fmt(value: Optional[float]) -> str:
    if value is None:
        return ""
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"


def table(figures: List[Figure]) -> str:
    lines = ["| group | case | ours | baseline | ratio | target | met |", "|---|---|---|---|---|---|---|"]
    for f in figures:
        base = f"{_fmt(f.baseline)} {f.unit} ({f.baseline_case})" if f.baseline is not None else ""
        met = "" if f.met is None else ("yes" if f.met else "NO")
        ours = f"{_fmt(f.ours)} {f.unit}"
        lines.append(f"| {f.group} | {f.case} | {ours} | {base} | {_fmt(f.ratio)} | {f.target} | {met} |")
    return "\n".join(lines)
