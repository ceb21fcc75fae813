"""Files in shared directories: an output name where another user planted a symbolic link is refused,
never written through (``fabric --trace``, ``exec --trace``, explore's ``--out``, a trace export); a
standing-fabric directory that another user made first is reported with the fix, by ``exec
--fabric=shared`` and ``fabric --clean``, and nothing is created in it.

The victim of every planted link here is a file the test made: never point such a test at a real file.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, Iterator, Tuple

import pytest

from datadist_sim._outputs import UnsafeOutput, open_output, write_output
from datadist_sim._world.world import SimWorld
from datadist_sim.explore.run import RunResult

from .conftest import TIMEOUT_S

pytestmark = pytest.mark.crossproc

PY = sys.executable
NOBODY = 65534
VICTIM_TEXT = "the victim's own bytes\n"


@pytest.fixture
def planted(tmp_path: Path) -> Iterator[Tuple[Path, Path]]:
    """``(link, victim)``: a symbolic link at an output's name, pointing at a file it must not touch."""
    victim = tmp_path / "victim.txt"
    victim.write_text(VICTIM_TEXT)
    link = tmp_path / "out.jsonl"
    link.symlink_to(victim)
    yield link, victim
    assert victim.read_text() == VICTIM_TEXT, "the link's target was written"


def _cli(*args: str, env: Dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PY, "-m", "datadist_sim", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )


@pytest.mark.parametrize("mode", ["w", "a"])
def test_open_output_refuses_a_symlink_at_the_name(planted: Tuple[Path, Path], mode: str) -> None:
    link, _ = planted
    with pytest.raises(UnsafeOutput, match="symbolic link"):
        open_output(link, mode)


def test_open_output_writes_and_appends_a_plain_file(tmp_path: Path) -> None:
    path = tmp_path / "plain.txt"
    write_output(path, "one\n")
    with open_output(path, "a") as handle:
        handle.write("two\n")
    assert path.read_text() == "one\ntwo\n"
    write_output(path, "three\n")
    assert path.read_text() == "three\n"


def test_a_trace_export_refuses_a_symlink(planted: Tuple[Path, Path]) -> None:
    link, _ = planted
    with pytest.raises(UnsafeOutput):
        SimWorld().trace.to_jsonl(link)


def test_explore_out_refuses_a_symlink(planted: Tuple[Path, Path]) -> None:
    """explore writes its shrunk scenario through ``write_output``."""
    from datadist_sim.explore import report

    _, victim = planted
    (victim.parent / "scenarios").mkdir()
    (victim.parent / "scenarios" / "t-7.toml").symlink_to(victim)
    result = RunResult(index=0, seed=7, schedule=(), failed=True, signature="s", failure="boom")
    with pytest.raises(UnsafeOutput):
        report.write_scenario(victim.parent / "scenarios", "m:t", result)


def test_explore_replay_trace_refuses_a_symlink(
    planted: Tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``explore --replay --trace``: the driver opens the trace without following a link, and so does
    the worker process that writes it."""
    from datadist_sim.cli import main

    link, _ = planted
    scenario = tmp_path / "s.toml"
    scenario.write_text('name = "s"\nseed = 1\n')
    code = main(["explore", "tests.explore.clients:careful", "--replay", str(scenario), "--trace", str(link)])
    assert code == 2
    assert f"{link} is a symbolic link" in capsys.readouterr().err


def test_run_trace_refuses_a_symlink(planted: Tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    from datadist_sim.cli import main

    link, _ = planted
    assert main(["run", "flaky_link", "--seed", "3", "--trace", str(link)]) == 2
    assert f"{link} is a symbolic link" in capsys.readouterr().err


def test_exec_trace_refuses_a_symlink(planted: Tuple[Path, Path], tmp_path: Path) -> None:
    link, _ = planted
    program = [PY, "-c", "import llm_datadist"]
    done = _cli("exec", "--trace", str(link), "--", *program, env=dict(os.environ), cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    assert f"{link} is a symbolic link" in done.stderr


def test_fabric_trace_refuses_a_symlink(planted: Tuple[Path, Path], tmp_path: Path) -> None:
    link, _ = planted
    env = {k: v for k, v in os.environ.items() if k != "DATADIST_SIM_FABRIC"}
    done = _cli("fabric", "--trace", str(link), "--socket-dir", str(tmp_path / "s"), env=env, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert f"{link} is a symbolic link" in done.stderr
    assert "Traceback" not in done.stderr


# -- the standing directory, made first by someone else ---------------------------------------------


@pytest.fixture
def squatted(tmp_path: Path) -> Tuple[Path, Dict[str, str]]:
    """A runtime directory where the standing fabric's directory was made first by another user (as root
    can arrange), or, without root, by us with a mode that lets others in."""
    base = tmp_path / "run"
    base.mkdir(mode=0o700)
    folder = base / f"datadist-sim-{os.getuid()}"
    folder.mkdir(mode=0o700)
    if os.getuid() == 0:
        os.chown(folder, NOBODY, NOBODY)
    else:
        folder.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "DATADIST_SIM_FABRIC"}
    env["XDG_RUNTIME_DIR"] = str(base)
    return folder, env


def test_exec_fabric_shared_names_a_squatted_directory_and_the_fix(
    squatted: Tuple[Path, Dict[str, str]], tmp_path: Path
) -> None:
    folder, env = squatted
    done = _cli("exec", "--fabric=shared", "--", PY, "-c", "pass", env=env, cwd=tmp_path)
    assert done.returncode == 2
    assert str(folder) in done.stderr
    assert "To fix:" in done.stderr
    assert "XDG_RUNTIME_DIR" in done.stderr
    assert "Traceback" not in done.stderr
    assert os.listdir(folder) == [], "nothing is created in a directory that is not ours"


def test_fabric_clean_reports_a_squatted_directory_and_creates_nothing(
    squatted: Tuple[Path, Dict[str, str]], tmp_path: Path
) -> None:
    folder, env = squatted
    done = _cli("fabric", "--clean", env=env, cwd=tmp_path)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert str(folder) in done.stderr
    assert "To fix:" in done.stderr
    assert os.listdir(folder) == []


def test_fabric_clean_creates_no_token(tmp_path: Path) -> None:
    """Cleaning looks; it makes no standing directory and no token where there were none."""
    base = tmp_path / "run"
    base.mkdir(mode=0o700)
    env = {k: v for k, v in os.environ.items() if k != "DATADIST_SIM_FABRIC"}
    env["XDG_RUNTIME_DIR"] = str(base)
    done = _cli("fabric", "--clean", env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert os.listdir(base) == []
