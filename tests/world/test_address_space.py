"""Bytes behind addresses: simulated allocations, raw pointers of this process, copies, poison."""

from __future__ import annotations

import ctypes
import mmap
import os
import threading
from typing import List, Tuple

import numpy as np
import pytest

from datadist_sim._status import LLMStatusCode
from datadist_sim._world.address_space import (
    HUGE_PAGE,
    SIM_REGION_SIZE,
    SIM_VA_BASE,
    AddressSpace,
    ProcessMemory,
    is_simulated,
    tensor_views,
)
from datadist_sim._world.errors import SimError

OOM = LLMStatusCode.LLM_OUT_OF_MEMORY
INVALID = LLMStatusCode.LLM_PARAM_INVALID
MIB = 1 << 20
linux_only = pytest.mark.skipif(not ProcessMemory().supported, reason="needs /proc/self/maps")


@pytest.fixture
def space() -> AddressSpace:
    return AddressSpace()


def test_pools_get_distinct_regions_above_user_space(space: AddressSpace) -> None:
    first = space.create_pool(64 * MIB, oom_code=OOM)
    second = space.create_pool(3 * SIM_REGION_SIZE // 2, oom_code=OOM)
    third = space.create_pool(MIB, oom_code=OOM)
    assert first.base == SIM_VA_BASE
    assert second.base == SIM_VA_BASE + SIM_REGION_SIZE
    assert third.base == SIM_VA_BASE + 3 * SIM_REGION_SIZE  # the 1.5-region pool takes two regions
    for pool in (first, second, third):
        assert pool.base % HUGE_PAGE == 0
        assert is_simulated(pool.base)
        assert pool.base < 1 << 63


def test_huge_page_alignment_gives_2mib_aligned_tensor_addresses(space: AddressSpace) -> None:
    pool = space.create_pool(64 * MIB, oom_code=OOM, alignment=HUGE_PAGE)
    addresses = pool.allocate_many([1, 3 * MIB, 4096])
    assert all(address % HUGE_PAGE == 0 for address in addresses)


def test_write_through_a_view_is_read_back_through_another(space: AddressSpace) -> None:
    pool = space.create_pool(MIB, oom_code=OOM)
    address = pool.allocate(4096)
    space.view(address + 100, 4)[:] = [1, 2, 3, 4]
    assert space.view(address, 4096)[100:104].tolist() == [1, 2, 3, 4]


def test_backing_grows_with_allocations_not_declared_capacity(space: AddressSpace) -> None:
    pool = space.create_pool(64 << 30, oom_code=OOM)
    address = pool.allocate(MIB)
    assert space.backed_bytes == MIB
    pool.free(address)
    assert space.backed_bytes == 0


def test_copy_between_allocations_of_two_pools(space: AddressSpace) -> None:
    src_pool, dst_pool = space.create_pool(MIB, oom_code=OOM), space.create_pool(MIB, oom_code=OOM)
    src, dst = src_pool.allocate(8192), dst_pool.allocate(8192)
    payload = np.arange(4096, dtype=np.uint16).view(np.uint8)
    space.view(src, 8192)[:] = payload
    space.copy(dst, src, 8192)
    assert np.array_equal(space.view(dst, 8192), payload)


def test_copy_ranges_moves_exactly_the_named_blocks(space: AddressSpace) -> None:
    pool = space.create_pool(MIB, oom_code=OOM)
    src, dst = pool.allocate(4 * 1024), pool.allocate(4 * 1024)
    space.view(src, 4096)[:] = np.repeat(np.arange(4, dtype=np.uint8) + 1, 1024)
    space.copy_ranges([(dst + 2048, src, 1024), (dst, src + 3072, 1024)])
    assert space.view(dst, 4096).reshape(4, 1024)[:, 0].tolist() == [4, 0, 1, 0]


def test_copy_failing_on_a_later_range_leaves_the_destination_unchanged(space: AddressSpace) -> None:
    pool = space.create_pool(MIB, oom_code=OOM)
    src, dst = pool.allocate(4096), pool.allocate(4096)
    space.view(src, 4096)[:] = 7
    space.view(dst, 4096)[:] = 1
    before = space.view(dst, pool.size_of(dst)).copy()
    with pytest.raises(SimError) as caught:
        space.copy_ranges([(dst, src, 1024), (dst + 1024, 0x10, 1024)])
    assert caught.value.code is INVALID
    assert np.array_equal(space.view(dst, pool.size_of(dst)), before)


def test_range_crossing_the_end_of_an_allocation_is_rejected(space: AddressSpace) -> None:
    pool = space.create_pool(MIB, oom_code=OOM)
    first, second = pool.allocate(64 << 10), pool.allocate(64 << 10)
    low = min(first, second)
    with pytest.raises(SimError, match="crosses the end") as caught:
        space.view(low + (64 << 10) - 8, 16)  # the two allocations are adjacent
    assert caught.value.code is INVALID


def test_freed_and_never_allocated_simulated_addresses_are_rejected(space: AddressSpace) -> None:
    pool = space.create_pool(MIB, oom_code=OOM)
    address = pool.allocate(4096)
    pool.free(address)
    for bad in (address, SIM_VA_BASE + 5 * SIM_REGION_SIZE):
        with pytest.raises(SimError, match="not inside a live allocation") as caught:
            space.resolve(bad, 1)
        assert caught.value.code is INVALID


@linux_only
def test_raw_pointer_of_a_numpy_array_is_written_in_place(space: AddressSpace) -> None:
    pool = space.create_pool(MIB, oom_code=OOM)
    src = pool.allocate(4096)
    space.view(src, 4096)[:] = 42
    target = np.zeros(4096, dtype=np.uint8)
    space.copy(target.ctypes.data, src, 4096)
    assert (target == 42).all()
    target[:] = 9
    space.copy(src, target.ctypes.data + 1024, 16)
    assert space.view(src, 17).tolist() == [9] * 16 + [42]


@pytest.mark.parametrize("address", [0x10, 0x1000, 0x12C0_0000_0000, 1 << 47])
def test_unmapped_raw_addresses_are_refused_without_crashing(space: AddressSpace, address: int) -> None:
    with pytest.raises(SimError, match="metadata-only address") as caught:
        space.resolve(address, 64, writable=True)
    assert caught.value.code is INVALID


@linux_only
def test_read_only_mapping_is_readable_but_not_writable(space: AddressSpace) -> None:
    with mmap.mmap(-1, 4096, prot=mmap.PROT_READ) as region:
        address = np.frombuffer(region, dtype=np.uint8).ctypes.data
        assert space.resolve(address, 4096) is not None
        with pytest.raises(SimError, match="writable") as caught:
            space.resolve(address, 4096, writable=True)
        assert caught.value.code is INVALID


@linux_only
def test_unmapped_since_the_cached_parse_is_caught() -> None:
    memory = ProcessMemory()
    region = mmap.mmap(-1, 1 << 20)
    view = np.frombuffer(region, dtype=np.uint8)
    address = view.ctypes.data
    assert memory.covers(address, 1 << 20, writable=True)
    del view
    region.close()
    assert not memory.covers(address, 1 << 20, writable=True)


def test_metadata_only_mode_validates_but_moves_no_bytes() -> None:
    space = AddressSpace(backed=False)
    pool = space.create_pool(64 << 30, oom_code=OOM)
    src, dst = pool.allocate_many([1 << 30, 1 << 30])
    assert space.backed_bytes == 0
    space.copy(dst, src, 1 << 30)
    space.copy(0x12C0_0000_0000, src, 4096)  # raw addresses are not checked: nothing is touched
    with pytest.raises(SimError, match="crosses the end"):
        space.copy(dst, src, (1 << 30) + 1)
    with pytest.raises(SimError) as caught:
        space.view(src, 16)
    assert caught.value.code is LLMStatusCode.LLM_FEATURE_NOT_ENABLED


@pytest.mark.parametrize("backed", [True, False])
def test_poisoned_range_gives_device_mem_error_until_healed(backed: bool) -> None:
    space = AddressSpace(backed=backed)
    pool = space.create_pool(MIB, oom_code=OOM)
    src, dst = pool.allocate(8192), pool.allocate(8192)
    space.poison(src + 4096, 1)
    space.copy(dst, src, 4096)  # the poisoned byte is not touched
    with pytest.raises(SimError) as caught:
        space.copy(dst, src, 8192)
    assert caught.value.code is LLMStatusCode.LLM_DEVICE_MEM_ERROR
    space.heal(src, 8192)
    assert space.poisoned == []
    space.copy(dst, src, 8192)


def test_poisoned_source_leaves_destination_unchanged(space: AddressSpace) -> None:
    pool = space.create_pool(MIB, oom_code=OOM)
    src, dst = pool.allocate(4096), pool.allocate(4096)
    space.view(src, 4096)[:] = 5
    space.poison(src + 2048, 16)
    with pytest.raises(SimError):
        space.copy_ranges([(dst, src, 1024), (dst + 1024, src + 2048, 1024)])
    assert (space.view(dst, 4096) == 0).all()


def test_tensor_views_alias_the_cache_bytes(space: AddressSpace) -> None:
    pool = space.create_pool(MIB, oom_code=OOM)
    addrs = pool.allocate_many([2 * 8 * 2] * 3)
    key, value, extra = tensor_views(space, addrs, [2, 8], np.float16)
    assert key.shape == (2, 8)
    assert key.dtype == np.float16
    value[1, 3] = 1.5
    assert space.view(addrs[1] + (8 + 3) * 2, 2).view(np.float16)[0] == 1.5
    assert not extra.any()


def test_allocation_containing_finds_the_allocation_around_an_inner_address(space: AddressSpace) -> None:
    pool = space.create_pool(MIB, oom_code=OOM)
    address = pool.allocate(100)
    assert space.allocation_containing(address + 99) == (address, pool.page_size)
    assert space.allocation_containing(address + pool.page_size) is None
    assert space.allocation_containing(0x10) is None


def test_concurrent_allocate_and_free_keep_every_allocation_backed(space: AddressSpace) -> None:
    pool = space.create_pool(256 * (64 << 10), oom_code=OOM)
    errors: list[BaseException] = []

    def churn(seed: int) -> None:
        try:
            for _ in range(300):
                address = pool.allocate(4096)
                space.view(address, 8)[:] = seed
                assert space.view(address, 8).tolist() == [seed] * 8
                pool.free(address)
        except BaseException as error:  # reported to the main thread below
            errors.append(error)

    threads = [threading.Thread(target=churn, args=(seed,)) for seed in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert (pool.used, space.backed_bytes) == (0, 0)


@linux_only
def test_without_proc_self_mem_every_check_rereads_the_maps(monkeypatch: pytest.MonkeyPatch) -> None:
    memory = ProcessMemory()
    monkeypatch.setattr(memory, "_memory_fd", lambda: None)
    region = mmap.mmap(-1, 1 << 16)
    view = np.frombuffer(region, dtype=np.uint8)
    address = view.ctypes.data
    assert memory.covers(address, 1 << 16, writable=True)
    del view
    region.close()
    assert not memory.covers(address, 1 << 16, writable=True)


@linux_only
def test_a_page_unmapped_inside_a_small_range_since_the_cached_parse_is_caught() -> None:
    # A small range is probed by one read of all of it, so a hole between its first and last pages
    # refuses it even while the cached maps still show it whole.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_long,
    ]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    page = mmap.PAGESIZE
    flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
    base = libc.mmap(None, 3 * page, mmap.PROT_READ | mmap.PROT_WRITE, flags, -1, 0)
    assert base not in (None, ctypes.c_void_p(-1).value)
    try:
        memory = ProcessMemory()
        assert memory.covers(base, 3 * page, writable=True)
        assert libc.munmap(base + page, page) == 0
        assert not memory.covers(base, 3 * page, writable=True)
        assert memory.covers(base, page, writable=True)
    finally:
        libc.munmap(base, 3 * page)


def _pages(count: int, prot: int = mmap.PROT_READ | mmap.PROT_WRITE) -> int:
    """``count`` fresh anonymous pages of this process, mapped by libc (so a test can unmap one)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_long,
    ]
    base = libc.mmap(None, count * mmap.PAGESIZE, prot, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
    assert base not in (None, ctypes.c_void_p(-1).value)
    return int(base)


def _unmap(address: int, nbytes: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    assert libc.munmap(address, nbytes) == 0


@linux_only
def test_a_small_raw_copy_moves_the_bytes_with_memmove_meaning() -> None:
    memory = ProcessMemory()
    memory.refresh()
    data = np.arange(8192, dtype=np.uint32).astype(np.uint8)
    expected = data.copy()
    expected[100:4196] = data[0:4096]  # overlapping: the source as it was before the copy
    assert memory.copy_small(data.ctypes.data + 100, data.ctypes.data, 4096)
    assert np.array_equal(data, expected)


@linux_only
def test_a_small_raw_copy_from_a_page_unmapped_since_the_parse_writes_nothing() -> None:
    # The cached parse still shows the source whole; the kernel finds its second page gone, and the
    # destination keeps its bytes (the check and the copy are one step, so this is the case to prove).
    page = mmap.PAGESIZE
    base = _pages(2)
    target = np.full(2 * page, 7, dtype=np.uint8)
    try:
        memory = ProcessMemory()
        memory.refresh()
        _unmap(base + page, page)
        assert not memory.copy_small(target.ctypes.data, base + page // 2, page)
        assert (target == 7).all()
        assert memory.copy_small(target.ctypes.data, base, page)
        assert (target[:page] == 0).all()
    finally:
        _unmap(base, page)


@linux_only
def test_small_raw_copies_go_on_past_what_the_pipe_holds() -> None:
    # Each copy leaves its probe bytes in the pipe; a full pipe is emptied and the write made again,
    # so a copy never fails for want of room.
    memory = ProcessMemory()
    memory.refresh()
    page = mmap.PAGESIZE
    source = np.full(2 * page, 3, dtype=np.uint8)
    target = np.zeros(2 * page, dtype=np.uint8)
    copies = 2 * (1 << 16) // 4  # each leaves 4 bytes (two pages on each side): twice a full pipe
    done = [memory.copy_small(target.ctypes.data + 1, source.ctypes.data + 1, page) for _ in range(copies)]
    assert all(done)
    assert (target[1 : page + 1] == 3).all()


@linux_only
def test_two_threads_share_the_pipe_and_each_copy_is_right_or_not_taken() -> None:
    # No lock: another thread's bytes can make a write short (then the caller takes the full path),
    # never vouch for a page of this copy; each copy that is taken moves its own bytes.
    memory = ProcessMemory()
    memory.refresh()
    page = mmap.PAGESIZE
    results: List[Tuple[int, int, bool]] = []

    def run(seed: int) -> None:
        source = np.full(2 * page, seed, dtype=np.uint8)
        target = np.zeros(2 * page, dtype=np.uint8)
        taken = sum(memory.copy_small(target.ctypes.data, source.ctypes.data, page) for _ in range(20_000))
        results.append((seed, taken, bool((target[:page] == seed).all() and (target[page:] == 0).all())))

    threads = [threading.Thread(target=run, args=(seed,)) for seed in (3, 5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(seed for seed, _, _ in results) == [3, 5]
    assert all(right for _, taken, right in results if taken)
    assert all(taken > 0 for _, taken, _ in results)


@linux_only
def test_a_small_raw_copy_into_a_read_only_page_is_not_taken() -> None:
    base = _pages(1, mmap.PROT_READ)
    source = np.ones(64, dtype=np.uint8)
    try:
        memory = ProcessMemory()
        memory.refresh()
        assert not memory.copy_small(base, source.ctypes.data, 64)
        assert memory.covers(base, 64, writable=False)
        assert not memory.covers(base, 64, writable=True)
    finally:
        _unmap(base, mmap.PAGESIZE)


@linux_only
def test_a_raw_range_unmapped_since_the_parse_is_refused_by_copy_ranges_and_nothing_moves() -> None:
    page = mmap.PAGESIZE
    space = AddressSpace(process_memory=ProcessMemory())
    base = _pages(2)
    target = np.full(page, 9, dtype=np.uint8)
    try:
        space.copy_ranges([(target.ctypes.data, base, 64)])  # parsed, and found, once
        _unmap(base + page, page)
        with pytest.raises(SimError) as caught:
            space.copy_ranges([(target.ctypes.data, base + page - 32, 64)])
        assert caught.value.code is INVALID
        assert (target[64:] == 9).all()
        assert (target[:64] == 0).all()
    finally:
        _unmap(base, page)


@linux_only
def test_a_forked_child_copies_through_a_pipe_of_its_own() -> None:
    # the pipe is shared with the parent after fork: the child's probes must not meet the parent's
    memory = ProcessMemory()
    memory.refresh()
    source, target = np.arange(64, dtype=np.uint8), np.zeros(64, dtype=np.uint8)
    assert memory.copy_small(target.ctypes.data, source.ctypes.data, 64)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports by its exit code
        target[:] = 0
        ok = memory.copy_small(target.ctypes.data, source.ctypes.data, 64)
        os._exit(0 if ok and memory._pipe_pid == os.getpid() and (target == source).all() else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
