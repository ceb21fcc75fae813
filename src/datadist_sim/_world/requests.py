"""The typed requests a face hands the world through the door, and their parameters, in one module.

A face validates a public call in the real library's order, then builds one of these; from here on the
same request takes the same path whichever face made it (v1, v2, the fabric). They hold values only:
no locks, no time, no world, so every world module may import them and none of them imports back.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import List, NamedTuple, Sequence, Tuple

from datadist_sim._world.cluster import Endpoint
from datadist_sim._world.keys import Key

_PARAM_FIELDS = (
    "size",
    "batch_index",
    "src_blocks",
    "dst_blocks",
    "src_tensors",
    "dst_tensors",
    "src_offset",
    "dst_offset",
    "tensor_num_per_layer",
)
"""``PullParams``' fields, in the order the real ``pull_cache_v2`` takes them."""


class PullParams:
    """Which part of a cache a pull or push moves (the real ``pull_cache_v2`` parameters, by name). A
    slotted class rather than a ``NamedTuple``: one is made on most pulls, and this costs less to make.
    Never changed once made (``whole_batch`` shares them)."""

    __slots__ = _PARAM_FIELDS

    def __init__(
        self,
        size: int,
        batch_index: int,
        src_blocks: Sequence[int],
        dst_blocks: Sequence[int],
        src_tensors: Sequence[int],
        dst_tensors: Sequence[int],
        src_offset: int,
        dst_offset: int,
        tensor_num_per_layer: int,
    ) -> None:
        self.size = size
        """Bytes per tensor of a contiguous pull; -1 for the whole batch."""
        self.batch_index = batch_index
        self.src_blocks = src_blocks
        self.dst_blocks = dst_blocks
        self.src_tensors = src_tensors
        self.dst_tensors = dst_tensors
        self.src_offset = src_offset
        """Bytes into each source batch (-1: 0)."""
        self.dst_offset = dst_offset
        self.tensor_num_per_layer = tensor_num_per_layer

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in _PARAM_FIELDS)
        return f"PullParams({fields})"


@functools.lru_cache(maxsize=1024)
def whole_batch(size: int, batch_index: int, tensor_num_per_layer: int) -> PullParams:
    """The commonest pull's parameters: ``size`` bytes (-1: all) of batch ``batch_index`` of every
    tensor, with no layer range, block or offset. Made once per distinct pull and shared, since nothing
    changes a ``PullParams`` once made: making one per call was 4 % of a small pull."""
    return PullParams(size, batch_index, (), (), (), (), -1, -1, tensor_num_per_layer)


class PullRequest:
    """Pull what ``key`` names on its cluster into the local cache ``dst_cache_id`` (blocks or batches).
    A slotted class rather than a ``NamedTuple``: one is made on every pull, and this costs less."""

    __slots__ = ("blocks", "dst_cache_id", "key", "params")

    def __init__(self, dst_cache_id: int, key: Key, params: PullParams, blocks: bool) -> None:
        self.dst_cache_id = dst_cache_id
        self.key = key
        self.params = params
        self.blocks = blocks

    def __repr__(self) -> str:
        return (
            f"PullRequest(dst_cache_id={self.dst_cache_id!r}, key={self.key!r}, params={self.params!r}, "
            f"blocks={self.blocks!r})"
        )


@dataclass(frozen=True)
class LinkRequest:
    """One ``LLMClusterInfo`` as the engine sees it: the peer's id and the endpoints on both sides."""

    remote_cluster_id: int
    local: Tuple[Endpoint, ...]
    remote: Tuple[Endpoint, ...]


class CacheSpec(NamedTuple):
    """A cache to allocate or register: ``num_tensors`` tensors of ``tensor_size`` bytes in
    ``batch_size`` batches (blocks), on the device or the host, bound to ``keys``."""

    num_tensors: int
    tensor_size: int
    batch_size: int
    device: bool
    is_blocks: bool
    keys: List[Key]
    remote_accessible: bool = True
    """A registration's ``remote_accessible`` as the face resolved it (an allocation always is)."""


class Allocated(NamedTuple):
    """A cache the world made: its id and the address of each tensor."""

    cache_id: int
    addrs: List[int]


class PushRequest(NamedTuple):
    """Write batch ``src_batch`` of the local cache ``src_cache_id`` into what ``key`` names remotely."""

    src_cache_id: int
    src_batch: int
    key: Key
    params: PullParams
    kind: str = "push"


class AddrPushRequest(NamedTuple):
    """Write local tensors to raw addresses of ``remote_id`` (a ``TransferConfig``)."""

    remote_id: int
    src_cache_id: int
    src_batch: int
    tensor_indices: Sequence[int]
    dst_addrs: Sequence[int]
    src_blocks: Sequence[int]
    dst_blocks: Sequence[int]
    dst_block_size: int


class CopyRequest(NamedTuple):
    """Copy ``size`` bytes (-1: the rest of the batch) at ``offset`` of one batch of each tensor, between
    two local caches."""

    dst_cache_id: int
    src_cache_id: int
    dst_batch: int
    src_batch: int
    offset: int
    size: int


class SwapRequest(NamedTuple):
    """Move blocks between a host and a device cache: ``pairs`` of (source, destination) block indices
    of each tensor pair ``(src_addrs[i], dst_addrs[i])``; blocks are ``block_size`` bytes."""

    src_addrs: Sequence[int]
    dst_addrs: Sequence[int]
    block_size: int
    pairs: Sequence[Tuple[int, int]]
