"""pytest plugin (entry point ``datadist_sim``): a fresh world per test, the fake as ``llm_datadist``,
scenarios by marker, and failure reports that say how to reproduce the run.

Fixtures: ``sim_world`` (a ``SimWorld`` on the virtual clock, seeded from ``--datadist-seed``, active
for the test), ``llm_datadist`` (the fake installed as ``llm_datadist`` for the test; yields the module),
``sim_time`` (``time.sleep``/``time.monotonic`` on the world's clock), ``datadist_backend`` (each test
twice: ``sim``, and ``real`` where a real ``llm_datadist`` imports, skipped elsewhere).
Markers: ``@pytest.mark.datadist_scenario("flaky_link")`` or a TOML path (relative to the test file);
``@pytest.mark.datadist_config(link_busy="serialize")`` for ``SimConfig`` fields;
``@pytest.mark.datadist_explore(runs=N, faults=...)`` to run the body under N fault schedules.
Helpers: ``assert_llm_error(code)`` and ``assert_traced(world, op=..., outcome=...)``.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.machinery
import os
import random
import re
import shlex
import sys
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any, Generator, Iterator, List, Optional, Set, Tuple

import pytest

from datadist_sim import _log
from datadist_sim._assertions import TRACE_LINES, assert_llm_error, assert_traced
from datadist_sim._coverage import CodeCoverage
from datadist_sim._install import installed, is_installed
from datadist_sim._world.surface import SimConfig, SimWorld, VirtualClock
from datadist_sim.faults.plan import only_masked, unfired_notes
from datadist_sim.timepatch import patch_time

__all__ = ["DatadistBackend", "assert_llm_error", "assert_traced"]

SEED = pytest.StashKey[int]()
SEED_FROM = pytest.StashKey[str]()
ENV_SEED = "DATADIST_SIM_SEED"
"""The seed from the environment (the same variable ``datadist-sim exec`` hands its programs)."""
WORLD = pytest.StashKey[SimWorld]()
SCENARIO = pytest.StashKey[str]()
COVERAGE = pytest.StashKey[CodeCoverage]()


# -- configuration -------------------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("datadist-sim", "datadist-sim (simulated llm_datadist)")
    group.addoption(
        "--datadist-seed",
        type=int,
        default=None,
        metavar="N",
        help=f"seed of every test's SimWorld; wins over ${ENV_SEED} and the datadist_seed ini option "
        "(default: a random seed, printed in the header)",
    )
    parser.addini(
        "datadist_seed",
        f"seed of every test's SimWorld when neither --datadist-seed nor ${ENV_SEED} gives one",
        default="",
    )
    group.addoption(
        "--datadist-explore-out",
        default="datadist-explore",
        metavar="DIR",
        help="where a datadist_explore test writes the shrunk scenario of each distinct failure",
    )
    group.addoption(
        "--datadist-replay",
        default=None,
        metavar="FILE",
        help="run each datadist_explore test once, under FILE's rules and seed (replay a failure)",
    )
    group.addoption(
        "--datadist-reading",
        choices=("table", "code"),
        default=None,
        help="with --datadist-replay: what a timed-out transfer leaves of its link, 'table' breaks it (the "
        "status table), 'code' keeps it (hixl comm_entity.cc:536-556); default: the file's [config]",
    )
    group.addoption(
        "--datadist-trace-dir",
        default=None,
        metavar="DIR",
        help="write the whole trace of each failed test's SimWorld to DIR as JSON lines",
    )
    _add_coverage_options(group)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "datadist_config(**fields): SimConfig fields for the test's sim_world, e.g. link_busy='serialize'",
    )
    config.addinivalue_line(
        "markers",
        "datadist_scenario(name_or_path): load a bundled fault scenario, or a TOML file (relative to "
        "the test file), into the test's sim_world",
    )
    config.addinivalue_line(
        "markers",
        "datadist_explore(runs=100, faults=None, seed=None, max_rules=3, systematic=True): run the test "
        "body (it uses sim_world) under that many fault schedules; a failure is shrunk to a scenario file",
    )
    config.stash[SEED], config.stash[SEED_FROM] = _seed(config)
    _start_coverage(config)


def _seed(config: pytest.Config) -> Tuple[int, str]:
    """The run's seed and where it came from: the command line, then the environment, then the ini
    file, else a fresh random one (so CI pins it in one place and a nightly job sweeps it in another)."""
    option = config.getoption("datadist_seed")
    if option is not None:
        return int(option), "--datadist-seed"
    candidates = [
        (os.environ.get(ENV_SEED, ""), f"${ENV_SEED}"),
        (str(config.getini("datadist_seed")), "the datadist_seed ini option"),
    ]
    for text, source in candidates:
        if text.strip():
            try:
                return int(text.strip(), 0), source
            except ValueError:
                raise pytest.UsageError(f"{source} is not an integer: {text!r}") from None
    return random.SystemRandom().randrange(2**32), "a random draw"


def pytest_collection_modifyitems(items: List[pytest.Item]) -> None:
    """A test marked with a scenario gets a world to load it into, even without asking for ``sim_world``."""
    for item in items:
        names = getattr(item, "fixturenames", None)
        if item.get_closest_marker("datadist_scenario") and names is not None and "sim_world" not in names:
            names.append("sim_world")


def pytest_report_header(config: pytest.Config) -> str:
    return _seed_line(config)


def _seed_line(config: pytest.Config) -> str:
    seed = config.stash[SEED]
    return f"datadist-sim: seed {seed} (rerun with --datadist-seed={seed}) from {config.stash[SEED_FROM]}"


def pytest_sessionstart(session: pytest.Session) -> None:
    """The run's seed as a property of the junit XML test suite (``--junitxml``), where CI keeps it."""
    from _pytest.junitxml import xml_key  # the documented home of ``record_testsuite_property``'s store

    xml = session.config.stash.get(xml_key, None)
    if xml is not None:
        xml.add_global_property("datadist_seed", str(session.config.stash[SEED]))


# -- fixtures ------------------------------------------------------------------------------------


@pytest.fixture
def sim_world(request: pytest.FixtureRequest) -> Iterator[SimWorld]:
    """A fresh ``SimWorld`` on the virtual clock, active for the test; finalized instances after.

    A ``datadist_scenario`` file with a top-level ``seed`` seeds the world, and its ``[config]`` table
    sets ``SimConfig`` fields (an explore replay: the engine reading the failure needs)."""
    marker = request.node.get_closest_marker("datadist_scenario")
    path = None if marker is None else _scenario_of(marker, request.node)
    seed = request.config.stash[SEED]
    config = _config(request.node)
    if path is not None:
        from datadist_sim import scenarios

        loaded = scenarios.load(path)
        seed = seed if loaded.seed is None else loaded.seed
        for name, value in loaded.config.items():  # the engine reading an explore failure needs
            if not hasattr(config, name):
                pytest.fail(f"{request.node.nodeid}: {path}: SimConfig has no field {name!r}", pytrace=False)
            setattr(config, name, value)
    world = SimWorld(seed=seed, config=config)
    request.node.stash[WORLD] = world
    # the test's own property in a junit XML report: a scenario file's seed may differ from the run's
    request.node.user_properties.append(("datadist_seed", seed))
    with world.activate():
        if path is not None:
            world.faults.load(path)
        yield world
        _finalize(world)


class _Module(pytest.Module):
    """A test module that imports ``llm_datadist`` (or a client that does) at its top, on a host with no
    real one: imported again with the fake installed, so it collects, as explore and ``--replay`` load
    such a target. A host with a real ``llm_datadist`` imports it as written."""

    def _getobj(self) -> Any:
        try:
            return super()._getobj()  # type: ignore[no-untyped-call]
        except self.CollectError as exc:
            cause = exc.__cause__
            if not (isinstance(cause, ModuleNotFoundError) and cause.name == "llm_datadist"):
                raise
        with _fake_installed():
            return super()._getobj()  # type: ignore[no-untyped-call]


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makemodule(module_path: Path, parent: Any) -> Optional[pytest.Module]:
    if module_path.name == "__init__.py":
        return None
    module: pytest.Module = _Module.from_parent(parent, path=module_path)
    return module


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> Optional[bool]:
    """A ``datadist_explore`` test runs its body under many fault schedules (``explore.pytest_support``)."""
    if pyfuncitem.get_closest_marker("datadist_explore") is None:
        return None
    from datadist_sim.explore.pytest_support import run_marked

    return run_marked(pyfuncitem, pyfuncitem.config.stash[SEED], _config(pyfuncitem))


@pytest.fixture
def llm_datadist(sim_world: SimWorld) -> Iterator[ModuleType]:
    """The fake installed as ``llm_datadist`` (and ``llm_datadist_v1``) for the test; yields it.

    A client module imported inside the test gets the fake; instances join ``sim_world``.
    """
    with _fake_installed() as module:
        yield module


@contextlib.contextmanager
def _fake_installed() -> Iterator[ModuleType]:
    """The fake as ``llm_datadist``; on a host with a real one, shadowing it is what the test asked for."""
    before = set(sys.modules)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", r"datadist_sim\.install\(\) shadows the real llm_datadist")
        stack = contextlib.ExitStack()
        stack.enter_context(installed(force=True))
    try:
        with stack:
            yield importlib.import_module("llm_datadist")
    finally:
        _forget_clients(before)


def _forget_clients(before: Set[str]) -> None:
    """Drop modules first imported during the test that hold the fake, so a later test (``real``, or
    one without the fixture) imports them afresh instead of reusing them bound to the fake."""
    for name in [n for n in list(sys.modules) if n not in before and not n.startswith(_FAKE_PREFIXES)]:
        module = sys.modules.get(name)
        if module is not None and any(_is_fake(value) for value in list(vars(module).values())):
            del sys.modules[name]


_FAKE_PREFIXES = ("datadist_sim", "llm_datadist")


def _is_fake(value: object) -> bool:
    try:
        name = value.__name__ if isinstance(value, ModuleType) else getattr(value, "__module__", None)
    except Exception:
        return False
    return isinstance(name, str) and name.startswith("datadist_sim.llm_datadist")


@pytest.fixture
def sim_time(sim_world: SimWorld) -> Iterator[VirtualClock]:
    """``time.sleep``/``time.monotonic`` follow ``sim_world``'s clock for the test (``timepatch``)."""
    with patch_time(sim_world) as clock:
        yield clock


class DatadistBackend:
    """What ``datadist_backend`` yields: ``name`` ("sim" or "real"), the ``module``, the ``world`` (sim
    only); attribute access falls through to the module (``backend.LLMDataDist``)."""

    def __init__(self, name: str, module: ModuleType, world: Optional[SimWorld]) -> None:
        self.name = name
        self.module = module
        self.world = world

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.module, attr)

    def __repr__(self) -> str:
        return f"DatadistBackend({self.name!r})"


@pytest.fixture(params=["sim", "real"])
def datadist_backend(request: pytest.FixtureRequest) -> Iterator[DatadistBackend]:
    """Each test twice: against the fake, and against a real ``llm_datadist`` (skipped without one)."""
    if request.param == "real":
        yield DatadistBackend("real", _real_llm_datadist(), None)
        return
    world: SimWorld = request.getfixturevalue("sim_world")
    with _fake_installed() as module:
        yield DatadistBackend("sim", module, world)


def _real_llm_datadist() -> ModuleType:
    if is_installed():
        pytest.skip("the fake is installed as llm_datadist in this process")
    if importlib.machinery.PathFinder.find_spec("llm_datadist") is None:
        pytest.skip("no real llm_datadist is importable here (it needs CANN on an Ascend host)")
    try:
        return importlib.import_module("llm_datadist")
    except ImportError as exc:
        pytest.skip(f"the real llm_datadist does not import here: {exc}")


def _config(item: pytest.Item) -> SimConfig:
    marker = item.get_closest_marker("datadist_config")
    if marker is None:
        return SimConfig()
    try:
        return SimConfig(*marker.args, **marker.kwargs)
    except TypeError as exc:
        pytest.fail(f"{item.nodeid}: datadist_config: {exc}", pytrace=False)


def _scenario_of(marker: pytest.Mark, item: pytest.Item) -> str:
    if len(marker.args) != 1 or marker.kwargs:
        pytest.fail(f"{item.nodeid}: datadist_scenario takes one name or path", pytrace=False)
    name = str(marker.args[0])
    item.stash[SCENARIO] = name
    return _scenario_path(name, item)


def _scenario_path(name: str, item: pytest.Item) -> str:
    """A bundled name stays a name; a relative path is taken from the test file's directory first."""
    if not (name.endswith(".toml") or "/" in name or "\\" in name) or Path(name).is_absolute():
        return name
    beside = Path(str(item.path)).parent / name
    return str(beside) if beside.exists() else name


def _finalize(world: SimWorld) -> None:
    from datadist_sim.llm_datadist.v2.llm_datadist import finalize_all

    try:
        finalize_all(world)
    except Exception:  # a teardown failure here would hide the test's own outcome
        _log.logger.debug("finalizing the test world's instances failed", exc_info=True)


# -- failure report ------------------------------------------------------------------------------


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    world = item.stash.get(WORLD, None)
    if report.failed and world is not None:
        report.sections.append(("datadist-sim", _failure_section(item, world)))


def _failure_section(item: pytest.Item, world: SimWorld) -> str:
    lines = world.trace.lines(last=TRACE_LINES)
    return "\n".join(
        [
            f"seed: {world.seed}",
            f"scenario: {item.stash.get(SCENARIO, '(none)')}",
            f"simulated time: {world.now():.6f} s",
            f"last {len(lines)} of {world.trace.total} trace events:",
            *(f"  {line}" for line in lines),
            *(f"rule never fired: {note}" for note in unfired_notes(world.faults)),
            *(
                f"rule masked (matched, but another rule on the same call won): {rule!r}"
                for rule in only_masked(world.faults)
            ),
            *_trace_file(item, world),
            f"reproduce: pytest {shlex.quote(item.nodeid)} --datadist-seed={world.seed}",
        ]
    )


def _trace_file(item: pytest.Item, world: SimWorld) -> List[str]:
    """With ``--datadist-trace-dir``: the whole buffered trace as JSON lines, one file per failed test."""
    directory = item.config.getoption("datadist_trace_dir")
    if not directory:
        return []
    path = Path(directory) / (re.sub(r"[^A-Za-z0-9_.-]+", "_", item.nodeid).strip("_") + ".jsonl")
    path.parent.mkdir(parents=True, exist_ok=True)
    world.trace.to_jsonl(path)
    return [f"trace: {path}"]


# -- error-path coverage -------------------------------------------------------------------------


def _add_coverage_options(group: pytest.OptionGroup) -> None:
    group.addoption(
        "--datadist-coverage",
        action="store_true",
        default=False,
        help="end with a table of the status codes client code received (raised or returned), from which "
        "operations, and the documented conditions of the status table never exercised",
    )
    group.addoption(
        "--datadist-coverage-fail-under",
        type=int,
        default=None,
        metavar="N",
        help="fail the run when fewer than N distinct codes other than LLM_SUCCESS reached client code "
        "(implies --datadist-coverage)",
    )


def _start_coverage(config: pytest.Config) -> None:
    """Count from the first test on, in every world any test builds (``datadist_sim._coverage``)."""
    if config.getoption("datadist_coverage") or config.getoption("datadist_coverage_fail_under") is not None:
        config.stash[COVERAGE] = CodeCoverage().start()


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A run that passed fails when ``--datadist-coverage-fail-under`` is not met."""
    coverage = session.config.stash.get(COVERAGE, None)
    if coverage is None:
        return
    coverage.stop()
    fail_under = session.config.getoption("datadist_coverage_fail_under")
    if fail_under is not None and not coverage.meets(fail_under) and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if terminalreporter.stats.get("failed") or terminalreporter.stats.get("error"):
        # ``-q`` drops the header that names the seed; a failed run says it again at its end
        terminalreporter.write_line(_seed_line(config))
    coverage = config.stash.get(COVERAGE, None)
    if coverage is None:
        return
    terminalreporter.section("datadist-sim error-path coverage")
    terminalreporter.write_line(coverage.report(config.getoption("datadist_coverage_fail_under")))


def pytest_unconfigure(config: pytest.Config) -> None:
    coverage = config.stash.get(COVERAGE, None)
    if coverage is not None:
        coverage.stop()
