"""Faults that tell the truth: a peer that dies mid-transfer, poisoned memory, and
what every later call says about a link a timeout broke."""

from __future__ import annotations

import random
import threading
from typing import Callable, Iterator, List, Tuple

import numpy as np
import pytest
from tests.data.conftest import D_ID, P_ID, pair
from tests.data.test_cache_manager_v2 import desc
from tests.fabric.conftest import DECODE_IP, PROMPT_IP, info

from datadist_sim import Fault, SimWorld
from datadist_sim._status_v1 import LLM_ERRORS, as_code
from datadist_sim._world.address_space import AddressSpace, tensor_views
from datadist_sim._world.clock import VirtualClock
from datadist_sim._world.current import activate
from datadist_sim._world.world import SimConfig
from datadist_sim.llm_datadist.status import LLMStatusCode as S
from datadist_sim.llm_datadist.v2.llm_datadist import LLMDataDist, finalize_all
from datadist_sim.llm_datadist.v2.llm_types import Cache, CacheKey, KvCache

PULL_S = 0.26
"""How long the test pull takes (bytes over bandwidth plus one rtt)."""


def code_of(call: Callable[[], object]) -> S:
    try:
        call()
    except LLM_ERRORS as exc:  # a KvCacheManager raises the v1 package's class: its code by name
        return as_code(exc.status_code)
    return S.LLM_SUCCESS


def views(world: SimWorld, cache: object) -> List[np.ndarray]:
    """The tensors of a v2 ``Cache`` or a v1 ``KvCache`` as numpy views."""
    assert isinstance(cache, (Cache, KvCache))
    addrs = cache.tensor_addrs if isinstance(cache, Cache) else cache.per_device_tensor_addrs[0]
    return tensor_views(world.memory, addrs, cache.cache_desc.shape, np.float16)


def fill(world: SimWorld, cache: object) -> None:
    rng = np.random.default_rng(0)
    for v in views(world, cache):
        v[...] = rng.standard_normal(v.shape).astype(np.float16) + 3


def _setup(world: SimWorld, v2: bool) -> Tuple[LLMDataDist, LLMDataDist, object, Callable[[], S]]:
    """A linked pair, one Prompt key holding random bytes, an empty Decode cache, and a pull that
    takes ``PULL_S`` of simulated time."""
    p, d = pair(v2=v2)
    manager_p = p.cache_manager if v2 else p.kv_cache_manager
    manager_d = d.cache_manager if v2 else d.kv_cache_manager
    src = manager_p.allocate_cache(desc(batch=1), [CacheKey(P_ID, 1)])
    fill(world, src)
    dst = manager_d.allocate_cache(desc(batch=1))
    nbytes = sum(v.nbytes for v in views(world, src))
    world.config.bandwidth_bytes_per_s = nbytes / (PULL_S - world.config.message_rtt_s)
    return p, d, dst, lambda: code_of(lambda: manager_d.pull_cache(CacheKey(P_ID, 1), dst))


def _timeout(v2: bool) -> S:
    return S.LLM_TIMEOUT if v2 else S.LLM_WAIT_PROCESS_TIMEOUT


@pytest.mark.parametrize("v2", [True, False], ids=["CacheManager", "KvCacheManager"])
def test_prompt_killed_by_a_timed_fault_mid_pull_times_the_pull_out_then_the_link_answers_as_its_engine(
    world: SimWorld, v2: bool
) -> None:
    _, _, dst, pull = _setup(world, v2)
    start = world.now()
    world.faults.add(Fault.kill(P_ID, start_s=start + 0.1))  # 0.1 s into a 0.26 s pull
    assert pull() is _timeout(v2)
    assert P_ID in world.killed
    assert world.now() - start == pytest.approx(1.0)  # the whole sync_kv_timeout, from the pull's start
    assert not any(v.any() for v in views(world, dst))  # nothing was delivered
    _then_the_link_answers_by_its_engine(world, v2, pull)


def _then_the_link_answers_by_its_engine(world: SimWorld, v2: bool, pull: Callable[[], S]) -> None:
    """After a pull the peer's loss timed out: v2 says at once that the link is gone; v1 keeps the
    Decoder's entry (GE ``cluster_manager.cpp:165-170``), so the next pull is sent, never answered,
    and times out again after sync_kv_timeout, until the client unlinks."""
    before = world.now()
    if v2:
        assert pull() is S.LLM_NOT_YET_LINK
        assert world.now() == before  # at once
    else:
        assert pull() is S.LLM_WAIT_PROCESS_TIMEOUT
        assert world.now() - before == pytest.approx(1.0)


def test_timed_kill_after_the_pull_ends_does_not_touch_it(world: SimWorld) -> None:
    _, _, dst, pull = _setup(world, True)
    world.faults.add(Fault.kill(P_ID, start_s=world.now() + PULL_S + 0.01))
    assert pull() is S.LLM_SUCCESS
    assert P_ID not in world.killed
    assert all(v.any() for v in views(world, dst))


@pytest.mark.parametrize("action", ["partition", "hang", "cut_link"])
def test_timed_fault_that_silences_the_link_mid_pull_times_it_out(world: SimWorld, action: str) -> None:
    _, _, dst, pull = _setup(world, True)
    at = world.now() + 0.1
    rule = {
        "partition": Fault.partition(P_ID, D_ID, start_s=at),
        "hang": Fault.hang(P_ID, start_s=at),
        "cut_link": Fault.cut_link(cluster=D_ID, remote=P_ID, start_s=at),
    }[action]
    world.faults.add(rule)
    assert pull() is S.LLM_TIMEOUT
    assert world.faults.fired(rule) == 1
    assert not any(v.any() for v in views(world, dst))
    assert pull() is S.LLM_NOT_YET_LINK


class _ClockWithHook(VirtualClock):
    """A virtual clock that runs ``hook`` in another thread, once, when the first long sleep begins
    (the pull's transfer time), and waits for it: an event that lands mid-transfer."""

    def __init__(self) -> None:
        super().__init__()
        self.hook: Callable[[], None] = lambda: None
        self.fired = False

    def sleep(self, seconds: float) -> None:
        if not self.fired and seconds >= PULL_S / 2:
            self.fired = True
            other = threading.Thread(target=self.hook)
            other.start()
            other.join()
        super().sleep(seconds)


@pytest.fixture
def hooked() -> Iterator[Tuple[SimWorld, _ClockWithHook]]:
    clock = _ClockWithHook()
    w = SimWorld(seed=3, clock=clock, config=SimConfig(pause_wall_limit_s=0.05))
    with activate(w):
        yield w, clock
    finalize_all(w)
    assert w.memory.backed_bytes == 0


@pytest.mark.parametrize("how", ["finalize", "kill"])
@pytest.mark.parametrize("v2", [True, False], ids=["CacheManager", "KvCacheManager"])
def test_prompt_gone_from_another_thread_mid_pull_times_the_pull_out_then_the_link_answers_as_its_engine(
    hooked: Tuple[SimWorld, _ClockWithHook], how: str, v2: bool
) -> None:
    world, clock = hooked
    p, _, dst, pull = _setup(world, v2)
    clock.hook = p.finalize if how == "finalize" else (lambda: world.faults.add(Fault.kill(P_ID)))
    start = world.now()
    assert pull() is _timeout(v2)
    assert clock.fired
    assert world.node(P_ID) is None
    assert world.now() - start == pytest.approx(1.0)
    assert not any(v.any() for v in views(world, dst))
    _then_the_link_answers_by_its_engine(world, v2, pull)


# -- poison ----------------------------------------------------------------------------------------


def test_poisoned_source_under_a_landed_timeout_is_suspect_remote_error(world: SimWorld) -> None:
    p, d = pair(v2=True)
    src = p.cache_manager.allocate_cache(desc(batch=1), [CacheKey(P_ID, 1)])
    fill(world, src)
    dst = d.cache_manager.allocate_cache(desc(batch=1))
    world.memory.poison(src.tensor_addrs[0], 8)
    world.faults.add(Fault.timeout(landed=True, op="pull_cache", nth=1))
    assert code_of(lambda: d.cache_manager.pull_cache(CacheKey(P_ID, 1), dst)) is S.LLM_SUSPECT_REMOTE_ERROR
    assert not any(v.any() for v in views(world, dst))


def test_freed_poisoned_memory_is_clean_when_handed_out_again(world: SimWorld) -> None:
    p, d = pair(v2=True)
    first = p.cache_manager.allocate_cache(desc(batch=1))
    address = first.tensor_addrs[0]
    world.memory.poison(address, 64)
    p.cache_manager.deallocate_cache(first)
    assert world.memory.poisoned == []
    again = p.cache_manager.allocate_cache(desc(batch=1), [CacheKey(P_ID, 1)])
    assert again.tensor_addrs[0] == address  # the pool hands the same address out
    fill(world, again)
    dst = d.cache_manager.allocate_cache(desc(batch=1))
    assert code_of(lambda: d.cache_manager.pull_cache(CacheKey(P_ID, 1), dst)) is S.LLM_SUCCESS


def test_low_rate_poison_rule_keeps_delivering_and_its_poison_stays_bounded(world: SimWorld) -> None:
    p, d = pair(v2=True)
    dst = d.cache_manager.allocate_cache(desc(batch=1))
    rule = world.faults.add(Fault.poison(op="pull_cache", probability=0.02))
    codes: List[S] = []
    for req in range(1, 1501):
        src = p.cache_manager.allocate_cache(desc(batch=1), [CacheKey(P_ID, req)])
        codes.append(code_of(lambda req=req: d.cache_manager.pull_cache(CacheKey(P_ID, req), dst)))  # type: ignore[misc]
        if codes[-1] is not S.LLM_SUCCESS:
            p.cache_manager.remove_cache_key(CacheKey(P_ID, req))  # a bound key holds the memory
        p.cache_manager.deallocate_cache(src)
        assert len(world.memory.poisoned) <= 1  # only the live cache can hold poison
    fired = world.faults.fired(rule)
    assert fired > 10
    assert codes.count(S.LLM_SUSPECT_REMOTE_ERROR) == fired  # each fault costs one pull, no more
    assert codes[-200:].count(S.LLM_SUCCESS) >= 180
    state = world.faults._rules[rule]
    assert len(state.poisoned) < 64


def test_poisoned_range_lookup_agrees_with_a_scan() -> None:
    space = AddressSpace(backed=False)
    rng = random.Random(5)
    ranges = []
    for _ in range(300):
        start, size = rng.randrange(0, 100_000), rng.choice([1, 8, 64, 4096, 30_000])
        space.poison(start, size)
        ranges.append((start, start + size))
    for _ in range(200):
        heal_at = rng.randrange(0, 100_000)
        space.heal(heal_at, 16)
        ranges = [(lo, hi) for lo, hi in ranges if hi <= heal_at or lo >= heal_at + 16]
    assert space.poisoned == sorted(set(ranges))
    for _ in range(2000):
        address, size = rng.randrange(-100, 140_000), rng.randrange(1, 5000)
        expected = any(lo < address + size and address < hi for lo, hi in ranges)
        assert space.is_poisoned(address, size) is expected
    assert np.all(np.diff([lo for lo, _ in space.poisoned]) >= 0)


# -- v1: what a timed-out link is ----------------------------------------------------------------


def _v1_cluster() -> object:
    return info(P_ID, 26000, remote_ip=PROMPT_IP, local_ip=DECODE_IP)


@pytest.mark.parametrize("cause", ["timeout", "kill"])
def test_v1_link_broken_by_a_timeout_stays_until_unlinked_and_every_call_agrees(
    world: SimWorld, cause: str
) -> None:
    """GE keeps the link entry after a timed-out pull: link_clusters says ALREADY_LINK, so a pull does
    not say the link is missing: it is sent and never answered (LLM_WAIT_PROCESS_TIMEOUT after
    sync_kv_timeout), as the heartbeat is; unlink removes the entry, then a link links."""
    _, d, _, pull = _setup(world, v2=False)
    if cause == "timeout":
        world.faults.add(Fault.timeout(op="pull_cache", nth=1))
    else:
        world.faults.add(Fault.kill(P_ID))
    assert pull() is S.LLM_WAIT_PROCESS_TIMEOUT
    cluster = _v1_cluster()
    assert d.link_clusters([cluster], 1000) == (S.LLM_SUCCESS, [S.LLM_ALREADY_LINK])
    before = world.now()
    assert pull() is S.LLM_WAIT_PROCESS_TIMEOUT
    assert world.now() - before == pytest.approx(1.0)  # sync_kv_timeout: sent, never answered
    assert code_of(lambda: d.check_link_status(P_ID)) is S.LLM_WAIT_PROCESS_TIMEOUT
    assert world.is_linked(D_ID, P_ID) is (cause == "timeout")
    unlinked = d.unlink_clusters([cluster], 1000)
    relinked = d.link_clusters([cluster], 1000)
    if cause == "timeout":
        assert unlinked == (S.LLM_SUCCESS, [S.LLM_SUCCESS])
        assert relinked == (S.LLM_SUCCESS, [S.LLM_SUCCESS])
        assert pull() is S.LLM_SUCCESS
    else:  # the Prompt cannot be told, but the entry goes all the same (GE link_req_handler.cpp:425-450)
        assert unlinked == (S.LLM_UNLINK_FAILED, [S.LLM_NOTIFY_PROMPT_UNLINK_FAILED])
        assert relinked == (S.LLM_LINK_FAILED, [S.LLM_LINK_FAILED])
