"""Output of the retry benchmark: a markdown table, a JSON file, and PNG plots when matplotlib is there."""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from datadist_sim.bench.retry_bench import Cell, Results

_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
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


DELIVERED_ONLY = (
    "p50/p99: arrival-to-delivery latency of delivered requests only (shown beside the delivered share): "
    "a policy that gives up early delivers fewer requests and can look faster."
)


def table(cells: Sequence[Cell]) -> str:
    """One row per policy x scenario x rate, and the note that latencies count delivered requests only."""
    head = (
        "| scenario | rate | policy | delivered | p50 s (delivered) | p99 s (delivered) | goodput MiB/s "
        "| attempts/success | link-busy s | failed MiB | recovered after heal |"
    )
    lines = [head, "|" + "---|" * 11]
    for c in cells:
        m = c.metrics
        lines.append(
            f"| {m.scenario} | {m.rate:g} | {m.policy} | {m.success_rate:.1%} | {_num(m.p50_s)} "
            f"| {_num(m.p99_s)} | {_num(m.goodput_mib_s)} | {_num(m.attempts_per_success)} "
            f"| {_num(m.link_busy_s)} | {_num(m.failed_mib)} | {_recovered(c)} |"
        )
    return "\n".join([*lines, "", DELIVERED_ONLY])


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
    """The delivered share of every cell (a policy x scenario heatmap), success over time (one small
    panel per policy and scenario, fault windows shaded) and work vs clients; [] without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(PLOT_HINT)
        return []
    paths = [
        _success_heatmap(plt, results.cells, out / "retry_success.png"),
        _timelines(plt, results.cells, out / "retry_timelines.png"),
    ]
    if results.clients:
        paths.append(_clients(plt, results.clients, out / "retry_clients.png"))
    return paths


def _columns(cells: Sequence[Cell]) -> List[str]:
    return list(dict.fromkeys(f"{c.metrics.scenario} x{c.metrics.rate:g}" for c in cells))


def _policies(cells: Sequence[Cell]) -> List[str]:
    return list(dict.fromkeys(c.metrics.policy for c in cells))


def _success_heatmap(plt: Any, cells: Sequence[Cell], path: Path) -> Path:
    """Rows: policies; columns: scenario x rate; colour and number: the share of requests delivered."""
    columns, policies = _columns(cells), _policies(cells)
    grid = [[math.nan] * len(columns) for _ in policies]
    for c in cells:
        m = c.metrics
        grid[policies.index(m.policy)][columns.index(f"{m.scenario} x{m.rate:g}")] = m.success_rate
    fig, ax = plt.subplots(figsize=(1.0 + 0.85 * len(columns), 1.2 + 0.45 * len(policies)))
    image = ax.imshow(grid, cmap="RdYlGn", vmin=0.0, vmax=1.0, aspect="auto")
    for row, values in enumerate(grid):
        for col, value in enumerate(values):
            if not math.isnan(value):
                ax.text(col, row, f"{value:.0%}", ha="center", va="center", fontsize=7)
    ax.set_xticks(range(len(columns)), columns, rotation=40, ha="right", fontsize=8)
    ax.set_yticks(range(len(policies)), policies, fontsize=8)
    bar = fig.colorbar(image, ax=ax, fraction=0.04, pad=0.02)
    bar.set_label("share of requests delivered (0 to 1)", fontsize=8)
    ax.set_title("Requests delivered, per policy and scenario x fault rate", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def _timelines(plt: Any, cells: Sequence[Cell], path: Path) -> Path:
    """One small panel per policy (columns) and faulted scenario x rate (rows): one line each, so
    policies never hide one another; y from 0 to 1; each scenario's own fault windows shaded."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    faulted = [c for c in cells if c.metrics.windows]
    rows, cols = _columns(faulted), _policies(faulted)
    if not rows:
        rows, cols = ["(no faulted runs)"], ["-"]
    fig, axes = plt.subplots(
        len(rows),
        len(cols),
        figsize=(1.0 + 1.7 * len(cols), 0.9 + 1.05 * len(rows)),
        squeeze=False,
        sharex=True,
        sharey=True,
    )
    for c in faulted:
        m = c.metrics
        ax = axes[rows.index(f"{m.scenario} x{m.rate:g}")][cols.index(m.policy)]
        for a, b in m.windows:
            ax.axvspan(a, b, color="red", alpha=0.15, lw=0)
        xs, ys = zip(*c.timeline) if c.timeline else ((), ())
        ax.plot(xs, ys, color="tab:blue", lw=1.2, clip_on=False, zorder=3)  # visible on the y = 0 spine
    for ax in axes.flat:
        ax.set_ylim(0.0, 1.05)
        ax.tick_params(labelsize=6)
        ax.grid(alpha=0.3, lw=0.5)
    for col, policy in enumerate(cols):
        axes[0][col].set_title(policy, fontsize=8)
        axes[-1][col].set_xlabel("simulated s", fontsize=7)
    for row, name in enumerate(rows):
        axes[row][0].set_ylabel(name.replace(" x", "\nx"), fontsize=7)
    handles = [
        Line2D([], [], color="tab:blue", lw=1.2, label="share of requests delivered, per second of arrival"),
        Patch(color="red", alpha=0.15, label="fault window"),
    ]
    height = fig.get_figheight()
    fig.suptitle(
        "Requests delivered over time, per policy (columns) and scenario x fault rate (rows)",
        fontsize=10,
        y=1 - 0.12 / height,
    )
    fig.legend(
        handles=handles,
        loc="upper center",
        ncol=2,
        fontsize=8,
        frameon=False,
        bbox_to_anchor=(0.5, 1 - 0.32 / height),
    )
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.62 / height))
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def _clients(plt: Any, rows: Sequence[Dict[str, Any]], path: Path) -> Path:
    """Two panels against the number of Decode clients. Policies that behave alike draw the same line,
    so each has its own marker, drawn smaller than the one before: a policy hidden under another still
    shows as a mark inside its mark. The legend runs under the panels, in as few rows as fit."""
    policies = list(dict.fromkeys(r["policy"] for r in rows))
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.4))
    for i, policy in enumerate(policies):
        mine = [r for r in rows if r["policy"] == policy]
        style = {
            "marker": _MARKERS[i % len(_MARKERS)],
            "markersize": max(11 - 1.2 * i, 3),
            "linestyle": _STYLES[i % len(_STYLES)],
            "label": policy,
        }
        left.plot([r["clients"] for r in mine], [r["attempts_per_request"] for r in mine], **style)
        right.plot([r["clients"] for r in mine], [r["busy_s_per_success"] for r in mine], **style)
    left.set(xlabel="Decode clients", ylabel="attempts per request", title="Amplification (flaky_link)")
    right.set(xlabel="Decode clients", ylabel="link-busy s per success", title="Work per delivered request")
    for ax in (left, right):
        ax.set_ylim(bottom=0.0)
        ax.grid(alpha=0.3, lw=0.5)
    handles, labels = left.get_legend_handles_labels()
    fig.legend(
        handles,
        labels,
        loc="lower center",
        ncol=min(len(labels), 7),
        fontsize=8,
        frameon=False,
        title="policy",
    )
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
