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


@pytest.mark.parametrize("text", ["1343270938", "0x5010B01A", "0x5010b01a", "LLM_TIMEOUT"])
def test_codes_finds_LLM_TIMEOUT_by_its_integer_its_hex_or_its_name(
    text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["codes", text, "--json"]) == 0
    assert "LLM_TIMEOUT" in [row["name"] for row in json.loads(capsys.readouterr().out)]


def test_codes_by_integer_finds_exactly_that_code(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["codes", "507057", "--json"]) == 0
    assert [row["name"] for row in json.loads(capsys.readouterr().out)] == ["LLM_SUSPECT_REMOTE_ERROR"]


def test_codes_by_part_of_the_name_finds_every_code_containing_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["codes", "TIMEOUT", "--json"]) == 0
    names = {row["name"] for row in json.loads(capsys.readouterr().out)}
    assert names == {"LLM_TIMEOUT", "LLM_WAIT_PROCESS_TIMEOUT"}


def test_codes_source_column_says_status_table_or_reference(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["codes", "--json"]) == 0
    source = {row["name"]: row["source"] for row in json.loads(capsys.readouterr().out)}
    assert source["LLM_TIMEOUT"] == "reference"  # not in the user's status table
    assert source["LLM_LINK_BUSY"] == "status table"
    assert set(source.values()) == {"status table", "reference"}
    assert main(["codes", "LLM_TIMEOUT"]) == 0
    header, _, row = capsys.readouterr().out.splitlines()[:3]
    assert "source" in header.split()
    assert "reference" in row.split()
