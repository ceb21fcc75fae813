"""The ``datadist_explore`` marker (through pytester): a test body explored under many schedules, its
first failure shrunk to a scenario file, the replay option, and a scenario file's seed seeding
``sim_world``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

STRICT = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest", "--strict-markers", "-W", "error")

TESTS = """
import pytest
from tests.explore import clients

@pytest.mark.datadist_explore(runs=120, faults="delay,timeout,fail")
def test_buggy(sim_world, llm_datadist):
    clients.buggy(sim_world)

@pytest.mark.datadist_explore(runs=60)
def test_careful(sim_world, llm_datadist):
    clients.careful(sim_world)
"""


@pytest.fixture(autouse=True)
def _quiet_config(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")


def _explored(pytester: pytest.Pytester, out: Path) -> Path:
    pytester.makepyfile(test_connector=TESTS)
    result = pytester.runpytest(*STRICT, f"--datadist-explore-out={out}")
    result.assert_outcomes(passed=1, failed=1)
    text = result.stdout.str()
    assert "shrunk to 1 rule(s)" in text
    match = re.search(r"--datadist-replay=(\S+)", text)
    assert match is not None, text
    path = Path(match.group(1))
    assert path.parent == out
    assert path.name.startswith("test_buggy-")
    return path


def test_marked_test_fails_with_the_shrunk_scenario_and_its_replay_command(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    path = _explored(pytester, tmp_path / "found")
    assert path.is_file()
    assert "[[rules]]" in path.read_text()


def test_replay_option_runs_the_test_once_under_the_file_and_fails_only_the_buggy_one(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    path = _explored(pytester, tmp_path / "found")
    replayed = pytester.runpytest(*STRICT, f"--datadist-replay={path}")
    replayed.assert_outcomes(passed=1, failed=1)
    assert "still fails" in replayed.stdout.str()


def test_scenario_marker_seeds_the_world_with_the_file_seed(pytester: pytest.Pytester) -> None:
    pytester.makefile(
        ".toml", found='seed = 4242\n\n[[rules]]\naction = "fail"\ncode = "LLM_FAILED"\nop = "pull_cache"\n'
    )
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.datadist_scenario("found.toml")
        def test_seeded(sim_world):
            assert sim_world.seed == 4242
            assert len(sim_world.faults.rules) == 1
        """
    )
    pytester.runpytest(*STRICT, "--datadist-seed=1").assert_outcomes(passed=1)


def test_marker_without_sim_world_is_an_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.datadist_explore(runs=3)
        def test_plain():
            pass
        """
    )
    result = pytester.runpytest(*STRICT)
    result.assert_outcomes(failed=1)
    assert "needs the sim_world fixture" in result.stdout.str()


def test_a_test_module_importing_llm_datadist_at_its_top_collects_and_is_explored(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        """
        import llm_datadist
        import pytest

        @pytest.mark.datadist_explore(runs=5)
        def test_decode(sim_world):
            dd = llm_datadist.LLMDataDist(llm_datadist.LLMRole.DECODER, 2)
            dd.init({"ge.exec.deviceId": "0", "llm.EnableCacheManager": "1"})
            dd.finalize()
        """
    )
    pytester.runpytest(*STRICT).assert_outcomes(passed=1)


def test_the_suggested_scenario_path_resolves_from_the_test_file_wherever_pytest_runs(
    pytester: pytest.Pytester,
) -> None:
    tests = pytester.mkpydir("sub")
    (tests / "test_connector.py").write_text(TESTS.replace("def test_careful", "def _careful"))
    result = pytester.runpytest(*STRICT, "sub")  # the file goes to ./datadist-explore, not beside the test
    result.assert_outcomes(failed=1)
    match = re.search(r"datadist_scenario\('([^']+)'\)", result.stdout.str())
    assert match is not None, result.stdout.str()
    suggested = match.group(1)
    assert (tests / suggested).resolve().is_file()
    (tests / "test_regression.py").write_text(
        "import pytest\nfrom tests.explore import clients\n\n"
        f"@pytest.mark.datadist_scenario({suggested!r})\n"
        "def test_again(sim_world, llm_datadist):\n    assert sim_world.faults.rules\n"
    )
    elsewhere = pytester.mkdir("elsewhere")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(elsewhere)
        again = pytester.runpytest(*STRICT, str(tests / "test_regression.py"))
    again.assert_outcomes(passed=1)
