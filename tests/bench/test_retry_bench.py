"""The retry benchmark: re-timed scenarios, the metrics, the report, and the command."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, List

import pytest

from datadist_sim.bench import main, report
from datadist_sim.bench.metrics import percentile, recovery
from datadist_sim.bench.retry_bench import POLICIES, Results, run_cell, run_matrix
from datadist_sim.bench.workload import Request, Workload
from datadist_sim.faults.retime import Timing, bench_rules, windows

SMALL = Workload(requests=200, rate_per_s=10.0)
TIMING = Timing(start_s=4.0, window_s=8.0)


def test_flaky_link_holds_for_the_window_and_timed_scenarios_are_stretched_into_it() -> None:
    (flaky,) = bench_rules("flaky_link", 2.0, TIMING)
    assert (flaky.start_s, flaky.end_s) == (4.0, 12.0)
    assert flaky.probability == pytest.approx(0.30)
    (part,) = bench_rules("partition_heal", 1.0, TIMING)
    assert part.start_s == 4.0
    assert part.start_s + part.heal_after_s == pytest.approx(12.0)
    assert windows([part], [], 99.0) == [(4.0, pytest.approx(12.0))]


def test_percentile_is_nearest_rank() -> None:
    assert percentile([], 50) is None
    assert percentile([3.0, 1.0, 2.0, 4.0], 50) == 2.0
    assert percentile(list(map(float, range(1, 101))), 99) == 99.0


def _req(rid: int, arrival: float, ok: bool) -> Request:
    r = Request(rid, arrival, 0, 0, 1024)
    r.ok = ok
    return r


def test_recovery_is_the_first_arrival_after_the_heal_from_which_requests_succeed() -> None:
    reqs = [_req(0, 9.0, False), _req(1, 10.5, False), *(_req(i, 10.0 + i, True) for i in range(2, 40))]
    assert recovery(reqs, healed_at=10.0) == (True, 2.0)
    assert recovery([*reqs, _req(99, 99.0, False)], healed_at=10.0) == (False, None)


def test_a_lucky_last_few_successes_are_not_recovery() -> None:
    broken = [_req(i, 10.0 + i, i % 8 != 0) for i in range(100)]  # one link in eight stays broken
    assert recovery([*broken, *(_req(100 + i, 110.0 + i, True) for i in range(10))], healed_at=10.0) == (
        False,
        None,
    )


def test_code_aware_beats_no_retry_and_immediate_on_the_flaky_link() -> None:
    """The benchmark's headline: timeouts break links, and only the documented remedy (re-link) keeps
    requests flowing; plain retries keep hitting LLM_NOT_YET_LINK, and no link recovers after the heal."""
    policies = {p: POLICIES[p] for p in ("no-retry", "immediate", "code-aware")}
    cells = {
        c.metrics.policy: c.metrics for c in run_matrix(SMALL, policies, [("flaky_link", (1.0,))], TIMING)
    }
    aware, plain, naive = cells["code-aware"], cells["no-retry"], cells["immediate"]
    assert aware.success_rate >= 0.95
    assert aware.success_rate > plain.success_rate + 0.3
    assert aware.success_rate > naive.success_rate + 0.3
    assert aware.recovered
    assert not plain.recovered
    assert not naive.recovered
    assert naive.attempts_per_success > aware.attempts_per_success


def test_a_killed_prompt_never_heals_and_the_table_says_so() -> None:
    cell = run_cell(SMALL, "code-aware", POLICIES["code-aware"], "prompt_crash", 1.0, TIMING)
    assert cell.metrics.healed_at is None
    assert cell.metrics.recovered is None
    assert "n/a (permanent)" in report.table([cell])


def test_report_table_json_and_missing_matplotlib(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wl = replace(SMALL, requests=60)
    cells = run_matrix(wl, {"no-retry": POLICIES["no-retry"]}, [("none", (0.0,)), ("uce", (1.0,))], TIMING)
    results = Results(0, wl, cells)
    lines = report.table(cells).splitlines()
    assert len(lines) == 2 + 2 + 2  # header, rule, two rows, a blank line and the delivered-only note
    assert lines[2].startswith("| none | 0 | no-retry | 100.0% |")
    report.write_json(results, tmp_path / "r.json")
    data = json.loads((tmp_path / "r.json").read_text())
    assert [c["scenario"] for c in data["cells"]] == ["none", "uce"]
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert report.write_plots(results, tmp_path) == []
    assert not list(tmp_path.glob("*.png"))


def test_bench_retry_command_prints_the_table_and_writes_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["retry", "--out", str(tmp_path), "--requests", "60", "--no-plots", "--clients", ""]
    argv += ["--policies", "no-retry,code-aware", "--scenarios", "flaky_link:1/2"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.count("| flaky_link |") == 4
    assert json.loads((tmp_path / "retry.json").read_text())["seed"] == 0


def test_bench_retry_rejects_an_unknown_policy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["retry", "--out", str(tmp_path), "--policies", "hope"]) == 2
    assert "unknown policies" in capsys.readouterr().out


def test_plots_are_written_with_matplotlib(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    wl = replace(SMALL, requests=60)
    cells = run_matrix(wl, {"no-retry": POLICIES["no-retry"]}, [("flaky_link", (1.0,))], TIMING)
    clients = [{"clients": 2, "policy": "no-retry", "attempts_per_request": 1.0, "busy_s_per_success": 0.1}]
    paths = report.write_plots(Results(0, wl, cells, clients), tmp_path)
    assert [p.name for p in paths] == ["retry_success.png", "retry_timelines.png", "retry_clients.png"]
    assert all(p.read_bytes()[:4] == b"\x89PNG" for p in paths)


def test_bench_retry_takes_a_user_policy_from_a_module(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["retry", "--out", str(tmp_path), "--requests", "40", "--no-plots", "--clients", ""]
    argv += [
        "--policies",
        "no-retry",
        "--scenarios",
        "none",
        "--add-policy",
        "mine=datadist_sim.retry:fixed_delay",
    ]
    assert main(argv) == 0
    assert "| none | 0 | mine | 100.0% |" in capsys.readouterr().out
    assert main([*argv[:-1], "mine=datadist_sim.retry"]) == 2


def test_the_fault_window_follows_the_length_of_the_run() -> None:
    from datadist_sim.bench.retry_bench import timing_for

    assert timing_for(Workload()) == Timing(start_s=10.0, window_s=20.0)
    assert timing_for(Workload(requests=100, rate_per_s=10.0)) == Timing(start_s=2.0, window_s=4.0)


def test_bench_retry_add_policy_imports_a_module_from_the_current_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "my_policies_h17.py").write_text(
        "from datadist_sim.retry import no_retry\n\ndef make():\n    return no_retry()\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    argv = ["retry", "--out", str(tmp_path / "out"), "--requests", "20", "--no-plots", "--clients", ""]
    argv += ["--policies", "no-retry", "--scenarios", "none", "--add-policy", "mine=my_policies_h17:make"]
    assert main(argv) == 0
    assert "| none | 0 | mine | 100.0% |" in capsys.readouterr().out


def test_the_table_says_p50_and_p99_count_delivered_requests_beside_the_delivered_share() -> None:
    wl = replace(SMALL, requests=40)
    cells = run_matrix(wl, {"no-retry": POLICIES["no-retry"]}, [("flaky_link", (1.0,))], TIMING)
    text = report.table(cells)
    header = [h.strip() for h in text.splitlines()[0].strip("|").split("|")]
    assert header[3:6] == ["delivered", "p50 s (delivered)", "p99 s (delivered)"]
    assert "latency of delivered requests only" in text.splitlines()[-1]


class _KeepFigures:
    """matplotlib.pyplot, except that closed figures are kept for the test to inspect."""

    def __init__(self) -> None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        self._plt = plt
        self.figures: List[Any] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._plt, name)

    def close(self, fig: Any) -> None:
        self.figures.append(fig)


def test_timeline_plots_have_a_panel_per_policy_y_from_0_the_window_shaded_and_a_legend(
    tmp_path: Path,
) -> None:
    pytest.importorskip("matplotlib")
    wl = replace(SMALL, requests=60)
    policies = {"no-retry": POLICIES["no-retry"], "code-aware": POLICIES["code-aware"]}
    cells = run_matrix(wl, policies, [("flaky_link", (1.0,)), ("uce", (1.0,))], TIMING)
    plt = _KeepFigures()
    report._timelines(plt, cells, tmp_path / "t.png")
    report._clients(
        plt,
        [{"clients": 1, "policy": "p", "attempts_per_request": 2.0, "busy_s_per_success": 0.1}],
        tmp_path / "c.png",
    )
    timelines, clients = plt.figures
    panels = timelines.axes
    assert len(panels) == 2 * 2  # scenarios x policies, one line each
    assert {ax.get_title() for ax in panels} >= {"no-retry", "code-aware"}
    assert all(ax.get_ylim()[0] == 0.0 and len(ax.get_lines()) == 1 for ax in panels)
    assert all(ax.patches for ax in panels)  # the fault window, shaded
    assert all(ax.get_ylim()[0] == 0.0 for ax in clients.axes)
    for fig in (timelines, clients):
        assert fig.legends, "a legend on every figure"
        plt._plt.close(fig)


def test_the_success_heatmap_colours_each_policy_and_scenario_from_0_to_1(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    wl = replace(SMALL, requests=40)
    policies = {"no-retry": POLICIES["no-retry"], "code-aware": POLICIES["code-aware"]}
    cells = run_matrix(wl, policies, [("none", (0.0,)), ("flaky_link", (1.0,))], TIMING)
    plt = _KeepFigures()
    report._success_heatmap(plt, cells, tmp_path / "s.png")
    (fig,) = plt.figures
    heat = fig.axes[0]
    image = heat.get_images()[0]
    assert image.get_clim() == (0.0, 1.0)
    assert image.get_array().shape == (2, 2)
    assert [t.get_text() for t in heat.get_yticklabels()] == ["no-retry", "code-aware"]
    assert len(fig.axes) == 2  # the colour bar is the legend
    plt._plt.close(fig)
