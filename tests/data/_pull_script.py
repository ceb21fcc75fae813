"""The scripts ``test_pull_paths_agree`` runs twice (``_pull_paths``): a world's setup and a list of
steps around pulls, as plain data (named tuples), so that hypothesis shows a failing one readably and
both runs read the same one. Caches are named by their index in the order a side allocated or
registered them, so a step means the same cache in both runs as long as the runs agree up to it.
"""

from __future__ import annotations

from typing import NamedTuple, Optional, Tuple, Union

PAD = 2**64 - 1
"""``UINT64_MAX``: no prefix id (and a placeholder request id)."""
GONE_ID = 5
"""A cluster id no instance ever had."""
HIDDEN = 16  # fp16: a batch of one tensor is seq * 32 bytes


class Setup(NamedTuple):
    """How the world and the pair are made."""

    v2: bool
    """``CacheManager`` (v2) or ``KvCacheManager`` (v1) face."""
    legacy: bool = False
    """``SimConfig(legacy_codes=True)``."""
    other_clock: bool = False
    """A subclass of ``VirtualClock``: the same time, but the fast path's ``type(clock) is VirtualClock``
    branch is not taken (it lets time pass outside the lock, as for a real clock)."""
    metadata_only: bool = False
    hixl: bool = False
    """``llm.TransferBackend=hixl`` (one-sided links)."""
    sync_ms: Optional[str] = None
    """``llm.SyncKvCacheWaitTime`` (None: the 1000 ms default)."""
    bandwidth: Optional[float] = None
    """Bytes/s of the Decode-Prompt link (None: the default RoCE figure)."""
    linked: bool = True
    reverse: bool = False
    """The Prompt pulls from the Decoder (a CacheManager of either role pulls over a two-sided link; a
    KvCacheManager Prompt is refused). Sides and key clusters in the script are swapped: ``P_ID`` still
    names the source side."""
    comm: bool = False
    """v2 only: the pair links by rank table (``LLMDataDist.link``, polled until the comm is OK) instead
    of ``link_clusters``."""
    comm_keeps_link: bool = False
    """``SimConfig(comm_timeout_keeps_link=True)``: a timed-out transfer leaves a rank-table link usable."""
    beside_thread: bool = False
    """Another thread (idle) lives through the whole script, as a fabric's or an executor's would: the
    fast path then takes the world's and the stores' locks (``pull_shortcut._beside_others``)."""


class ReqKey(NamedTuple):
    cluster: int
    req: int
    prefix: int = PAD
    model: int = 0


class IdKey(NamedTuple):
    cluster: int
    cache: int
    """Index of a Prompt-side cache (modulo how many there are), or ``-1``: a cache id never given."""
    batch: int = 0


class BlocksKey(NamedTuple):
    cluster: int
    model: int = 0


Key = Union[ReqKey, IdKey, BlocksKey]


class Layers(NamedTuple):
    """The layer-range kwargs of a pull (None: left out), and, for v1, its byte offsets."""

    src: Optional[Tuple[int, int]] = None
    dst: Optional[Tuple[int, int]] = None
    per_layer: Optional[int] = None
    src_offset: Optional[int] = None
    dst_offset: Optional[int] = None


DstIndex = int
"""A pull's destination: ``i >= 0`` is the ``i``-th (modulo their number) Decode cache of the kind the
call takes (contiguous for ``pull_cache``, blocks for ``pull_blocks``), or of any kind if there is none;
``~i`` (negative) is the ``i``-th of all Decode caches, in the order they were made."""


class Alloc(NamedTuple):
    side: int
    blocks: bool
    batch: int
    tensors: int
    seq: int
    keys: Tuple[Key, ...] = ()


class Register(NamedTuple):
    """Register caller-owned numpy buffers as a contiguous cache (v2; a v1 face, which has no
    registration, allocates the same cache instead)."""

    side: int
    batch: int
    tensors: int
    seq: int
    keys: Tuple[ReqKey, ...] = ()


class Dealloc(NamedTuple):
    side: int
    cache: int


class RemoveKey(NamedTuple):
    key: ReqKey


class Pull(NamedTuple):
    key: Key
    dst: int
    """Which Decode cache: see ``DstIndex``."""
    batch_index: int = 0
    size: int = -1
    layers: Optional[Layers] = None


class PullBlocks(NamedTuple):
    key: Key
    dst: int
    """Which Decode cache: see ``DstIndex``."""
    src_blocks: Tuple[int, ...]
    dst_blocks: Tuple[int, ...]
    layers: Optional[Layers] = None


class Act(NamedTuple):
    """Something around the pulls: ``unlink``, ``link``, ``finalize_prompt``, ``restart_prompt``,
    ``kill_prompt``, ``kill_decode``, ``slow_link``, ``fast_link``."""

    what: str


Step = Union[Alloc, Register, Dealloc, RemoveKey, Pull, PullBlocks, Act]


class Case(NamedTuple):
    setup: Setup
    steps: Tuple[Step, ...]


SLOW_BYTES_PER_S = 500.0
"""A link on which a pull over ~500 B outlasts the default 1 s ``sync_kv_timeout``."""
