"""Opt-in time patch: a blocking client's time.sleep/time.monotonic follow the virtual clock."""

from __future__ import annotations

import threading
import time
import types

import pytest

from datadist_sim import RealClock, SimWorld
from datadist_sim.timepatch import is_patched, patch_time


def test_sleep_advances_the_world_clock() -> None:
    world = SimWorld()
    with patch_time(world):
        time.sleep(5.0)
        time.sleep(0.25)
    assert world.now() == pytest.approx(5.25)


def test_monotonic_follows_simulated_time_and_never_goes_back() -> None:
    world = SimWorld()
    with patch_time(world):
        start = time.monotonic()
        world.elapse(3.0)
        middle = time.monotonic()
        time.sleep(2.0)
        assert middle - start == pytest.approx(3.0)
        assert time.monotonic() - start == pytest.approx(5.0)
        assert time.monotonic_ns() // 1_000_000 == pytest.approx(time.monotonic() * 1000, abs=1)


def test_a_deadline_loop_runs_in_simulated_time() -> None:
    world = SimWorld()
    polls = 0
    with patch_time(world):
        deadline = time.monotonic() + 30.0
        while world.now() < 10.0 and time.monotonic() < deadline:
            polls += 1
            time.sleep(1.0)
    assert polls == 10
    assert world.now() == pytest.approx(10.0)


def test_everything_is_restored_after_the_block() -> None:
    originals = (time.sleep, time.monotonic, time.monotonic_ns)
    with patch_time(SimWorld()):
        assert is_patched()
        assert time.sleep is not originals[0]
    assert (time.sleep, time.monotonic, time.monotonic_ns) == originals
    assert not is_patched()


def test_restored_even_when_the_block_raises() -> None:
    original = time.sleep
    with pytest.raises(KeyError), patch_time(SimWorld()):
        raise KeyError("client bug")
    assert time.sleep is original


def test_names_bound_by_from_import_are_swapped_in_the_given_modules() -> None:
    client = types.ModuleType("client")
    client.sleep = time.sleep  # type: ignore[attr-defined]  # as `from time import sleep` would
    world = SimWorld()
    with patch_time(world, modules=[client]):
        client.sleep(7.0)  # type: ignore[attr-defined]
    assert world.now() == pytest.approx(7.0)
    assert client.sleep is time.sleep  # type: ignore[attr-defined]


def test_each_sleeping_thread_sees_its_full_sleep() -> None:
    world = SimWorld()
    slept: list[float] = []

    def client() -> None:
        start = time.monotonic()
        time.sleep(2.0)
        slept.append(time.monotonic() - start)

    with patch_time(world):
        threads = [threading.Thread(target=client) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert len(slept) == 4
    assert min(slept) >= 2.0 - 1e-9
    assert world.now() <= 8.0


def test_the_current_world_is_the_default_target() -> None:
    world = SimWorld()
    with world.activate(), patch_time() as clock:
        time.sleep(1.5)
    assert clock is world.clock
    assert world.now() == pytest.approx(1.5)


def test_a_world_on_the_real_clock_is_refused() -> None:
    with pytest.raises(TypeError, match="virtual clock"), patch_time(SimWorld(clock=RealClock())):
        pass


def test_blocks_do_not_nest() -> None:
    with patch_time(SimWorld()), pytest.raises(RuntimeError, match="already patched"):  # noqa: SIM117
        with patch_time(SimWorld()):
            pass


def test_negative_sleep_is_rejected_like_time_sleep() -> None:
    with patch_time(SimWorld()), pytest.raises(ValueError, match="non-negative"):
        time.sleep(-1)
