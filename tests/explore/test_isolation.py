"""Targets as users write them: a module that imports ``llm_datadist`` at its top loads under explore
and ``--replay``; a target whose thread blocks outside the simulated clock is reported as a hang within
the wall bound, with each thread's stack, and explore (one or two workers) and ``--replay`` return."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from tests.explore import targets

from datadist_sim.cli import main
from datadist_sim.explore import Limits, Options, explore
from datadist_sim.explore.worker import Job, Workers

ROOT = Path(__file__).resolve().parents[2]
BLOCKS = "tests.explore.targets:blocks_on_a_socket"


def _cli(*argv: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """The command in a fresh interpreter, where no ``llm_datadist`` is importable until the fake is."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "datadist_sim", *argv],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_a_target_module_importing_llm_datadist_at_its_top_is_explored_and_replayed(tmp_path: Path) -> None:
    done = _cli("explore", "tests.explore.toplevel:makes_a_decode", "--runs", "3", "--workers", "1")
    assert done.returncode == 0, done.stderr + done.stdout
    assert "No module named 'llm_datadist'" not in done.stderr
    scenario = tmp_path / "none.toml"
    scenario.write_text('seed = 1\n[[rules]]\naction = "delay"\nseconds = 0.1\nop = "init"\n')
    replayed = _cli("explore", "tests.explore.toplevel:makes_a_decode", "--replay", str(scenario))
    assert replayed.returncode == 0, replayed.stderr + replayed.stdout


def test_a_thread_blocked_on_a_socket_read_is_a_hang_with_each_threads_stack() -> None:
    with Workers(targets.blocks_on_a_socket, Limits(wall_limit_s=0.5)) as workers:
        result = workers.one(Job(0, 1, []))
        assert result.failed
        assert result.signature == "hang"
        assert "where each thread was waiting" in result.failure
        assert "in listen" in result.failure  # the listener's frame, blocked in recv
        assert result.where.startswith("tests/explore/targets.py:")
        assert result.where.endswith("blocks_on_a_socket")
        after = workers.one(Job(1, 1, []))  # a new worker takes the next run
        assert after.signature == "hang"


def test_explore_with_two_workers_returns_and_reports_the_hang() -> None:
    start = time.monotonic()
    outcome = explore(BLOCKS, Options(runs=0, workers=2, limits=Limits(wall_limit_s=0.5)))
    assert time.monotonic() - start < 30
    assert outcome.baseline.failed
    assert outcome.baseline.signature == "hang"


def test_replay_of_a_blocking_target_returns_within_the_wall_limit(tmp_path: Path) -> None:
    scenario = tmp_path / "s.toml"
    scenario.write_text("seed = 3\n")
    done = _cli("explore", BLOCKS, "--replay", str(scenario), "--wall-limit", "0.5", timeout=60)
    assert done.returncode == 1
    assert "hang" in done.stdout
    assert "recv" in done.stdout or "in listen" in done.stdout


def test_explore_command_with_two_workers_returns_on_a_blocking_target() -> None:
    done = _cli("explore", BLOCKS, "--runs", "4", "--workers", "2", "--wall-limit", "0.5", timeout=60)
    assert done.returncode == 1
    assert "baseline run fails" in done.stdout
    assert "hang" in done.stdout


def test_in_process_main_returns_for_a_blocking_target_too(tmp_path: Path) -> None:
    scenario = tmp_path / "s.toml"
    scenario.write_text("seed = 3\n")
    assert main(["explore", BLOCKS, "--replay", str(scenario), "--wall-limit", "0.5"]) == 1
