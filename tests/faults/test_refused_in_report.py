"""A failing test's report (the pytest plugin) says why a rule never fired when the caller's mode
cannot give its code (``faults.engine_codes``)."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

STRICT = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:benchmark", "-p", "no:randomly")


def test_the_report_names_the_refusal(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")  # pytest-asyncio's warning
    pytester.makepyfile(
        """
        from datadist_sim import Fault

        def test_fails(llm_datadist, sim_world):
            sim_world.faults.add(Fault.timeout(op="allocate_cache"))
            dd = llm_datadist.LLMDataDist(llm_datadist.LLMRole.PROMPT, 5)
            dd.init({"ge.exec.deviceId": "0", "llm.EnableCacheManager": "1",
                     "llm.MemPoolConfig": '{"memory_size": 1048576}'})
            desc = llm_datadist.CacheDesc(1, [1, 8], llm_datadist.DataType.DT_FLOAT16)
            dd.cache_manager.allocate_cache(desc)
            assert False, "the allocation was not timed out"
        """
    )
    result = pytester.runpytest(*STRICT)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*rule never fired: Fault.timeout(op=('allocate_cache',)) "
            "(refused: allocate_cache cannot time out in v2 mode*"
        ]
    )
