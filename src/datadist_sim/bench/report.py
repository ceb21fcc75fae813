"""Output of the retry benchmark: a markdown table, a JSON file, and PNG plots when matplotlib is there."""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from datadist_sim.bench.retry_bench import Cell, Results

_STYLES = ("-", "--", "-.", ":", "-", "--", "-.", ":")
"""Line styles by policy, so policies that coincide stay visible on top of each other."""
PLOT_HINT = "matplotlib is not installed: no PNG plots (pip install 'datadist-sim[plot]')"


def _num(value: Optional[float], digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return f"{value:.{digits}g}" if abs(value) < 1000 else f"{value:.0f}"


def _recovered(cell: Cell) -> str:
    m = cell.metrics
    if m.healed_at is None:
        return "n/a (permanent)" if m.windows else "-"
    return f"yes, {m.recover_s:.2f} s" if m.recovered and m.recover_s is not None else "NO"


def table(cells: Sequence[Cell]) -> str:
    """One row per policy x scenario x rate."""
    head = (
        "| scenario | rate | policy | success | goodput MiB/s | p50 s | p99 s | attempts/success "
        "| link-busy s | failed MiB | recovered after heal |"
    )
    lines = [head, "|" + "---|" * 11]
    for c in cells:
        m = c.metrics
        lines.append(
            f"| {m.scenario} | {m.rate:g} | {m.policy} | {m.success_rate:.1%} | {_num(m.goodput_mib_s)} "
            f"| {_num(m.p50_s)} | {_num(m.p99_s)} | {_num(m.attempts_per_success)} | {_num(m.link_busy_s)} "
            f"| {_num(m.failed_mib)} | {_recovered(c)} |"
        )
    return "\n".join(lines)


def clients_table(rows: Sequence[Dict[str, Any]]) -> str:
    lines = [
        "| clients | policy | requests | success | attempts/request | link-busy s | busy s per success |",
        "|" + "---|" * 7,
    ]
    for r in rows:
        lines.append(
            f"| {r['clients']} | {r['policy']} | {r['requests']} | {r['success_rate']:.1%} "
            f"| {_num(r['attempts_per_request'])} | {_num(r['link_busy_s'])} "
            f"| {_num(r['busy_s_per_success'])} |"
        )
    return "\n".join(lines)


def to_json(results: Results) -> Dict[str, Any]:
    return {
        "seed": results.seed,
        "workload": asdict(results.workload),
        "cells": [dict(c.metrics.to_json(), timeline=c.timeline) for c in results.cells],
        "clients": results.clients,
    }


def write_json(results: Results, path: Path) -> None:
    path.write_text(json.dumps(to_json(results), indent=1, sort_keys=True) + "\n")


def write_plots(results: Results, out: Path) -> List[Path]:
    """Success over time per scenario (fault windows shaded) and work vs clients; [] without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(PLOT_HINT)
        return []
    paths = [_timelines(plt, results.cells, out / "retry_timelines.png")]
    if results.clients:
        paths.append(_clients(plt, results.clients, out / "retry_clients.png"))
    return paths


def _timelines(plt: Any, cells: Sequence[Cell], path: Path) -> Path:
    groups: Dict[str, List[Cell]] = {}
    for c in cells:
        if c.metrics.windows:
            groups.setdefault(f"{c.metrics.scenario} x{c.metrics.rate:g}", []).append(c)
    cols = 3
    rows = max(1, math.ceil(len(groups) / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3 * rows), squeeze=False, sharey=True)
    for ax, (title, group) in zip(axes.flat, groups.items()):
        for a, b in group[0].metrics.windows:
            ax.axvspan(a, b, color="red", alpha=0.12, lw=0)
        for i, c in enumerate(group):
            xs, ys = zip(*c.timeline) if c.timeline else ((), ())
            style = _STYLES[i % len(_STYLES)]
            ax.plot(xs, ys, style, label=c.metrics.policy, lw=1.2 if i % 2 else 2.2, alpha=0.85)
        ax.set_title(title, fontsize=9)
        ax.set_ylim(-0.05, 1.05)
        ax.set_xlabel("simulated s (arrival)", fontsize=8)
    for ax in list(axes.flat)[len(groups) :]:
        ax.axis("off")
    axes.flat[0].set_ylabel("success share per second")
    axes.flat[0].legend(fontsize=7, loc="lower left")
    fig.suptitle("Requests delivered over time; red = fault window", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def _clients(plt: Any, rows: Sequence[Dict[str, Any]], path: Path) -> Path:
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.5))
    for policy in dict.fromkeys(r["policy"] for r in rows):
        mine = [r for r in rows if r["policy"] == policy]
        left.plot(
            [r["clients"] for r in mine], [r["attempts_per_request"] for r in mine], marker="o", label=policy
        )
        right.plot(
            [r["clients"] for r in mine], [r["busy_s_per_success"] for r in mine], marker="o", label=policy
        )
    left.set(xlabel="Decode clients", ylabel="attempts per request", title="Amplification (flaky_link)")
    right.set(xlabel="Decode clients", ylabel="link-busy s per success", title="Work per delivered request")
    left.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
