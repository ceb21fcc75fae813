"""``datadist-sim exec --fabric --coverage``: the calls run in the fabric, which counts the codes per
client process; each process fetches its own counts at exit and the exec parent adds them up."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from datadist_sim.cli import main

from .conftest import Fabric

pytestmark = [
    pytest.mark.crossproc,
    pytest.mark.skipif(os.name != "posix", reason="uses sh and Unix sockets"),
]

LINK_NOWHERE = Path(__file__).parents[1] / "programs" / "link_nowhere.py"
"""The same program ``test_cli_exec`` runs in-process."""


def test_exec_fabric_coverage_counts_the_codes_each_client_process_received(
    fabric: Fabric, capfd: pytest.CaptureFixture[str]
) -> None:
    script = f"{sys.executable} {LINK_NOWHERE} && {sys.executable} {LINK_NOWHERE}"
    code = main(["exec", "--fabric", str(fabric.address), "--coverage", "--", "sh", "-c", script])
    captured = capfd.readouterr()
    assert code == 0, captured.err
    assert captured.out.splitlines() == ["LLM_LINK_FAILED"] * 2
    assert re.search(r"LLM_LINK_FAILED\s+1343270921\s+2\s+link_clusters 2", captured.err), captured.err
    assert "over 6 API calls" in captured.err  # init, link_clusters, finalize in each process
    assert "engine modes used: v2-kv (2 instances)" in captured.err  # counted against GE's codes
