"""The examples in docs/usage.md run as written."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Dict

import pytest
import pytest_asyncio.plugin

pytest_plugins = ["pytester"]

DOC = Path(__file__).resolve().parents[2] / "docs" / "usage.md"
STRICT = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:benchmark")
STRICT += ("--strict-markers", "-W", "error")
LOOP_FACTORY_HOOK = hasattr(
    getattr(pytest_asyncio.plugin, "PytestAsyncioSpecs", None), "pytest_asyncio_loop_factories"
)
"""pytest-asyncio 1.4 added the hook (and deprecated overriding ``event_loop_policy``)."""


def _examples() -> Dict[str, str]:
    blocks = re.findall(r"<!-- file: (\S+) -->\n```python\n(.*?)```", DOC.read_text(), flags=re.DOTALL)
    return dict(blocks)


@pytest.fixture
def examples(pytester: pytest.Pytester) -> Dict[str, str]:
    pytester.makeini("[pytest]\nasyncio_mode = strict\nasyncio_default_fixture_loop_scope = function\n")
    return _examples()


def test_the_doc_names_its_examples() -> None:
    assert set(_examples()) == {
        "my_connector.py",
        "test_my_connector.py",
        "async_client.py",
        "conftest.py",
        "conftest_before_1_4.py",
        "test_async_backoff.py",
    }


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_connector_test_passes_under_the_flaky_link_scenario(
    pytester: pytest.Pytester, examples: Dict[str, str], seed: int
) -> None:
    for name in ("my_connector.py", "test_my_connector.py"):
        (pytester.path / name).write_text(examples[name])
    pytester.syspathinsert()
    result = pytester.runpytest(*STRICT, f"--datadist-seed={seed}")
    result.assert_outcomes(passed=1)


def test_the_async_test_runs_on_the_virtual_loop(pytester: pytest.Pytester, examples: Dict[str, str]) -> None:
    conftest = examples["conftest.py" if LOOP_FACTORY_HOOK else "conftest_before_1_4.py"]
    (pytester.path / "conftest.py").write_text(conftest)
    (pytester.path / "test_async_backoff.py").write_text(examples["test_async_backoff.py"])
    # before 1.4, pytest-asyncio leaves a loop behind for the process that ran it: keep that out of ours
    run = pytester.runpytest if LOOP_FACTORY_HOOK else pytester.runpytest_subprocess
    run(*STRICT).assert_outcomes(passed=1)


def test_the_async_client_prints_what_the_doc_says(
    pytester: pytest.Pytester, examples: Dict[str, str]
) -> None:
    script = pytester.path / "async_client.py"
    script.write_text(examples["async_client.py"])
    result = pytester.run(sys.executable, str(script))
    assert result.ret == 0, result.stderr.str()
    assert result.stdout.lines == [
        "t= 1.00s link_clusters -> LLM_LINK_FAILED",
        "t= 3.00s link_clusters -> LLM_LINK_FAILED",
        "t= 6.00s link_clusters -> LLM_LINK_FAILED",
        "t=10.05s link_clusters -> LLM_SUCCESS",
        "10.05 simulated seconds",
    ]
