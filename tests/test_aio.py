"""asyncio face: awaitable calls that leave the loop free, and a loop on the world's virtual clock."""

from __future__ import annotations

import asyncio
import sys
import threading
from typing import List, Tuple

import pytest
import pytest_asyncio.plugin

from datadist_sim import RealClock, SimConfig, SimWorld, aio
from datadist_sim.llm_datadist import LLMClusterInfo, LLMDataDist, LLMRole, LLMStatusCode

pytest_plugins = ["pytester"]
LOOP_FACTORY_HOOK = hasattr(
    getattr(pytest_asyncio.plugin, "PytestAsyncioSpecs", None), "pytest_asyncio_loop_factories"
)
"""pytest-asyncio 1.4 added the loop-factory hook; before it, the ``event_loop_policy`` fixture is the way."""

PROMPT, DECODE = 1, 2


def _cluster_info(port: int = 26000) -> LLMClusterInfo:
    info = LLMClusterInfo()
    info.remote_cluster_id = PROMPT
    info.append_local_ip_info("192.168.2.1", 0)
    info.append_remote_ip_info("192.168.1.1", port)
    return info


def _instance(role: LLMRole, cluster_id: int, listen: str = "", *, v2: bool = True) -> LLMDataDist:
    dd = LLMDataDist(role, cluster_id)
    options = {"ge.exec.deviceId": "0", "llm.EnableCacheManager": "1" if v2 else "0"}
    if listen:
        options["llm.listenIpInfo"] = listen
    dd.init(options)
    return dd


def test_asyncio_sleep_advances_simulated_time_not_wall_time() -> None:
    world = SimWorld()

    async def main() -> float:
        await asyncio.sleep(3600.0)
        return asyncio.get_running_loop().time()

    assert aio.run(main(), world=world) == pytest.approx(3600.0)
    assert world.now() == pytest.approx(3600.0)


def test_timers_fire_in_simulated_time_order() -> None:
    world = SimWorld()
    woke: List[Tuple[str, float]] = []

    async def sleeper(name: str, seconds: float) -> None:
        await asyncio.sleep(seconds)
        woke.append((name, world.now()))

    async def main() -> None:
        await asyncio.gather(sleeper("c", 3.0), sleeper("a", 1.0), sleeper("b", 2.0))

    aio.run(main(), world=world)
    assert [name for name, _ in woke] == ["a", "b", "c"]
    assert [t for _, t in woke] == pytest.approx([1.0, 2.0, 3.0])


def test_wait_for_times_out_at_the_simulated_deadline() -> None:
    world = SimWorld()

    async def main() -> None:
        await asyncio.wait_for(asyncio.sleep(10.0), timeout=2.5)

    with pytest.raises(asyncio.TimeoutError):
        aio.run(main(), world=world)
    assert world.now() == pytest.approx(2.5)


def test_to_thread_leaves_the_loop_free_while_the_call_blocks() -> None:
    released = threading.Event()

    def blocking_call() -> Tuple[bool, int]:
        return released.wait(5.0), threading.get_ident()

    async def main() -> Tuple[bool, int]:
        call = asyncio.ensure_future(aio.to_thread(blocking_call))
        await asyncio.sleep(0)
        released.set()  # only possible because the call is not running on the loop's thread
        return await call

    got, thread = aio.run(main(), world=SimWorld())
    assert got is True
    assert thread != threading.get_ident()


def test_wrapped_instance_links_and_the_link_time_is_simulated() -> None:
    world = SimWorld(config=SimConfig(link_setup_s=0.05))

    async def main() -> Tuple[LLMStatusCode, List[LLMStatusCode]]:
        await aio.to_thread(_instance, LLMRole.PROMPT, PROMPT, "192.168.1.1:26000")
        decode = aio.wrap(await aio.to_thread(_instance, LLMRole.DECODER, DECODE))
        ret, rets = await decode.link_clusters([_cluster_info()], 5000)
        return ret, rets

    with world.activate():
        ret, rets = aio.run(main())
    assert ret == LLMStatusCode.LLM_SUCCESS
    assert rets == [LLMStatusCode.LLM_SUCCESS]
    assert world.is_linked(PROMPT, DECODE)
    assert world.now() == pytest.approx(0.05, abs=0.01)


def test_async_backoff_client_waits_in_simulated_time_for_a_late_prompt() -> None:
    """The Prompt comes up at t=8 s; the Decode client retries with 1, 2, 4, ... s of asyncio.sleep."""
    world = SimWorld()
    attempts: List[Tuple[float, str]] = []

    async def start_prompt_later() -> None:
        await asyncio.sleep(8.0)
        await aio.to_thread(_instance, LLMRole.PROMPT, PROMPT, "192.168.1.1:26000")

    async def client() -> None:
        decode = aio.wrap(await aio.to_thread(_instance, LLMRole.DECODER, DECODE))
        backoff = 1.0
        while True:
            _, rets = await decode.link_clusters([_cluster_info()], 1000)
            attempts.append((world.now(), rets[0].name))
            if rets[0] == LLMStatusCode.LLM_SUCCESS:
                return
            await asyncio.sleep(backoff)
            backoff *= 2

    async def main() -> None:
        await asyncio.gather(start_prompt_later(), client())

    with world.activate():
        aio.run(main())
    outcomes = [name for _, name in attempts]
    assert outcomes[-1] == "LLM_SUCCESS"
    assert set(outcomes[:-1]) == {"LLM_LINK_FAILED"}
    # each failed attempt waits out its 1 s timeout: failures at 1, 3 and 6 s; the next try, at 10 s, links
    assert [round(t, 2) for t, _ in attempts] == [1.0, 3.0, 6.0, 10.05]


def test_a_world_on_the_real_clock_is_refused() -> None:
    with pytest.raises(TypeError, match="virtual clock"):
        aio.VirtualTimeEventLoop(SimWorld(clock=RealClock()))


def test_the_policy_makes_virtual_time_loops() -> None:
    world = SimWorld()
    loop = aio.event_loop_policy(world).new_event_loop()
    try:
        assert isinstance(loop, aio.VirtualTimeEventLoop)
        assert loop.clock is world.clock
    finally:
        loop.close()


def test_wrapped_instance_gives_an_awaitable_cache_manager_and_real_bytes_arrive() -> None:
    import numpy as np

    from datadist_sim import tensor_views
    from datadist_sim.llm_datadist import CacheDesc, CacheKey, DataType

    world = SimWorld()

    async def main() -> bool:
        listen = "192.168.1.1:26000"
        prompt = aio.wrap(await aio.to_thread(_instance, LLMRole.PROMPT, PROMPT, listen, v2=False))
        decode = aio.wrap(await aio.to_thread(_instance, LLMRole.DECODER, DECODE, v2=False))
        await decode.link_clusters([_cluster_info()], 5000)
        desc = CacheDesc(1, [2, 8], DataType.DT_FLOAT16)
        key = CacheKey(prompt_cluster_id=PROMPT, req_id=1, model_id=0)
        src = await prompt.kv_cache_manager.allocate_cache(desc, [key])
        tensor_views(src)[0][0] = np.arange(8)  # batch 0 holds the request's KV
        dst = await decode.kv_cache_manager.allocate_cache(desc)
        await decode.kv_cache_manager.pull_cache(key, dst, batch_index=1)
        return bool(np.array_equal(tensor_views(dst)[0][1], np.arange(8)))

    with world.activate():
        assert aio.run(main()) is True


def test_wrap_passes_plain_attributes_through() -> None:
    class Thing:
        size = 3

    assert aio.wrap(Thing()).size == 3


def test_pytest_asyncio_runs_a_test_on_the_sim_worlds_virtual_clock(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nasyncio_mode = strict\nasyncio_default_fixture_loop_scope = function\n")
    if LOOP_FACTORY_HOOK:
        conftest = """
            from datadist_sim.aio import VirtualTimeEventLoop

            def pytest_asyncio_loop_factories(config, item):
                return {"virtual": VirtualTimeEventLoop}
            """
    else:
        conftest = """
            import pytest
            from datadist_sim import aio

            @pytest.fixture(scope="session")
            def event_loop_policy():
                return aio.event_loop_policy()
            """
    pytester.makeconftest(conftest)
    pytester.makepyfile(
        """
        import asyncio
        import pytest
        from datadist_sim.aio import VirtualTimeEventLoop

        @pytest.mark.asyncio
        async def test_backoff(sim_world):
            loop = asyncio.get_running_loop()
            assert isinstance(loop, VirtualTimeEventLoop)
            assert loop.clock is sim_world.clock
            await asyncio.sleep(30.0)
            assert sim_world.now() == 30.0
        """
    )
    # before 1.4, pytest-asyncio leaves a loop behind for the process that ran it: keep that out of ours
    run = pytester.runpytest if LOOP_FACTORY_HOOK else pytester.runpytest_subprocess
    result = run("-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-W", "error")
    result.assert_outcomes(passed=1)


@pytest.mark.skipif(sys.version_info < (3, 11), reason="asyncio.Runner is new in 3.11")
def test_the_loop_class_is_a_loop_factory_for_asyncio_runner() -> None:
    world = SimWorld()
    with world.activate(), asyncio.Runner(loop_factory=aio.VirtualTimeEventLoop) as runner:
        runner.run(asyncio.sleep(42.0))
    assert world.now() == pytest.approx(42.0)
