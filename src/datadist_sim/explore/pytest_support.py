"""``@pytest.mark.datadist_explore(runs=N, faults="fail,timeout")``: a test body explored like a target.

The test (it must use ``sim_world``) runs first fault-free, then under ``runs`` schedules, each with a
fresh world passed as ``sim_world``, in a process forked for the runs (so a body that blocks outside the
simulated clock is stopped at the wall bound); each distinct failure is shrunk and written as a scenario
file, and the test fails with the rules, the failure, the readings it fails under and the command that
replays it (``pytest NODEID --datadist-replay=FILE``: the test once, under the file's rules, seed and
``[config]``).
"""

from __future__ import annotations

import inspect
import os
import shlex
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

from datadist_sim._world.surface import SimWorld
from datadist_sim.explore import report
from datadist_sim.explore.run import Limits
from datadist_sim.explore.schedule import parse_kinds
from datadist_sim.explore.search import READINGS, Options, Outcome, explore
from datadist_sim.explore.worker import Job, Workers

MARKER = "datadist_explore"
_KEYS = {"runs", "faults", "seed", "max_rules", "systematic"}


def run_marked(item: pytest.Function, seed: int, config: Any) -> Optional[bool]:
    """The body of ``pytest_pyfunc_call`` for a marked test; True once the test has been run."""
    marker = item.get_closest_marker(MARKER)
    if marker is None:
        return None
    if "sim_world" not in item.funcargs:
        pytest.fail(f"{item.nodeid}: {MARKER} needs the sim_world fixture", pytrace=False)
    if inspect.iscoroutinefunction(item.obj):
        pytest.fail(f"{item.nodeid}: {MARKER} runs plain (not async) test functions", pytrace=False)
    unknown = sorted(set(marker.kwargs) - _KEYS)
    if marker.args or unknown:
        pytest.fail(f"{item.nodeid}: {MARKER} takes keywords {sorted(_KEYS)} only", pytrace=False)
    names = item._fixtureinfo.argnames
    fixed: Dict[str, Any] = {name: item.funcargs[name] for name in names}

    def target(world: SimWorld) -> None:
        item.obj(**{**fixed, "sim_world": world})

    limits = Limits(config=config)
    replay = item.config.getoption("datadist_replay")
    if replay:
        _replay(item, target, Path(replay), seed, limits)
        return True
    kwargs = marker.kwargs
    try:
        options = Options(
            runs=int(kwargs.get("runs", 100)),
            seed=int(kwargs.get("seed", seed)),
            workers=1,
            kinds=parse_kinds(kwargs.get("faults")),
            max_rules=int(kwargs.get("max_rules", 3)),
            systematic=bool(kwargs.get("systematic", True)),
            limits=limits,
        )
    except ValueError as exc:
        pytest.fail(f"{item.nodeid}: {MARKER}: {exc}", pytrace=False)
    outcome = explore(target, options)
    if outcome.baseline.failed:
        pytest.fail("\n".join(report.failure_text(outcome.baseline, "fault-free run fails")), pytrace=False)
    shrunk = [found for found in outcome.found if found.shrunk is not None]
    if shrunk:
        out = Path(item.config.getoption("datadist_explore_out"))
        paths = [report.write_scenario(out, _file_name(item), f.shrunk) for f in shrunk if f.shrunk]
        outcome.found = shrunk
        pytest.fail(_message(item, outcome, options.runs, paths), pytrace=False)
    return True


def _file_name(item: pytest.Function) -> str:
    return item.name.replace("[", "-").replace("]", "").replace("/", "_")


def _message(item: pytest.Function, outcome: Outcome, runs: int, paths: List[Path]) -> str:
    lines = [
        f"{len(outcome.failures)} of {runs} fault schedules broke {item.nodeid} "
        f"in {len(outcome.found)} distinct place(s):"
    ]
    for number, (found, path) in enumerate(zip(outcome.found, paths), 1):
        shrunk = found.shrunk
        assert shrunk is not None
        # The marker resolves a relative path from the test file's directory, wherever pytest runs.
        beside = os.path.relpath(path.resolve(), Path(str(item.path)).resolve().parent)
        lines += [
            "",
            f"[{number}] {found.group}: {found.count} run(s); shrunk to {len(shrunk.schedule)} rule(s):",
            *(f"  {line}" for line in report.rule_lines(shrunk.schedule)),
            *report.failure_text(shrunk, "failure"),
            f"scenario written to {path}",
            f"replay: pytest {shlex.quote(item.nodeid)} --datadist-replay={shlex.quote(str(path))}",
            f"(or mark the test @pytest.mark.datadist_scenario({beside!r}) as a regression test)",
        ]
    return "\n".join(lines)


def _replay(item: pytest.Function, target: Any, path: Path, seed: int, limits: Limits) -> None:
    from datadist_sim import scenarios

    scenario = scenarios.load(path)
    run_seed = scenario.seed if scenario.seed is not None else seed
    config = dict(scenario.config)
    reading = item.config.getoption("datadist_reading")
    if reading is not None:
        config.update(READINGS[reading])
    job = Job(0, run_seed, [dict(s) for s in scenario.rule_specs], config)
    with Workers(target, limits) as workers:
        result = workers.one(job)
    if result.failed:
        under = f" under the {reading} reading" if reading is not None else ""
        pytest.fail("\n".join(report.failure_text(result, f"{path} still fails{under}")), pytrace=False)
