"""explore with clients of the ``hixl`` engine API: it draws hixl codes from the hixl-engine rows, finds
a planted bug (a retry on a connection a timeout left unusable) and shrinks it to one rule, and never
fails a careful client, alone or beside an ``llm_datadist`` pair on the hixl backend in one world."""

from __future__ import annotations

from datadist_sim.explore import Options, explore
from datadist_sim.faults.actions import ACTIONS

CAREFUL = "tests.explore.hixl_clients:hixl_careful"
BUGGY = "tests.explore.hixl_clients:hixl_buggy"
MIXED = "tests.explore.hixl_clients:hixl_mixed"
HIXL_CODES = {"SUCCESS", "TIMEOUT", "FAILED", "NOT_CONNECTED", "RESOURCE_EXHAUSTED", "ALREADY_CONNECTED"}


def test_the_planted_hixl_bug_is_found_by_the_systematic_pass_and_shrunk_to_one_rule() -> None:
    outcome = explore(BUGGY, Options(runs=300, workers=1, seed=7))
    first = outcome.first_failure
    assert first is not None
    assert first.index < 10  # the ambiguous outcomes come first
    shrunk = outcome.shrunk
    assert shrunk is not None
    assert len(shrunk.schedule) == 1
    assert shrunk.schedule[0]["op"] == "hixl.transfer_sync"
    assert shrunk.signature == "RuntimeError"
    assert f"unhandled hixl code {503900} on the retry" in shrunk.failure


def test_a_careful_hixl_client_survives_the_systematic_pass_and_meets_only_hixl_codes() -> None:
    outcome = explore(CAREFUL, Options(runs=500, workers=1, seed=7))
    assert not outcome.baseline.failed
    assert len(outcome.results) == 500
    assert outcome.failures == []
    seen = {code for result in outcome.results for code in result.codes}
    assert seen <= HIXL_CODES
    assert {"TIMEOUT", "FAILED", "NOT_CONNECTED", "RESOURCE_EXHAUSTED"} <= seen


def test_a_careful_hixl_client_survives_swarm_runs_of_every_fault_kind() -> None:
    outcome = explore(CAREFUL, Options(runs=500, workers=1, seed=11, systematic=False))
    assert outcome.failures == []
    assert set(outcome.fired()) == set(ACTIONS)


def test_a_hixl_client_beside_llm_datadist_on_the_hixl_backend_survives_both_kinds_of_fault() -> None:
    outcome = explore(MIXED, Options(runs=300, workers=1, seed=16, systematic=False))
    assert outcome.failures == []
    seen = {code for result in outcome.results for code in result.codes}
    assert {"TIMEOUT", "FAILED"} <= seen  # the hixl engine's codes
    assert {"LLM_SUCCESS", "LLM_TIMEOUT"} <= seen  # and the llm_datadist pair's
