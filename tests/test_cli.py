"""The ``datadist-sim`` command: ``codes`` and ``demo``."""

from __future__ import annotations

import json

import pytest

from datadist_sim import STATUS_TABLE
from datadist_sim.cli import main


def test_codes_lists_all_29_codes_with_their_integers(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["codes", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 29
    assert {r["name"]: r["value"] for r in rows} == {i.name: i.value for i in STATUS_TABLE.values()}


def test_codes_filters_by_name_and_retryable(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["codes", "timeout", "--retryable", "yes"]) == 0
    out = capsys.readouterr().out
    assert "LLM_TIMEOUT" in out
    assert "LLM_WAIT_PROCESS_TIMEOUT" in out
    assert "LLM_LINK_FAILED" not in out


def test_codes_with_no_match_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["codes", "NO_SUCH_CODE"]) == 1


def test_demo_passes_its_checks_and_reports_them(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--json", "--seed", "3"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert all(summary["checks"].values())
    assert summary["retry_outcomes"][-1] == "LLM_SUCCESS"
    assert summary["simulated_seconds"] > 1.0


def test_unknown_command_is_a_usage_error() -> None:
    with pytest.raises(SystemExit) as exc:
        main(["nope"])
    assert exc.value.code == 2
