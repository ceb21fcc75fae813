"""``datadist-sim exec -- python -m pytest``: the tests of a user's project get the fake, even when one
of its conftests puts a ``MagicMock`` in place of ``llm_datadist`` "unless already imported".

The failure this guards against needs datadist-sim installed as a wheel installs it (the package's files
listed in its ``RECORD``): pytest then marks the package for assertion rewriting, and its rewrite hook,
in front of exec's boot hook, loads the pytest11 plugin past it. An editable install hides that, so the
test builds a wheel-shaped site directory from the package under test.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import datadist_sim

CONFTEST = """
import sys
from unittest.mock import MagicMock

if "llm_datadist" not in sys.modules:  # as connector test suites do for CI machines without CANN
    sys.modules["llm_datadist"] = MagicMock()
"""
TEST = """
def test_llm_datadist_is_the_fake():
    import llm_datadist

    print("llm_datadist is", type(llm_datadist).__name__, getattr(llm_datadist, "__name__", "?"))
    assert llm_datadist.__name__ == "datadist_sim.llm_datadist"
"""


def _wheel_shaped_site(root: Path) -> Path:
    """A site directory holding a copy of datadist_sim and a dist-info that lists its files."""
    site = root / "site"
    package = Path(datadist_sim.__file__).parent
    shutil.copytree(package, site / "datadist_sim", ignore=shutil.ignore_patterns("__pycache__"))
    info = site / "datadist_sim-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: datadist-sim\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text("[pytest11]\ndatadist_sim = datadist_sim.pytest_plugin\n")
    files = sorted(p.relative_to(site).as_posix() for p in (site / "datadist_sim").rglob("*") if p.is_file())
    (info / "RECORD").write_text("".join(f"{name},,\n" for name in files))
    return site


@pytest.mark.skipif(os.name != "posix", reason="exec's boot directory is tested on POSIX")
@pytest.mark.parametrize("plugin", ["autoloaded", "disabled"])
def test_pytest_under_exec_runs_the_tests_on_the_fake_not_on_a_conftest_mock(
    tmp_path: Path, plugin: str
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "pytest.ini").write_text("[pytest]\n")
    (project / "conftest.py").write_text(CONFTEST)
    (project / "test_client.py").write_text(TEST)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "DATADIST_SIM_"))}
    env["PYTHONPATH"] = str(_wheel_shaped_site(tmp_path))
    if plugin == "disabled":
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    # pytest-asyncio warns about its own unset option under -W error in some installs; the tiny project
    # has no async tests, so it is left out (the autoloaded datadist_sim plugin is what this is about).
    pytest_argv = [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "-p", "no:asyncio"]
    pytest_argv += ["-W", "error"]
    run = subprocess.run(
        [sys.executable, "-m", "datadist_sim.cli", "exec", "--", *pytest_argv, "test_client.py"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "llm_datadist is module datadist_sim.llm_datadist" in run.stdout
