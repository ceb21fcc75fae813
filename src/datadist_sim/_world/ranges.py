"""Transfer planning: which ``(dst, src, nbytes)`` ranges a pull or a push moves, checked before a byte moves.

Pure functions of the caches involved (no locks, no time, no faults): ``transfer`` runs them under the
world lock and commits their ranges all or nothing.

``PullParams`` holds what the face's ``pull_cache_v2`` call gets (the same fields, by name); empty index
lists mean "all tensors", offsets ``-1`` mean 0.

How the engine sees a cache (hixl ``cache_manager.cc:221-232``, ``CreateCacheEntry``): a contiguous
cache has ``shape[0]`` batches whose stride is ``tensor_size / shape[0]``; a blocks cache counts as *one*
batch whose stride is one block. A layer-wise push with no destination blocks is a cache-to-cache copy
on that geometry (``layer_wise_transfer_job.cc:28-44``, ``141-142``), whichever kind each side is.
"""

from __future__ import annotations

import functools
from typing import List, Optional, Sequence, Tuple

from datadist_sim._status import LLMStatusCode
from datadist_sim._world.caches import CacheEntry
from datadist_sim._world.errors import SimError
from datadist_sim._world.requests import PullParams

Range = Tuple[int, int, int]
_P = LLMStatusCode.LLM_PARAM_INVALID


def geometry(entry: CacheEntry) -> Tuple[int, int]:
    """``(batches, stride)`` of a cache as the engine counts them: a blocks cache is one batch whose
    stride is one block (``cache_manager.cc:221-224``)."""
    if entry.is_blocks:
        return 1, entry.batch_bytes
    return entry.batch_size, entry.batch_bytes


def check_layer_split(num_tensors: int, tensor_num_per_layer: int, side: str) -> None:
    """Layer-wise transfers cut a cache into layers of ``tensor_num_per_layer`` tensors; a count that does
    not divide the tensor count is ``LLM_PARAM_INVALID`` (``layer_wise_transfer_job.cc:129-133`` for a
    push's source, ``data_cache_engine.cc:411-419`` for a pull's destination when layers are given)."""
    if tensor_num_per_layer <= 0 or num_tensors % tensor_num_per_layer:
        raise SimError(
            _P,
            f"when using layer wise transfer, the tensor_num [{num_tensors}] of the {side} cache must be a "
            f"multiple of tensor_num_per_layer [{tensor_num_per_layer}]",
        )


@functools.cache
def same_tensors(count: int) -> Sequence[Tuple[int, int]]:
    """``(i, i)`` for each of ``count`` tensors, made once per count (most pulls move every tensor)."""
    return tuple((i, i) for i in range(count))


def tensor_pairs(
    src: CacheEntry, dst: CacheEntry, src_idx: Sequence[int], dst_idx: Sequence[int]
) -> Sequence[Tuple[int, int]]:
    if not src_idx and not dst_idx:
        if src.num_tensors != dst.num_tensors:
            raise SimError(_P, f"num_tensors mismatch: remote {src.num_tensors}, local {dst.num_tensors}")
        return same_tensors(src.num_tensors)
    s = list(src_idx) if src_idx else list(range(src.num_tensors))
    d = list(dst_idx) if dst_idx else (list(src_idx) if src_idx else list(range(dst.num_tensors)))
    if len(s) != len(d):
        raise SimError(_P, f"layer ranges name {len(s)} remote and {len(d)} local tensors")
    for i in s:
        if not 0 <= i < src.num_tensors:
            raise SimError(_P, f"remote tensor index {i} out of range [0, {src.num_tensors})")
    for i in d:
        if not 0 <= i < dst.num_tensors:
            raise SimError(_P, f"local tensor index {i} out of range [0, {dst.num_tensors})")
    return list(zip(s, d))


class Contiguous:
    """What a contiguous pull moves: ``chunk`` bytes of each tensor pair ``(s, d)`` of ``src`` and ``dst``,
    from ``src_start`` of the source tensor to ``dst_start`` of the destination tensor; ``nbytes`` in
    all. Like ``BlockRanges``, its ranges are built only where a copy goes range by range."""

    __slots__ = ("chunk", "dst", "dst_start", "nbytes", "pairs", "src", "src_start")

    def __init__(
        self,
        src: CacheEntry,
        dst: CacheEntry,
        pairs: Sequence[Tuple[int, int]],
        src_start: int,
        dst_start: int,
        chunk: int,
    ) -> None:
        self.src, self.dst, self.pairs = src, dst, pairs
        self.src_start, self.dst_start, self.chunk = src_start, dst_start, chunk
        self.nbytes = chunk * len(pairs)

    def build(self) -> List[Range]:
        """The ranges, one per tensor pair, in the order they are copied."""
        src, dst, chunk = self.src, self.dst, self.chunk
        return [(dst.addrs[d] + self.dst_start, src.addrs[s] + self.src_start, chunk) for s, d in self.pairs]


def contiguous_plan(src: CacheEntry, src_batch: int, dst: CacheEntry, params: PullParams) -> Contiguous:
    size, batch_index, src_off, dst_off = (
        params.size,
        params.batch_index,
        params.src_offset,
        params.dst_offset,
    )
    src_idx, dst_idx = params.src_tensors, params.dst_tensors
    if dst.is_blocks or src.is_blocks:
        raise SimError(_P, "blocks and contiguous caches cannot be mixed in pull_cache")
    if batch_index >= dst.batch_size:
        raise SimError(_P, f"batch_index {batch_index} >= local batch size {dst.batch_size}")
    if not 0 <= src_batch < src.batch_size:
        raise SimError(_P, f"source batch {src_batch} out of range [0, {src.batch_size})")
    src_off = src_off if src_off > 0 else 0
    dst_off = dst_off if dst_off > 0 else 0
    src_bytes, dst_bytes = src.batch_bytes, dst.batch_bytes
    nbytes = src_bytes - src_off if size == -1 else size
    if nbytes < 0 or src_off + nbytes > src_bytes or dst_off + nbytes > dst_bytes:
        raise SimError(
            _P,
            f"size {nbytes} with offsets {src_off}/{dst_off} exceeds the batch "
            f"(remote {src_bytes} B, local {dst_bytes} B)",
        )
    pairs = tensor_pairs(src, dst, src_idx, dst_idx)
    return Contiguous(
        src, dst, pairs, src_batch * src_bytes + src_off, batch_index * dst_bytes + dst_off, nbytes
    )


def contiguous_ranges(src: CacheEntry, src_batch: int, dst: CacheEntry, params: PullParams) -> List[Range]:
    return contiguous_plan(src, src_batch, dst, params).build()


def _first_outside(blocks: Sequence[int], limit: int) -> Optional[int]:
    """The first block not in ``[0, limit)``, or None: ``min``/``max`` answer the common case without a
    Python loop; the loop runs only to name the culprit, in the order a per-block check would."""
    if not blocks or (min(blocks) >= 0 and max(blocks) < limit):
        return None
    return next(b for b in blocks if not 0 <= b < limit)


def _index_text(index: int) -> str:
    """A block index as a message shows it: ``str()`` of an int past Python's digit limit raises, and a
    list of ints reaches here checked for its items' type only (as the real ``pull_blocks`` checks it)."""
    return str(index) if index.bit_length() <= 128 else f"<an int of {index.bit_length()} bits>"


class BlockRanges:
    """The ``(dst, src, nbytes)`` ranges of a pull into blocks, checked when planned and built only if
    someone needs them (``build``): a copy that moves all blocks of a tensor in one step needs only the
    tensor pairs, the blocks and ``nbytes`` (building a tuple per block and tensor cost more than that
    copy itself)."""

    __slots__ = ("base", "dst", "dst_blocks", "nbytes", "pairs", "src", "src_blocks")

    def __init__(
        self,
        src: CacheEntry,
        dst: CacheEntry,
        pairs: Sequence[Tuple[int, int]],
        src_blocks: Sequence[int],
        dst_blocks: Sequence[int],
        base: int,
    ) -> None:
        self.src, self.dst, self.pairs = src, dst, pairs
        self.src_blocks, self.dst_blocks = src_blocks, dst_blocks
        self.base = base  # a contiguous source: where its batch starts in each tensor
        block = dst.batch_bytes
        if src.is_blocks:
            per_tensor = len(dst_blocks) * block
        else:  # consecutive block-sized chunks of the batch, the last one short
            per_tensor = min(len(dst_blocks) * block, src.batch_bytes) if src.batch_bytes > 0 else 0
        self.nbytes = per_tensor * len(pairs)

    def build(self) -> List[Range]:
        """The ranges, one per block and tensor pair, in the order they are copied."""
        src, dst, block = self.src, self.dst, self.dst.batch_bytes
        ranges: List[Range] = []
        if src.is_blocks:
            for s, d in self.pairs:
                for sb, db in zip(self.src_blocks, self.dst_blocks):
                    ranges.append((dst.addrs[d] + db * block, src.addrs[s] + sb * block, block))
            return ranges
        for s, d in self.pairs:
            for j, db in enumerate(self.dst_blocks):
                start = j * block
                if start >= src.batch_bytes:
                    break
                ranges.append(
                    (
                        dst.addrs[d] + db * block,
                        src.addrs[s] + self.base + start,
                        min(block, src.batch_bytes - start),
                    )
                )
        return ranges


def blocks_ranges(src: CacheEntry, src_batch: int, dst: CacheEntry, params: PullParams) -> BlockRanges:
    src_blocks, dst_blocks = params.src_blocks, params.dst_blocks
    src_idx, dst_idx = params.src_tensors, params.dst_tensors
    if not dst.is_blocks:
        raise SimError(_P, "pull_blocks needs a blocks cache as destination")
    block = dst.batch_bytes
    bad = _first_outside(dst_blocks, dst.batch_size)
    if bad is not None:
        raise SimError(_P, f"local block index {_index_text(bad)} out of range [0, {dst.batch_size})")
    pairs = tensor_pairs(src, dst, src_idx, dst_idx)
    if src.is_blocks:
        if not src_blocks:
            raise SimError(_P, "src_blocks can not be empty for a blocks source")
        if len(src_blocks) != len(dst_blocks):
            raise SimError(_P, f"{len(src_blocks)} src blocks but {len(dst_blocks)} dst blocks")
        if src.batch_bytes != block:
            raise SimError(_P, f"block size mismatch: remote {src.batch_bytes} B, local {block} B")
        bad = _first_outside(src_blocks, src.batch_size)
        if bad is not None:
            raise SimError(_P, f"remote block index {_index_text(bad)} out of range [0, {src.batch_size})")
        return BlockRanges(src, dst, pairs, src_blocks, dst_blocks, 0)
    if src_blocks:
        raise SimError(_P, "src_blocks must be empty for a contiguous source")
    return BlockRanges(src, dst, pairs, src_blocks, dst_blocks, src_batch * src.batch_bytes)


def cache_to_cache_ranges(
    src: CacheEntry, src_batch: int, dst: CacheEntry, dst_batch: int, pairs: Sequence[Tuple[int, int]]
) -> List[Range]:
    """A push with no destination blocks: one source stride of each tensor to ``dst_batch`` of the
    destination, each side on its engine geometry (``layer_wise_transfer_job.cc:28-44``, checks at
    ``:224-228`` for the remote batch and ``:32-33`` for the local one; count is the local stride).

    The engine does not check that the stride fits the remote tensor from that batch on (HCCL would
    write past it); the simulator refuses that with ``LLM_PARAM_INVALID`` rather than write outside
    the destination cache.
    """
    dst_batches, dst_stride = geometry(dst)
    if dst_batch >= dst_batches:
        raise SimError(_P, f"batch index [{dst_batch}] is out of range [0, {dst_batches}) of remote cache")
    src_batches, src_stride = geometry(src)
    if src_batch >= src_batches:
        raise SimError(_P, f"batch index [{src_batch}] is out of range [0, {src_batches})")
    start = dst_batch * dst_stride
    if start + src_stride > dst.tensor_size:
        raise SimError(
            _P,
            f"{src_stride} B from batch {dst_batch} cross the end of the remote tensor ({dst.tensor_size} B)",
        )
    return [(dst.addrs[d] + start, src.addrs[s] + src_batch * src_stride, src_stride) for s, d in pairs]


def push_ranges(
    src: CacheEntry, src_batch: int, dst: CacheEntry, dst_batch: int, params: PullParams
) -> List[Range]:
    """A layer-wise push into a remote cache: cache-to-cache when ``dst_blocks`` is empty, else into the
    named blocks (``layer_wise_transfer_job.cc:141-149``); the source's tensor count must divide into
    layers first (``:129-133``)."""
    dst_blocks, per_layer = params.dst_blocks, params.tensor_num_per_layer
    src_idx, dst_idx = params.src_tensors, params.dst_tensors
    check_layer_split(src.num_tensors, per_layer, "source")
    if not dst_blocks:
        return cache_to_cache_ranges(src, src_batch, dst, dst_batch, tensor_pairs(src, dst, src_idx, dst_idx))
    return blocks_ranges(src, src_batch, dst, params).build()


def addr_ranges(
    src: CacheEntry,
    src_batch: int,
    tensor_indices: Sequence[int],
    dst_addrs: Sequence[int],
    src_blocks: Sequence[int],
    dst_blocks: Sequence[int],
    dst_block_size: int,
) -> List[Range]:
    """``transfer_cache_async`` with a ``TransferConfig``: local tensors to remote raw addresses.

    No destination blocks: one source stride of the batch (a blocks source is one batch of one block)
    to each address. Contiguous source with ``dst_blocks``: ``dst_block_size`` chunks to
    ``addr + block * dst_block_size``. Blocks source with ``src_blocks``: each ``src_blocks[j]`` goes
    to ``addr + dst_blocks[j] * dst_block_size`` (``dst_block_size`` 0 means the source block size).
    """
    if len(tensor_indices) != len(dst_addrs):
        raise SimError(_P, f"{len(tensor_indices)} tensors but {len(dst_addrs)} dst addrs")
    batches, stride = geometry(src)
    ranges: List[Range] = []
    for index, dst_addr in zip(tensor_indices, dst_addrs):
        if not 0 <= index < src.num_tensors:
            raise SimError(_P, f"tensor index {index} out of range [0, {src.num_tensors})")
        base = src.addrs[index]
        if src_blocks:
            block = src.batch_bytes
            step = dst_block_size or block
            for sb, db in zip(src_blocks, dst_blocks):
                if not 0 <= sb < src.batch_size:
                    raise SimError(_P, f"src block {sb} out of range [0, {src.batch_size})")
                ranges.append((dst_addr + db * step, base + sb * block, block))
            continue
        if src_batch >= batches:
            raise SimError(_P, f"src_batch_index {src_batch} >= batch size {batches}")
        start = base + src_batch * stride
        if not dst_blocks:
            ranges.append((dst_addr, start, stride))
            continue
        if dst_block_size <= 0:
            raise SimError(_P, "dst_block_memory_size must be > 0 for a cache-to-blocks transfer")
        for j, db in enumerate(dst_blocks):
            offset = j * dst_block_size
            if offset >= stride:
                break
            size = min(dst_block_size, stride - offset)
            ranges.append((dst_addr + db * dst_block_size, start + offset, size))
    return ranges
