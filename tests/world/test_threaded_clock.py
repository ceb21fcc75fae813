"""Threaded clients on virtual time: waits are where threads meet.

A poll of a PREPARING communicator and a patched ``time.sleep`` wait on the clock; time moves on only
when every other live thread waits too, or has made no call in the world for ``autojump_threshold`` of
wall time. The tests use a generous threshold so that a loaded machine cannot make them flaky; they
assert simulated times only.
"""

from __future__ import annotations

import threading
import time
from typing import Dict, List, Tuple

import pytest
from tests.fabric.test_comm_link import RANK_TABLE

from datadist_sim import SimWorld, VirtualClock
from datadist_sim.llm_datadist.configs import LLMRole
from datadist_sim.llm_datadist.v2.llm_datadist import LLMDataDist, finalize_all
from datadist_sim.llm_datadist.v2.llm_types import RegisterMemStatus
from datadist_sim.timepatch import patch_time

PATIENT = 1.0
"""autojump_threshold of these tests' clocks: far above any scheduling delay, so results hold under load."""
NEVER = 3600.0
"""A threshold no test reaches: where the threads meet by waiting, it costs no wall time."""


def _instance(world: SimWorld, role: LLMRole, cluster_id: int) -> LLMDataDist:
    with world.activate():
        dd = LLMDataDist(role, cluster_id)
        dd.init({"ge.exec.deviceId": "0", "llm.EnableCacheManager": "1"})
    return dd


def _link_and_poll(
    dd: LLMDataDist, world: SimWorld, start_gate: threading.Event, out: Dict[int, Tuple[float, int]]
) -> None:
    """A connector's worker: link by rank table, then poll until the communicator leaves PREPARING."""
    start_gate.wait()
    comm_id = dd.link("threads", {1: 0, 2: 1}, RANK_TABLE)
    polls = 0
    while True:
        polls += 1
        status = dd.query_register_mem_status(comm_id)
        if status is not RegisterMemStatus.PREPARING:
            break
    assert status is RegisterMemStatus.OK
    out[dd.cluster_id] = (world.now(), polls)


def _two_threads_link(late_wall_s: float) -> Tuple[Dict[int, Tuple[float, int]], float]:
    """Prompt 1 and Decode 2 link from their own threads; the Decode's thread starts ``late_wall_s``
    of wall time after the Prompt's (it has not even joined while the Prompt polls)."""
    world = SimWorld(seed=3, clock=VirtualClock(autojump_threshold=PATIENT))
    prompt, decode = _instance(world, LLMRole.PROMPT, 1), _instance(world, LLMRole.DECODER, 2)
    out: Dict[int, Tuple[float, int]] = {}
    gates = [threading.Event(), threading.Event()]
    threads = [
        threading.Thread(target=_link_and_poll, args=(dd, world, gate, out))
        for dd, gate in zip((prompt, decode), gates)
    ]
    for thread in threads:
        thread.start()
    gates[0].set()
    time.sleep(late_wall_s)  # wall time: the Prompt's thread is polling meanwhile
    gates[1].set()
    for thread in threads:
        thread.join(60)
    finalize_all(world)
    return out, world.now()


def test_two_threads_that_link_by_rank_table_see_only_the_time_the_link_needs() -> None:
    out, _ = _two_threads_link(late_wall_s=0.2)
    setup = SimWorld().config.comm_setup_s
    # Both joined at time 0: the communicator is OK at comm_setup_s for both, however long (in wall
    # time) the Decode's thread took to join. Before, each Prompt poll moved time on by a second.
    assert {cluster: at for cluster, (at, _) in out.items()} == {1: setup, 2: setup}


def test_threaded_link_times_are_the_same_from_run_to_run() -> None:
    runs = [_two_threads_link(late_wall_s=late)[0] for late in (0.0, 0.05, 0.15)]
    times = [{cluster: at for cluster, (at, _) in run.items()} for run in runs]
    assert times[0] == times[1] == times[2]


def test_a_single_thread_still_jumps_a_poll_interval_per_poll() -> None:
    """One thread: a poll while a member is missing lets ``poll_interval_s`` pass at once, as before."""
    world = SimWorld(seed=3)
    decode = _instance(world, LLMRole.DECODER, 2)
    comm_id = decode.link("lonely", {1: 0, 2: 1}, RANK_TABLE)
    seen: List[float] = []
    for _ in range(3):
        assert decode.query_register_mem_status(comm_id) is RegisterMemStatus.PREPARING
        seen.append(world.now())
    assert seen == [1.0, 2.0, 3.0]
    finalize_all(world)


def test_a_waiter_waits_for_a_thread_that_is_still_active_and_jumps_when_it_waits_too() -> None:
    clock = VirtualClock(autojump_threshold=NEVER)
    woke: List[float] = []
    other = threading.Thread(target=lambda: (clock.wait_until(5.0), woke.append(clock.now())))
    clock.touch()  # this thread is active: the other thread's wait must not jump yet
    other.start()
    while not clock._waiting:  # the other thread has started to wait
        time.sleep(0.001)
    assert clock.now() == 0.0
    clock.wait_until(8.0)  # now both wait: time goes to 5 (the other wakes and ends), then to 8
    other.join(60)
    assert woke == [5.0]
    assert clock.now() == 8.0


def test_a_thread_quiet_for_the_threshold_no_longer_holds_time_back() -> None:
    clock = VirtualClock(autojump_threshold=0.01)
    parked = threading.Event()
    bystander = threading.Thread(target=parked.wait)  # alive, but never uses the world or its clock
    bystander.start()
    try:
        clock.wait_until(3.0)
    finally:
        parked.set()
        bystander.join(60)
    assert clock.now() == 3.0


def test_a_wait_ends_early_when_what_it_waits_for_happens() -> None:
    clock = VirtualClock(autojump_threshold=NEVER)
    done = threading.Event()
    helper = threading.Thread(target=lambda: (clock.touch(), done.set()))
    helper.start()
    clock.wait_until(10.0, wake=done.is_set)
    helper.join(60)
    assert clock.now() == 0.0


def test_threads_sleeping_under_the_time_patch_each_wake_at_their_own_deadline() -> None:
    world = SimWorld(clock=VirtualClock(autojump_threshold=PATIENT))
    wakes: Dict[str, List[float]] = {"a": [], "b": []}
    start = threading.Barrier(2)

    def sleeper(name: str, step: float, times: int) -> None:
        start.wait()
        for _ in range(times):
            time.sleep(step)
            wakes[name].append(world.now())

    with patch_time(world):
        threads = [
            threading.Thread(target=sleeper, args=("a", 1.0, 3)),
            threading.Thread(target=sleeper, args=("b", 1.5, 2)),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    assert wakes == {"a": [1.0, 2.0, 3.0], "b": [1.5, 3.0]}
    assert world.now() == 3.0


def test_autojump_threshold_must_not_be_negative() -> None:
    with pytest.raises(ValueError, match="autojump_threshold"):
        VirtualClock(autojump_threshold=-1.0)
