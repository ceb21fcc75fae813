"""The pytest plugin, run through pytester: seed, fixtures, scenario marker, failure report, backends."""

from __future__ import annotations

import re

import pytest

import datadist_sim.llm_datadist
import datadist_sim.llm_datadist_v1
import datadist_sim.pytest_plugin
from datadist_sim import SimWorld

pytest_plugins = ["pytester"]

STRICT = (
    "-p",
    "no:cacheprovider",
    "-p",
    "no:hypothesispytest",
    "-p",
    "no:benchmark",
    "--strict-markers",
    "-W",
    "error",
)
HAS_SCENARIOS = hasattr(getattr(SimWorld(), "faults", None), "load")


@pytest.fixture(autouse=True)
def _quiet_config(pytester: pytest.Pytester) -> None:
    """The inner runs' own config: pytest-asyncio warns (an error under -W error) when this is unset."""
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")


def _seed_in_header(stdout: str) -> int:
    match = re.search(r"datadist-sim: seed (\d+) \(rerun with --datadist-seed=\1\)", stdout)
    assert match is not None, stdout
    return int(match.group(1))


def test_the_entry_point_registers_the_plugin(pytestconfig: pytest.Config) -> None:
    assert pytestconfig.pluginmanager.get_plugin("datadist_sim") is datadist_sim.pytest_plugin


def test_seed_option_seeds_every_world_and_the_header_shows_it(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        def test_a(sim_world):
            assert sim_world.seed == 42
        def test_b(sim_world):
            assert sim_world.seed == 42
        """
    )
    result = pytester.runpytest(*STRICT, "--datadist-seed=42")
    result.assert_outcomes(passed=2)
    assert _seed_in_header(result.stdout.str()) == 42


def test_default_seed_is_random_and_printed(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        def test_a(sim_world):
            print(f"WORLD-SEED={sim_world.seed}")
        """
    )
    seeds = []
    for _ in range(2):
        result = pytester.runpytest(*STRICT, "-s")
        result.assert_outcomes(passed=1)
        header = _seed_in_header(result.stdout.str())
        result.stdout.fnmatch_lines([f"*WORLD-SEED={header}*"])
        seeds.append(header)
    assert seeds[0] != seeds[1]  # two draws from 2**32 seeds


def test_sim_world_is_fresh_active_and_virtual_per_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import datadist_sim

        seen = []

        def test_first(sim_world):
            assert datadist_sim.current_world() is sim_world
            assert isinstance(sim_world.clock, datadist_sim.VirtualClock)
            sim_world.elapse(100.0)
            seen.append(sim_world)

        def test_second(sim_world):
            assert sim_world is not seen[0]
            assert sim_world.now() == 0.0
            assert datadist_sim.current_world() is sim_world

        def test_after():
            assert datadist_sim.current_world() is datadist_sim.default_world()
        """
    )
    pytester.runpytest(*STRICT).assert_outcomes(passed=3)


def test_llm_datadist_fixture_gives_a_client_module_the_fake_for_the_test_only(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        connector="""
        import llm_datadist

        def start_prompt(cluster_id):
            dd = llm_datadist.LLMDataDist(llm_datadist.LLMRole.PROMPT, cluster_id)
            dd.init({"ge.exec.deviceId": "0", "llm.listenIpInfo": "10.0.0.1:26000"})
            return dd
        """,
        test_connector="""
        import importlib
        import sys

        def test_client_gets_the_fake(llm_datadist, sim_world):
            connector = importlib.import_module("connector")
            assert connector.llm_datadist is llm_datadist
            assert llm_datadist.__name__ == "datadist_sim.llm_datadist"
            connector.start_prompt(7)
            assert [n.cluster_id for n in sim_world.nodes] == [7]
            import llm_datadist_v1  # the v1 face comes with it

        def test_uninstalled_after():
            assert "llm_datadist" not in sys.modules
            assert "llm_datadist_v1" not in sys.modules
        """,
    )
    pytester.runpytest(*STRICT).assert_outcomes(passed=2)


def test_client_modules_bound_to_the_fake_are_forgotten_after_the_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        connector="from llm_datadist import LLMDataDist\n",
        helper="VALUE = 1\n",
        test_forget="""
        import sys

        def test_imports(llm_datadist):
            import connector
            import helper
            assert connector.LLMDataDist is llm_datadist.LLMDataDist

        def test_after():
            assert "connector" not in sys.modules  # a real-backend test would import it afresh
            assert "helper" in sys.modules  # nothing of the fake in it: kept
        """,
    )
    pytester.runpytest(*STRICT).assert_outcomes(passed=2)


def test_instances_are_finalized_after_the_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        worlds = []

        def test_start(llm_datadist, sim_world):
            dd = llm_datadist.LLMDataDist(llm_datadist.LLMRole.PROMPT, 1)
            dd.init({"ge.exec.deviceId": "0", "llm.listenIpInfo": "10.0.0.1:26000"})
            worlds.append(sim_world)

        def test_then():
            assert worlds[0].nodes == ()
            assert worlds[0].listeners == {}
        """
    )
    pytester.runpytest(*STRICT).assert_outcomes(passed=2)


def test_markers_are_registered_for_strict_markers(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest(*STRICT, "--markers")
    result.stdout.fnmatch_lines(
        ["@pytest.mark.datadist_config(**fields):*", "@pytest.mark.datadist_scenario(name_or_path):*"]
    )


def test_config_marker_sets_the_worlds_simconfig(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.datadist_config(link_busy="serialize", v2_cluster_limit=True)
        def test_configured(sim_world):
            assert sim_world.config.link_busy == "serialize"
            assert sim_world.config.v2_cluster_limit is True

        def test_default(sim_world):
            assert sim_world.config.link_busy == "reject"

        @pytest.mark.datadist_config(no_such_field=1)
        def test_misspelt(sim_world):
            pass
        """
    )
    result = pytester.runpytest(*STRICT)
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["*datadist_config: *no_such_field*"])


@pytest.mark.skipif(not HAS_SCENARIOS, reason="scenario loading (world.faults.load) has not landed")
def test_scenario_marker_loads_a_bundled_scenario(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.datadist_scenario("flaky_link")
        def test_flaky(sim_world):
            rules = sim_world.faults.rules
            assert [r.action for r in rules] == ["timeout"]
            assert rules[0].probability == 0.15

        def test_unmarked(sim_world):
            assert sim_world.faults.rules == []
        """
    )
    pytester.runpytest(*STRICT).assert_outcomes(passed=2)


@pytest.mark.skipif(not HAS_SCENARIOS, reason="scenario loading (world.faults.load) has not landed")
def test_scenario_marker_alone_brings_a_world_with_the_scenario(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest
        import datadist_sim

        @pytest.mark.datadist_scenario("flaky_link")
        def test_flaky():
            world = datadist_sim.current_world()
            assert world is not datadist_sim.default_world()
            assert [r.action for r in world.faults.rules] == ["timeout"]
        """
    )
    pytester.runpytest(*STRICT).assert_outcomes(passed=1)


@pytest.mark.skipif(not HAS_SCENARIOS, reason="scenario loading (world.faults.load) has not landed")
def test_scenario_marker_takes_a_path_beside_the_test_file(pytester: pytest.Pytester) -> None:
    pytester.mkdir("scenarios")
    (pytester.path / "scenarios" / "mine.toml").write_text(
        'name = "mine"\n\n[[rules]]\naction = "fail"\ncode = "LLM_TIMEOUT"\nop = "pull_cache"\nfirst = 2\n'
    )
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.datadist_scenario("scenarios/mine.toml")
        def test_mine(sim_world):
            (rule,) = sim_world.faults.rules
            assert (rule.action, rule.code.name, rule.first) == ("fail", "LLM_TIMEOUT", 2)
        """
    )
    pytester.runpytest(*STRICT).assert_outcomes(passed=1)


def test_failure_report_shows_seed_trace_and_the_reproducing_command(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_report="""
        def test_fails(llm_datadist, sim_world):
            dd = llm_datadist.LLMDataDist(llm_datadist.LLMRole.PROMPT, 5)
            dd.init({"ge.exec.deviceId": "0", "llm.listenIpInfo": "10.0.0.1:26000"})
            sim_world.elapse(2.5)
            assert dd.cluster_id == 6

        def test_passes(sim_world):
            pass

        def test_fails_without_a_world():
            assert 1 == 2
        """
    )
    result = pytester.runpytest(*STRICT, "--datadist-seed=7")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*- datadist-sim -*",
            "seed: 7",
            "scenario: (none)",
            "simulated time: 2.500000 s",
            "last * trace events:",
            "*5*init*",
            "reproduce: pytest test_report.py::test_fails --datadist-seed=7",
        ]
    )
    assert result.stdout.str().count("reproduce: pytest") == 1


def test_trace_dir_keeps_the_whole_trace_of_each_failed_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_traced="""
        import pytest

        @pytest.mark.parametrize("n", [1, 2])
        def test_fails(sim_world, n):
            for i in range(30):
                sim_world.record(None, "step", "ok", str(i))
            assert n == 0

        def test_passes(sim_world):
            sim_world.record(None, "step", "ok")
        """
    )
    result = pytester.runpytest(*STRICT, "--datadist-trace-dir=traces")
    result.assert_outcomes(passed=1, failed=2)
    files = sorted(p.name for p in (pytester.path / "traces").iterdir())
    assert files == ["test_traced.py_test_fails_1.jsonl", "test_traced.py_test_fails_2.jsonl"]
    lines = (pytester.path / "traces" / files[0]).read_text().splitlines()
    assert len(lines) == 30  # all of it, where the report shows the last 20
    result.stdout.fnmatch_lines(["trace: traces/test_traced.py_test_fails_1.jsonl"])


@pytest.mark.skipif(not HAS_SCENARIOS, reason="scenario loading (world.faults.load) has not landed")
def test_failure_report_names_the_scenario(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.datadist_scenario("flaky_link")
        def test_fails(sim_world):
            assert False
        """
    )
    result = pytester.runpytest(*STRICT, "--datadist-seed=3")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["scenario: flaky_link", "*fault.add*"])


def test_backend_fixture_runs_sim_and_skips_real_cleanly(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        def test_link_codes(datadist_backend):
            assert datadist_backend.name == "sim"
            assert datadist_backend.world is not None
            assert datadist_backend.LLMStatusCode.LLM_SUCCESS == 0
        """
    )
    result = pytester.runpytest(*STRICT, "-rs", "-v")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(
        [
            "*::test_link_codes?sim? PASSED*",
            "*::test_link_codes?real? SKIPPED*",
            "SKIPPED*no real llm_datadist is importable*",
        ]
    )


def test_backend_fixture_uses_a_real_llm_datadist_where_one_imports(pytester: pytest.Pytester) -> None:
    real = pytester.mkpydir("llm_datadist")
    (real / "__init__.py").write_text("REAL = True\n")
    pytester.syspathinsert()
    pytester.makepyfile(
        """
        def test_which(datadist_backend):
            assert getattr(datadist_backend, "REAL", False) == (datadist_backend.name == "real")

        def test_the_fixture_shadows_it_for_the_test(llm_datadist):
            assert llm_datadist.__name__ == "datadist_sim.llm_datadist"
        """
    )
    result = pytester.runpytest(*STRICT, "-v")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*::test_which?sim? PASSED*", "*::test_which?real? PASSED*"])
