"""The ranges of a pull into blocks: checked when planned, built only when asked for."""

from __future__ import annotations

from typing import List, Sequence

import pytest

from datadist_sim._status import LLMStatusCode
from datadist_sim._world.caches import CacheEntry
from datadist_sim._world.errors import SimError
from datadist_sim._world.ranges import BlockRanges, Range, blocks_ranges
from datadist_sim._world.requests import PullParams

BLOCK = 64


def _entry(cache_id: int, blocks: int, *, is_blocks: bool = True, tensors: int = 2) -> CacheEntry:
    base = 1 << 60 | cache_id << 32
    addrs = [base + t * (1 << 20) for t in range(tensors)]
    batch = blocks if is_blocks else 1
    return CacheEntry(cache_id, tensors, blocks * BLOCK, batch, addrs, True, is_blocks, False, None)


def _params(src_blocks: Sequence[int], dst_blocks: Sequence[int]) -> PullParams:
    return PullParams(-1, 0, list(src_blocks), list(dst_blocks), [], [], -1, -1, 2)


def _per_block(src: CacheEntry, dst: CacheEntry, src_blocks: List[int], dst_blocks: List[int]) -> List[Range]:
    """The ranges written out one by one, as the planner built them before."""
    ranges = []
    for t in range(src.num_tensors):
        if src.is_blocks:
            for sb, db in zip(src_blocks, dst_blocks):
                ranges.append((dst.addrs[t] + db * BLOCK, src.addrs[t] + sb * BLOCK, BLOCK))
        else:
            for j, db in enumerate(dst_blocks):
                start = j * BLOCK
                if start >= src.batch_bytes:
                    break
                size = min(BLOCK, src.batch_bytes - start)
                ranges.append((dst.addrs[t] + db * BLOCK, src.addrs[t] + start, size))
    return ranges


def test_built_block_ranges_are_one_range_per_block_and_tensor_in_order() -> None:
    src, dst = _entry(1, 8), _entry(2, 8)
    planned = blocks_ranges(src, 0, dst, _params([5, 0, 7], [1, 6, 2]))
    assert isinstance(planned, BlockRanges)
    built = planned.build()
    assert built == _per_block(src, dst, [5, 0, 7], [1, 6, 2])
    assert built[0] == (dst.addrs[0] + 1 * BLOCK, src.addrs[0] + 5 * BLOCK, BLOCK)
    assert len(built) == 6


def test_block_ranges_count_the_bytes_their_ranges_move() -> None:
    src, dst = _entry(1, 8), _entry(2, 8)
    planned = blocks_ranges(src, 0, dst, _params([5, 0, 7], [1, 6, 2]))
    assert planned.nbytes == 6 * BLOCK == sum(r[2] for r in planned.build())


def test_contiguous_source_into_more_blocks_than_it_fills_ends_with_a_short_range() -> None:
    src = CacheEntry(1, 2, 2 * BLOCK + 10, 1, [1 << 60, (1 << 60) + (1 << 20)], True, False, False, None)
    dst = _entry(2, 8)
    planned = blocks_ranges(src, 0, dst, _params([], [4, 1, 3, 0]))
    walked = planned.build()
    assert walked == _per_block(src, dst, [], [4, 1, 3, 0])
    assert [r[2] for r in walked] == [BLOCK, BLOCK, 10] * 2  # the fourth block gets nothing
    assert planned.nbytes == sum(r[2] for r in walked) == 2 * (2 * BLOCK + 10)


@pytest.mark.parametrize(
    ("src_blocks", "dst_blocks", "message"),
    [
        ([0, 1, 2], [3, 9, -1], "local block index 9 out of range [0, 8)"),
        ([0, 1, 2], [-1, 9, 3], "local block index -1 out of range [0, 8)"),
        ([0, 8, -2], [0, 1, 2], "remote block index 8 out of range [0, 8)"),
        ([-2, 8, 0], [0, 1, 2], "remote block index -2 out of range [0, 8)"),
    ],
)
def test_an_out_of_range_block_is_named_first_in_list_order(
    src_blocks: List[int], dst_blocks: List[int], message: str
) -> None:
    with pytest.raises(SimError) as caught:
        blocks_ranges(_entry(1, 8), 0, _entry(2, 8), _params(src_blocks, dst_blocks))
    assert caught.value.code is LLMStatusCode.LLM_PARAM_INVALID
    assert message in caught.value.message
