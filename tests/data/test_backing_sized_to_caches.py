"""Caches are backed by the bytes they asked for, not by whole pages, through the API."""

from __future__ import annotations

import numpy as np
from tests.data.conftest import P_ID, pair

from datadist_sim._world.world import SimWorld
from datadist_sim.llm_datadist import BlocksCacheKey, CacheDesc, CacheKeyByIdAndIndex, DataType

SMALL = CacheDesc(1, [1, 256], DataType.DT_FLOAT16)  # 512 B, in a pool of 64 KiB pages


def _bytes(world: SimWorld, address: int, nbytes: int = 512) -> np.ndarray:
    return world.memory.view(address, nbytes).copy()


def test_a_512_byte_cache_holds_512_bytes_and_pulls_fill_them_exactly(world: SimWorld) -> None:
    p, d = pair(v2=True)
    src = p.cache_manager.allocate_cache(SMALL)
    dst = d.cache_manager.allocate_cache(SMALL)
    assert world.memory.backed_bytes == 2 * 512
    (address,) = src.tensor_addrs
    world.memory.view(address, 512)[:] = np.arange(512) % 253 + 1
    d.cache_manager.pull_cache(CacheKeyByIdAndIndex(P_ID, src.cache_id, 0), dst, 0)
    assert _bytes(world, dst.tensor_addrs[0]).tolist() == (np.arange(512) % 253 + 1).tolist()
    assert world.memory.backed_bytes == 2 * 512  # nothing past the caches' bytes was touched


def test_a_view_past_a_cache_s_bytes_leaves_later_pulls_landing_where_it_is_read(world: SimWorld) -> None:
    p, d = pair(v2=True)
    src = p.cache_manager.allocate_cache(SMALL)
    dst = d.cache_manager.allocate_cache(SMALL)
    key = CacheKeyByIdAndIndex(P_ID, src.cache_id, 0)
    (s_addr,), (d_addr,) = src.tensor_addrs, dst.tensor_addrs
    world.memory.view(s_addr, 512)[:] = 1
    d.cache_manager.pull_cache(key, dst, 0)  # the fast path keeps views of both caches' bytes
    assert world.memory.view(d_addr, 1024)[:512].tolist() == [1] * 512  # joins cache and padding
    world.memory.view(s_addr, 512)[:] = 2
    d.cache_manager.pull_cache(key, dst, 0)
    assert _bytes(world, d_addr).tolist() == [2] * 512


def test_pull_blocks_into_a_cache_smaller_than_a_page_lands_on_block_boundaries(world: SimWorld) -> None:
    p, d = pair(v2=True)
    blocks = CacheDesc(2, [4, 32], DataType.DT_FLOAT16)  # 4 blocks of 64 B per tensor: 256 B, in 64 KiB pages
    src = p.cache_manager.allocate_blocks_cache(blocks, BlocksCacheKey(P_ID, 0))
    dst = d.cache_manager.allocate_blocks_cache(blocks)
    assert world.memory.backed_bytes == 4 * 256
    for t, address in enumerate(src.tensor_addrs):
        world.memory.view(address, 256)[:] = np.repeat(np.arange(4) + 10 * (t + 1), 64)
    d.cache_manager.pull_blocks(BlocksCacheKey(P_ID, 0), dst, [0, 3], [3, 0])  # first and last block
    for t, address in enumerate(dst.tensor_addrs):
        got = _bytes(world, address, 256).reshape(4, 64)
        assert got[0].tolist() == [10 * (t + 1) + 3] * 64
        assert got[3].tolist() == [10 * (t + 1)] * 64
        assert not got[1:3].any()
    assert world.memory.backed_bytes == 4 * 256
