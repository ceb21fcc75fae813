"""The ``env`` fixture of the bad-input suites, and a summary of what the reliability suites explored
(the README's reliability figures come from here): headline counts always, each call's outcomes with -v."""

from __future__ import annotations

from typing import Any, Iterator

import pytest
from tests.reliability._bad_env import Env, make_env
from tests.reliability._common import PROFILE, STATS

from datadist_sim._world.current import activate
from datadist_sim.llm_datadist.v2.llm_datadist import finalize_all


@pytest.fixture
def env() -> Iterator[Env]:
    """A linked CacheManager-mode pair with caches of every kind (see ``_bad_env``)."""
    e = make_env()
    with activate(e.world):
        yield e
    finalize_all(e.world)
    assert e.world.memory.backed_bytes == 0


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not STATS:
        return
    terminalreporter.section(f"datadist-sim reliability ({PROFILE} profile)")
    verbose = terminalreporter.verbosity > 0
    for name, count in sorted(STATS.items()):
        if verbose or "->" not in name:
            terminalreporter.write_line(f"{name:>40}: {count:,}")
