"""The pool allocator: rounding, alignment, best fit, coalescing, fragmentation, limits, statistics."""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, consumes, invariant, precondition, rule

from datadist_sim._status import LLMStatusCode
from datadist_sim._world.errors import SimError
from datadist_sim._world.memory import MemoryPool
from datadist_sim._world.registration import GIB, RegistrationLedger

OOM = LLMStatusCode.LLM_OUT_OF_MEMORY
KIB = 1024
PAGE = 64 * KIB  # page_shift 16, the engine default


def make_pool(pages: int = 16) -> MemoryPool:
    return MemoryPool(pages * PAGE, oom_code=OOM, base=0x1000_0000)


def test_requests_round_up_to_whole_pages_and_zero_takes_one_page() -> None:
    pool = make_pool()
    pool.allocate(1)
    pool.allocate(PAGE + 1)
    pool.allocate(0)
    assert sorted(pool.allocations().values()) == [PAGE, PAGE, 2 * PAGE]
    assert pool.used == 4 * PAGE


def test_every_allocation_is_page_aligned_inside_the_pool() -> None:
    pool = make_pool()
    addresses = [pool.allocate(size) for size in (1, 3 * KIB, PAGE, 5 * PAGE - 7)]
    for address in addresses:
        assert address % PAGE == 0
        assert pool.base <= address < pool.base + pool.capacity


def test_alignment_larger_than_a_page_is_the_granule_for_start_and_size() -> None:
    huge = 2 << 20
    pool = MemoryPool(8 * huge, oom_code=OOM, base=0, alignment=huge)
    first, second = pool.allocate(1), pool.allocate(huge + 1)
    assert first % huge == 0
    assert second % huge == 0
    assert pool.size_of(first) == huge
    assert pool.size_of(second) == 2 * huge


def test_capacity_counts_whole_granules_of_the_declared_size() -> None:
    pool = MemoryPool(10 * PAGE + 123, oom_code=OOM)
    assert pool.declared_size == 10 * PAGE + 123
    assert pool.capacity == 10 * PAGE


def test_allocations_are_carved_from_the_high_end_of_the_block_as_in_split_span() -> None:
    pool = make_pool(8)
    assert pool.allocate(PAGE) == pool.base + 7 * PAGE
    assert pool.allocate(2 * PAGE) == pool.base + 5 * PAGE


def test_best_fit_picks_the_smallest_free_block_that_fits() -> None:
    pool = make_pool(16)
    a = pool.allocate(4 * PAGE)
    pool.allocate(PAGE)  # separator
    b = pool.allocate(2 * PAGE)
    pool.allocate(PAGE)  # separator
    pool.free(a)  # a 4-page hole
    pool.free(b)  # a 2-page hole
    assert pool.allocate(2 * PAGE) == b


def test_freed_neighbours_coalesce_into_one_block() -> None:
    pool = make_pool(8)
    addresses = [pool.allocate(PAGE) for _ in range(8)]
    for address in addresses[::2] + addresses[1::2]:
        pool.free(address)
    assert pool.free_blocks() == [(pool.base, 8 * PAGE)]


def test_fragmented_pool_refuses_a_request_it_has_enough_free_bytes_for() -> None:
    pool = make_pool(8)
    addresses = [pool.allocate(PAGE) for _ in range(8)]
    for address in addresses[::2]:
        pool.free(address)
    assert pool.free_bytes == 4 * PAGE
    assert pool.largest_free_block == PAGE
    with pytest.raises(SimError) as caught:
        pool.allocate(2 * PAGE)
    assert caught.value.code is OOM


@pytest.mark.parametrize("code", [LLMStatusCode.LLM_OUT_OF_MEMORY, LLMStatusCode.LLM_DEVICE_OUT_OF_MEMORY])
def test_exhaustion_raises_the_code_the_pool_was_given(code: LLMStatusCode) -> None:
    pool = MemoryPool(4 * PAGE, oom_code=code)
    pool.allocate(4 * PAGE)
    with pytest.raises(SimError) as caught:
        pool.allocate(1)
    assert caught.value.code is code


def test_statistics_track_usage_peak_and_counts() -> None:
    pool = make_pool(8)
    a = pool.allocate(3 * PAGE)
    b = pool.allocate(PAGE)
    pool.free(a)
    with pytest.raises(SimError):
        pool.allocate(9 * PAGE)
    stats = pool.stats()
    assert (stats.used, stats.free_bytes, stats.capacity) == (PAGE, 7 * PAGE, 8 * PAGE)
    assert (stats.peak_used, stats.allocation_count) == (4 * PAGE, 1)
    assert (stats.total_allocations, stats.failed_allocations) == (2, 1)
    assert pool.largest_free_block == 4 * PAGE  # b, carved below a, splits the free space 4 + 3
    pool.free(b)
    assert pool.used == 0
    assert pool.peak_used == 4 * PAGE


def test_limit_blocks_new_allocations_and_keeps_existing_ones() -> None:
    pool = make_pool(8)
    kept = pool.allocate(2 * PAGE)
    pool.set_limit(3 * PAGE)
    pool.allocate(PAGE)
    with pytest.raises(SimError) as caught:
        pool.allocate(PAGE)
    assert caught.value.code is OOM
    assert pool.size_of(kept) == 2 * PAGE
    pool.set_limit(None)
    pool.allocate(PAGE)
    assert pool.used == 4 * PAGE


def test_allocate_many_is_all_or_nothing() -> None:
    pool = make_pool(8)
    before = pool.stats()
    with pytest.raises(SimError) as caught:
        pool.allocate_many([2 * PAGE, 2 * PAGE, 5 * PAGE])
    assert caught.value.code is OOM
    after = pool.stats()
    assert (after.used, after.allocation_count) == (before.used, 0)
    assert pool.free_blocks() == [(pool.base, 8 * PAGE)]
    assert len(pool.allocate_many([PAGE] * 8)) == 8


def test_free_of_an_unknown_or_freed_address_is_param_invalid() -> None:
    pool = make_pool()
    address = pool.allocate(PAGE)
    pool.free(address)
    for bad in (address, address + 1):
        with pytest.raises(SimError) as caught:
            pool.free(bad)
        assert caught.value.code is LLMStatusCode.LLM_PARAM_INVALID


@pytest.mark.parametrize(
    ("memory_size", "page_shift"),
    [(0, 16), (PAGE, 9), (PAGE, 31), (0xFFFFFFFF << 10, 10)],
)
def test_engine_config_rules_give_param_invalid(memory_size: int, page_shift: int) -> None:
    with pytest.raises(SimError) as caught:
        MemoryPool(memory_size, oom_code=OOM, page_shift=page_shift)
    assert caught.value.code is LLMStatusCode.LLM_PARAM_INVALID


def test_page_shift_bounds_and_uint32_page_count_are_accepted_just_inside() -> None:
    assert MemoryPool(PAGE, oom_code=OOM, page_shift=10).page_size == 1024
    assert MemoryPool(1 << 30, oom_code=OOM, page_shift=30).page_size == 1 << 30
    assert MemoryPool((0xFFFFFFFF - 1) << 10, oom_code=OOM, page_shift=10).capacity > 0


class PoolMachine(RuleBasedStateMachine):
    """The pool against a model that only remembers what is live."""

    allocations = Bundle("allocations")

    def __init__(self) -> None:
        super().__init__()
        self.pool = MemoryPool(64 * PAGE, oom_code=OOM, base=0x4000_0000)
        self.live: dict[int, int] = {}

    @rule(target=allocations, nbytes=st.integers(0, 20 * PAGE))
    def allocate(self, nbytes: int) -> int:
        expected = self.pool.round_size(nbytes)
        if self.pool.largest_free_block < expected:
            with pytest.raises(SimError) as caught:
                self.pool.allocate(nbytes)
            assert caught.value.code is OOM
            return -1
        address = self.pool.allocate(nbytes)
        assert address not in self.live
        self.live[address] = expected
        return address

    @rule(address=consumes(allocations))
    def free(self, address: int) -> None:
        if address not in self.live:  # a failed allocation, or freed by free_everything
            return
        self.pool.free(address)
        del self.live[address]

    @precondition(lambda self: bool(self.live))
    @rule()
    def free_everything(self) -> None:
        for address in list(self.live):
            self.pool.free(address)
        self.live.clear()
        assert self.pool.free_blocks() == [(self.pool.base, self.pool.capacity)]

    @invariant()
    def books_balance(self) -> None:
        stats = self.pool.stats()
        blocks = self.pool.free_blocks()
        assert stats.used + stats.free_bytes == stats.capacity
        assert stats.used == sum(self.live.values())
        assert sum(size for _, size in blocks) == stats.free_bytes
        assert self.pool.allocations() == self.live

    @invariant()
    def ranges_are_aligned_disjoint_and_in_bounds(self) -> None:
        spans = sorted([*self.live.items(), *self.pool.free_blocks()])
        cursor = self.pool.base
        for start, size in spans:
            assert start % self.pool.page_size == 0
            assert size % self.pool.page_size == 0
            assert start == cursor  # live and free ranges tile the pool exactly
            cursor = start + size
        assert cursor == self.pool.base + self.pool.capacity

    @invariant()
    def free_blocks_are_coalesced(self) -> None:
        blocks = self.pool.free_blocks()
        for (start, size), (next_start, _) in zip(blocks, blocks[1:]):
            assert start + size < next_start


PoolMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
TestPoolMachine = PoolMachine.TestCase


def test_ledger_counts_addresses_across_registrations_up_to_240() -> None:
    ledger = RegistrationLedger()
    ledger.register(1, [0x1000] * 200, 1024, device=True)
    ledger.register(2, [0x2000] * 40, 1024, device=False)
    with pytest.raises(SimError) as caught:
        ledger.register(3, [0x3000], 1024, device=True)
    assert caught.value.code is LLMStatusCode.LLM_PARAM_INVALID
    assert ledger.address_count == 240
    assert 3 not in ledger
    assert ledger.unregister(1)
    assert not ledger.unregister(1)
    ledger.register(3, [0x3000], 1024, device=True)
    assert ledger.address_count == 41


def test_ledger_limits_device_and_host_bytes_separately() -> None:
    ledger = RegistrationLedger()
    ledger.register("dev", [1, 2], 25 * GIB, device=True)
    ledger.register("host", [3, 4], 10 * GIB, device=False)
    for owner, device in (("dev2", True), ("host2", False)):
        with pytest.raises(SimError) as caught:
            ledger.register(owner, [5], 1, device=device)
        assert caught.value.code is LLMStatusCode.LLM_PARAM_INVALID
    assert (ledger.device_bytes, ledger.host_bytes) == (50 * GIB, 20 * GIB)
    ledger.unregister("dev")
    ledger.register("dev2", [5], 50 * GIB, device=True)
    assert ledger.device_bytes == 50 * GIB


def test_ledger_rejects_a_second_registration_under_one_owner() -> None:
    ledger = RegistrationLedger()
    ledger.register(7, [1], 10, device=True)
    with pytest.raises(SimError) as caught:
        ledger.register(7, [2], 10, device=True)
    assert caught.value.code is LLMStatusCode.LLM_PARAM_INVALID
    assert ledger.address_count == 1
