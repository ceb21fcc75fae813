"""Backing sized to what an allocation asked for, addresses and checks sized to the reservation."""

from __future__ import annotations

import numpy as np
import pytest

from datadist_sim._status import LLMStatusCode
from datadist_sim._world.address_space import AddressSpace
from datadist_sim._world.errors import SimError

OOM = LLMStatusCode.LLM_OUT_OF_MEMORY
PAGE = 64 << 10  # the default page (page_shift 16)
MIB = 1 << 20


def test_a_512_byte_allocation_holds_512_bytes_not_a_page() -> None:
    space = AddressSpace()
    pool = space.create_pool(MIB, oom_code=OOM)
    address = pool.allocate(512)
    assert address % PAGE == 0
    assert pool.size_of(address) == PAGE  # the reservation is still a whole page
    assert space.backed_bytes == 512
    assert space.view(address, 512).nbytes == 512


def test_backed_and_metadata_only_spaces_hand_out_the_same_addresses() -> None:
    sizes = [512, 3 * PAGE + 1, 1, PAGE, 0, 70_000]
    spaces = [AddressSpace(backed=True), AddressSpace(backed=False)]
    got = []
    for space in spaces:
        pool = space.create_pool(16 * MIB, oom_code=OOM)
        addresses = pool.allocate_many(sizes)
        pool.free(addresses[1])
        addresses.append(pool.allocate(100))
        got.append(addresses)
    assert got[0] == got[1]


def test_bytes_land_at_the_start_and_end_of_a_small_allocation() -> None:
    space = AddressSpace()
    pool = space.create_pool(MIB, oom_code=OOM)
    src, dst = pool.allocate(512), pool.allocate(512)
    space.view(src, 512)[:] = np.arange(512) % 251 + 1
    space.copy_ranges([(dst, src + 256, 256), (dst + 256, src, 256)])
    out = space.view(dst, 512)
    assert out[:256].tolist() == (np.arange(256, 512) % 251 + 1).tolist()
    assert out[256:].tolist() == (np.arange(256) % 251 + 1).tolist()


def test_a_write_past_the_reservation_is_refused_and_nothing_moves() -> None:
    space = AddressSpace()
    pool = space.create_pool(MIB, oom_code=OOM)
    src, dst = pool.allocate(PAGE), pool.allocate(512)
    space.view(src, PAGE)[:] = 7
    with pytest.raises(SimError, match="crosses the end of its allocation") as caught:
        space.copy_ranges([(dst, src, 512), (dst + PAGE - 8, src, 16)])
    assert caught.value.code is LLMStatusCode.LLM_PARAM_INVALID
    assert not space.view(dst, 512).any()  # the first range did not move either
    assert space.backed_bytes == PAGE + 512  # and no padding was backed for it


def test_a_copy_into_the_padding_is_kept_and_read_back() -> None:
    space = AddressSpace()
    pool = space.create_pool(MIB, oom_code=OOM)
    src, dst = pool.allocate(PAGE), pool.allocate(512)
    space.view(src, PAGE)[:] = np.arange(PAGE) % 255 + 1
    space.copy(dst + 1000, src, 100)  # inside the reservation, past the 512 bytes asked for
    assert space.backed_bytes == PAGE + PAGE  # the padding got bytes of its own on first touch
    space.copy(src, dst + 1000, 100)
    assert space.view(src, 100).tolist() == (np.arange(100) % 255 + 1).tolist()
    assert not space.view(dst, 512).any()


def test_a_copy_across_the_end_of_the_request_keeps_earlier_views_aliased() -> None:
    space = AddressSpace()
    pool = space.create_pool(MIB, oom_code=OOM)
    src, dst = pool.allocate(PAGE), pool.allocate(512)
    space.view(src, PAGE)[:] = np.arange(PAGE) % 255 + 1
    tensor = space.view(dst, 512)  # as a client's tensor view would be
    space.copy(dst + 500, src, 24)  # 12 bytes in the cache, 12 in its padding
    expected = (np.arange(24) % 255 + 1).tolist()
    assert tensor[500:].tolist() == expected[:12]
    assert space.view(dst + 500, 24).tolist() == expected  # a view across the end joins the pieces
    assert space.backed_bytes == 2 * PAGE


def test_a_copy_across_the_end_within_one_allocation_reads_before_it_writes() -> None:
    space = AddressSpace()
    pool = space.create_pool(MIB, oom_code=OOM)
    address = pool.allocate(512)
    space.view(address, 512)[:] = np.arange(512) % 251 + 1
    space.copy(address + 500, address + 480, 40)  # overlapping, and across the end of the request
    before = (np.arange(480, 512) % 251 + 1).tolist() + [0] * 8  # the source as it was, padding zeroed
    assert space.view(address + 500, 40).tolist() == before


def test_freeing_drops_the_padding_too() -> None:
    space = AddressSpace()
    pool = space.create_pool(MIB, oom_code=OOM)
    address = pool.allocate(512)
    space.view(address + 4096, 8)[:] = 1
    assert space.backed_bytes == PAGE
    pool.free(address)
    assert space.backed_bytes == 0
