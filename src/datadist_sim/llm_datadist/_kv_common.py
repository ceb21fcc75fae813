"""What ``CacheManager`` (v2) and ``KvCacheManager`` (v1) build the same way once their own checks pass.

The two vendor files check their arguments each in its own order (which each manager keeps, call for
call), then turn them into the same engine requests; that part lives here once. What really differs
between the packages is a parameter, named where it is passed: how ``copy_cache`` checks ``req_id``,
and which tensor addresses ``swap_blocks`` sends.
The errors raised here are ``llm_datadist`` ones; a v1 manager's ``v1_call`` turns them into its own.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Sequence, Tuple

from datadist_sim._world import door
from datadist_sim._world.door import ClusterNode, SimError, SimWorld
from datadist_sim.llm_datadist._engine import engine_call, engine_failed
from datadist_sim.llm_datadist.status import raise_if_false
from datadist_sim.llm_datadist.v2._caches import CacheDesc, Placement

NUM_TENSORS_PER_LAYER = 2
"""``tensor_num_per_layer``'s default in both packages (a key and a value tensor per layer)."""
UINT32_MAX, INT64_MAX = 2**32 - 1, 2**63 - 1
INVALID_ID = 2**64 - 1
"""The id the engine reads as "none" (``UINT64_MAX``), sent when ``copy_cache`` is given no ``req_id``."""


# -- pulls ------------------------------------------------------------------------------------------


def plain_pull_numbers(batch_index: object, size: object) -> bool:
    """True when ``batch_index`` and ``size`` are plain ints that every check of ``pull_cache`` in either
    package accepts (``batch_index`` a uint32; ``size`` -1 or a positive int64): the numeric half of each
    manager's shortcut past its checks. Each manager adds the tests of its own checks (role, key and
    cache types, placement or blocks cache)."""
    return (
        type(batch_index) is int
        and 0 <= batch_index <= UINT32_MAX
        and type(size) is int
        and (size == -1 or 0 < size <= INT64_MAX)
    )


def submit_pull(
    world: SimWorld, node: ClusterNode, request: door.PullRequest, func_name: str, info: str, arg: object
) -> None:
    """Send one checked pull to the engine; its failure leaves as ``func_name failed, ..., info``."""
    try:
        door.pull(world, node, request)
    except SimError as exc:
        engine_failed(exc, func_name, info, arg)


# -- copies -----------------------------------------------------------------------------------------


def copy_cache(
    world: SimWorld,
    node: ClusterNode,
    dst: Any,
    src: Any,
    dst_batch_index: int,
    src_batch_index: int,
    offset: int,
    size: int,
    req_id: Optional[int],
    check_req_id: Callable[[str, Any], None],
) -> None:
    """The end of ``copy_cache`` in both packages, after each has checked its caches and the numbers:
    the size rule, then ``req_id`` checked by ``check_req_id`` (the one difference: v2 wants a uint64,
    hixl ``src/python/llm_datadist/llm_datadist/v2/cache_manager.py:176-177``; v1 any int, ge
    ``api/python/llm_datadist_v1/kv_cache_manager.py:555-556``), then the engine call with the vendor's
    parameter tuple as its message."""
    raise_if_false(
        size == -1 or size > 0,
        "[copy_cache] param check failed, size ({0}) is invalid, should be = -1 or > 0",
        size,
    )
    if req_id is not None:
        check_req_id("req_id", req_id)
    else:
        req_id = INVALID_ID
    param: Tuple[Any, ...] = (
        dst.cache_id,
        src.cache_id,
        dst_batch_index,
        src_batch_index,
        offset,
        size,
        req_id,
        [],
    )
    with engine_call("[copy_cache]", f"param = {param}"):
        request = door.CopyRequest(dst.cache_id, src.cache_id, dst_batch_index, src_batch_index, offset, size)
        door.copy_cache(world, node, request)


# -- swaps ------------------------------------------------------------------------------------------


def check_block_pairs(src: CacheDesc, dst: CacheDesc, src_to_dst: Dict[int, int]) -> None:
    """The checks both packages' ``swap_blocks`` make after their own type checks, in the same order and
    words (hixl ``src/python/llm_datadist/llm_datadist/v2/cache_manager.py:442-461``, ge
    ``api/python/llm_datadist_v1/kv_cache_manager.py:426-452``): equal block sizes, equal tensor counts,
    every block index inside its cache."""
    src_block_size = src.size // src.batch_size
    dst_block_size = dst.size // dst.batch_size
    raise_if_false(
        src_block_size == dst_block_size,
        f"src block size:{src_block_size} and dst block size:{dst_block_size} must be equal",
    )
    src_num = src.num_tensors
    dst_num = dst.num_tensors
    raise_if_false(
        src_num == dst_num, f"src num_tensors:{src_num} and dst num_tensors:{dst_num} must be equal"
    )
    src_block_num = src.batch_size
    dst_block_num = dst.batch_size
    for src_block_index, dst_block_index in src_to_dst.items():
        raise_if_false(
            0 <= src_block_index < src_block_num,
            f"src_block_index:{src_block_index} must be in [0, {src_block_num})",
        )
        raise_if_false(
            0 <= dst_block_index < dst_block_num,
            f"dst_block_index:{dst_block_index} must be in [0, {dst_block_num})",
        )


def swap_blocks(
    world: SimWorld,
    src: CacheDesc,
    dst: CacheDesc,
    src_addrs: Sequence[int],
    dst_addrs: Sequence[int],
    src_to_dst: Dict[int, int],
) -> None:
    """The rest of ``swap_blocks`` in both packages once the caches are checked: only host to device or
    device to host (hixl ``v2/cache_manager.py:473-478``, ge ``kv_cache_manager.py:608-615``), then one
    engine call of whole blocks. The addresses are the one difference: v2 sends its one device's
    (``v2/cache_manager.py:484-485``), v1 every device's (``kv_cache_manager.py:621-622``)."""
    src_placement = src.placement
    dst_placement = dst.placement
    is_swap_in = src_placement == Placement.HOST and dst_placement == Placement.DEVICE
    is_swap_out = src_placement == Placement.DEVICE and dst_placement == Placement.HOST
    raise_if_false(
        is_swap_in or is_swap_out,
        f"swap src placement:{src_placement} to dst placement:{dst_placement} is not support",
    )
    block_size = src.size // src.batch_size
    request = door.SwapRequest(src_addrs, dst_addrs, block_size, list(src_to_dst.items()))
    with engine_call("[swap_blocks]", "swap blocks failed"):
        door.swap_blocks(world, request)
