"""Per-instance cache store: memory pools, caches, cache keys and the pull engine.

Keys, and the checks one call's keys go through, are in ``keys``.

Inferences (not in the sources): a cache's batch ``i`` is the ``i``-th equal slice of each tensor (the
batch dimension is taken to be the outermost); a blocks cache's block ``j`` likewise. A pull by
``CacheKey`` into blocks (``pull_blocks`` with a contiguous source) fills the named blocks in order with
consecutive block-sized chunks of the source batch.

Legacy model-mode codes (``SimConfig(legacy_codes=True)``, the README's status-code table): each under the
closest condition of the current API, and only when the switch is on — a prefix key bound twice
(``LLM_PREFIX_ALREADY_EXIST``), a pull of a prefix not loaded (``LLM_PREFIX_NOT_EXIST``), a pull of a
request key a pull already consumed (``LLM_REQUEST_ALREADY_COMPLETED``), a pull longer than the
per-request slice of either cache (``LLM_SEQ_LENOVERLIMIT``), a blocks cache from a pool with no free
page (``LLM_NO_FREE_BLOCK``) or with too little (``LLM_BLOCKS_OUT_OF_MEMORY``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Optional, Sequence, Set, Tuple

from datadist_sim._status import LLMStatusCode
from datadist_sim._world.cluster import Mode, NodeSettings
from datadist_sim._world.errors import SimError
from datadist_sim._world.keys import (
    INVALID_ID as INVALID_ID,
)
from datadist_sim._world.keys import (
    Bound,
    EngineKey,
    PackedKey,
    bind_blocks,
    bind_v1,
    bind_v2,
    blocks_slot,
    engine_key,
    key_ident,
)
from datadist_sim._world.memory import DEFAULT_PAGE_SHIFT, MemoryPool, parse_pool_config
from datadist_sim._world.registration import RegistrationLedger

if TYPE_CHECKING:
    from datadist_sim._world.address_space import AddressSpace

V1_DEFAULT_POOL_BYTES = 1 << 30
V1_DEFAULT_MEM_UTILIZATION = 0.95
COMPLETED_KEPT = 65536
"""Consumed request keys a store remembers under ``legacy_codes`` (older ones read as never bound)."""

_P = LLMStatusCode.LLM_PARAM_INVALID
_NOT_EXIST = LLMStatusCode.LLM_KV_CACHE_NOT_EXIST


@dataclass(eq=False)
class CacheEntry:
    """One cache of one instance: allocated from a pool (owned) or registered (caller's memory)."""

    cache_id: int
    num_tensors: int
    tensor_size: int
    batch_size: int
    addrs: List[int]
    device: bool
    is_blocks: bool
    registered: bool
    pool: Optional[MemoryPool]
    keys: Set[EngineKey] = field(default_factory=set)
    released: bool = False
    remote_accessible: bool = True
    """Registered with the transport, so a peer may read or write it one-sidedly: a registration's
    ``remote_accessible`` (hixl ``comm_mem_manager.cc:75-78`` skips the others); an allocated cache
    always is (the engine's ``CacheDesc`` default, ``llm_inner_types.h:73``, which the Python wrapper
    leaves as it is, ``llm_datadist_v2_wrapper.cc:241-257``)."""
    req_at: Dict[int, EngineKey] = field(default_factory=dict)
    """The request key bound to each batch index (at most one): a pull by cache id finds the key it
    consumes without scanning ``keys`` (a cache may carry thousands)."""
    batch_bytes: int = field(init=False)
    """Bytes of one batch (one block) of each tensor; fixed for the cache's life."""
    views: Optional[Tuple[memoryview, ...]] = field(default=None, init=False, repr=False)
    """Each tensor's bytes, resolved once by the pull fast path (``block_pulls.tensor_views``); dropped when
    the memory is freed."""
    rows: Optional[Tuple[Tuple[memoryview, ...], Tuple[Any, ...]]] = field(
        default=None, init=False, repr=False
    )
    """The same bytes as arrays of whole blocks (``block_pulls.block_rows``), with the views they were made
    from: made again when those change."""

    def __post_init__(self) -> None:
        self.batch_bytes = self.tensor_size // self.batch_size if self.batch_size > 0 else 0


class NodeCaches:
    """Everything cache-related of one initialised instance. Guarded by its own lock."""

    def __init__(
        self, space: AddressSpace, mode: Mode, settings: NodeSettings, *, legacy_codes: bool = False
    ) -> None:
        self.space = space
        self.mode = mode
        self.legacy_codes = legacy_codes
        self.completed: Dict[EngineKey, None] = {}
        """Request keys consumed by a pull, oldest first (kept only with ``legacy_codes``)."""
        self.lock = threading.RLock()
        self.oom_code = (
            LLMStatusCode.LLM_OUT_OF_MEMORY
            if mode is Mode.CACHE_MANAGER
            else LLMStatusCode.LLM_DEVICE_OUT_OF_MEMORY
        )
        opts = settings.options
        self.device_pool: Optional[MemoryPool] = None
        self.host_pool: Optional[MemoryPool] = None
        if mode is Mode.CACHE_MANAGER:
            if opts.get("llm.MemPoolConfig"):
                size, shift = parse_pool_config(opts["llm.MemPoolConfig"])
                self.device_pool = space.create_pool(
                    size, oom_code=self.oom_code, page_shift=shift, name="device"
                )
            if opts.get("llm.HostMemPoolConfig"):
                size, shift = parse_pool_config(opts["llm.HostMemPoolConfig"])
                self.host_pool = space.create_pool(
                    size, oom_code=self.oom_code, page_shift=shift, name="host"
                )
        else:
            raw = opts.get("ge.flowGraphMemMaxSize", "")
            total = int(raw) if raw.isdigit() and int(raw) > 0 else V1_DEFAULT_POOL_BYTES
            try:
                util = float(opts.get("llm.MemUtilization", V1_DEFAULT_MEM_UTILIZATION))
            except ValueError as exc:
                raise SimError(_P, f"invalid llm.MemUtilization: {exc}") from exc
            size = max(int(total * util), 1 << DEFAULT_PAGE_SHIFT)
            self.device_pool = space.create_pool(size, oom_code=self.oom_code, name="device")
        self.ledger = RegistrationLedger()
        self.caches: Dict[int, CacheEntry] = {}
        self.key_table: Dict[EngineKey, Tuple[int, int]] = {}
        self._next_id = 1
        self.inflight: Set[Tuple[PackedKey, int]] = set()
        self._link_locks: Dict[int, threading.Lock] = {}
        self.ops: Dict[int, Dict[str, int]] = {}
        """Transfers in flight per remote cluster, by kind (``pull``, ``transfer``, ``push``)."""
        self.on_registration: Callable[[], None] = lambda: None
        """Called after a registered cache comes or goes (the hixl backend's engine follows the
        instance's registered memory, ``hixl_served``)."""

    def link_lock(self, remote_id: int) -> threading.Lock:
        """The mutex serialising this instance's transfers on its link to ``remote_id``."""
        with self.lock:
            return self._link_locks.setdefault(remote_id, threading.Lock())

    # -- allocation and registration -------------------------------------------------------------

    def _legacy_prefix(self, ek: EngineKey) -> bool:
        return self.legacy_codes and ek[0] == "prefix"

    def _add(self, entry: CacheEntry, bound: List[Tuple[EngineKey, int]]) -> CacheEntry:
        for ek, index in bound:
            self.key_table[ek] = (entry.cache_id, index)
            entry.keys.add(ek)
            if ek[0] == "req":
                entry.req_at[index] = ek
            if self.legacy_codes:
                self.completed.pop(ek, None)
        self.caches[entry.cache_id] = entry
        self._next_id += 1
        return entry

    def allocate(
        self,
        num_tensors: int,
        tensor_size: int,
        batch_size: int,
        *,
        device: bool,
        is_blocks: bool,
        keys: Sequence[PackedKey] = (),
    ) -> CacheEntry:
        with self.lock:
            pool = self.device_pool if device else self.host_pool
            if pool is None:
                raise SimError(
                    LLMStatusCode.LLM_FEATURE_NOT_ENABLED,
                    f"no {'device' if device else 'host'} memory pool is configured",
                )
            # v1 checks the keys before it allocates (GE ``cache_manager.cpp:36-62``); v2 allocates first
            # and checks the keys under its lock (hixl ``cache_manager.cc:183-199``), freeing on failure.
            v2 = self.mode is Mode.CACHE_MANAGER
            bound = [] if v2 else self._check_keys(keys, batch_size, is_blocks)
            if self.legacy_codes and is_blocks:
                addrs = _legacy_blocks_allocate(pool, tensor_size, num_tensors)
            else:
                addrs = pool.allocate_many([tensor_size] * num_tensors)
            if v2:
                try:
                    bound = self._check_keys(keys, batch_size, is_blocks)
                except SimError:
                    for address in addrs:
                        pool.free(address)
                    raise
            entry = CacheEntry(
                self._next_id, num_tensors, tensor_size, batch_size, addrs, device, is_blocks, False, pool
            )
            return self._add(entry, bound)

    def _check_keys(self, keys: Sequence[PackedKey], batch_size: int, is_blocks: bool) -> Bound:
        v2 = self.mode is Mode.CACHE_MANAGER
        if is_blocks:
            return bind_blocks(self.key_table, keys, v2=v2)
        bind = bind_v2 if v2 else bind_v1
        return bind(self.key_table, keys, batch_size, legacy_codes=self.legacy_codes)

    def register(
        self,
        addrs: Sequence[int],
        tensor_size: int,
        batch_size: int,
        *,
        device: bool,
        is_blocks: bool,
        keys: Sequence[PackedKey] = (),
        remote_accessible: bool = True,
    ) -> CacheEntry:
        with self.lock:
            # hixl binds a registered blocks cache's key by assignment, without ``CheckCacheKeys``
            # (``RegisterCacheEntry``, ``cache_manager.cc:138-149``; ``AddCacheIndices``, ``:264-265``):
            # the last cache registered under a ``BlocksCacheKey`` takes the key over, and a pull by it
            # reads that cache (``send_state.cc:173-178`` looks the key up)
            takes_over = is_blocks and self.mode is Mode.CACHE_MANAGER
            if takes_over:
                bound: Bound = [(ek, 0) for ek in map(engine_key, keys) if ek is not None]
            else:
                bound = self._check_keys(keys, batch_size, is_blocks)
            entry = CacheEntry(
                self._next_id, len(addrs), tensor_size, batch_size, list(addrs), device, is_blocks, True, None
            )
            entry.remote_accessible = remote_accessible
            self.ledger.register(entry.cache_id, addrs, tensor_size, device=device)
            if takes_over:
                for ek, _ in bound:
                    self._unbind(ek)
            self._add(entry, bound)
            self.on_registration()
            return entry

    def _unbind(self, ek: EngineKey) -> None:
        """Take ``ek`` from the cache that holds it; that cache stays, keyless (``RemoveCacheIndices``,
        ``cache_manager.cc:284-291``, later drops a key only where it still names the cache)."""
        held = self.key_table.pop(ek, None)
        holder = None if held is None else self.caches.get(held[0])
        if holder is not None:
            holder.keys.discard(ek)

    def _free(self, entry: CacheEntry) -> None:
        for ek in list(entry.keys):
            self.key_table.pop(ek, None)
        entry.keys.clear()
        entry.req_at.clear()
        entry.views = entry.rows = None
        self.caches.pop(entry.cache_id, None)
        if entry.registered:
            self.ledger.unregister(entry.cache_id)
            self.on_registration()
        if entry.pool is not None:
            for address in entry.addrs:
                entry.pool.free(address)
            entry.pool = None

    def deallocate(self, cache_id: int, *, missing_ok: bool) -> None:
        """Drop the cache-id reference; the memory goes once no key remains (a deferred
        free: a pull may still name a key after its cache id is deallocated)."""
        with self.lock:
            entry = self.caches.get(cache_id)
            if entry is None or entry.released:
                if missing_ok:
                    return
                raise SimError(_NOT_EXIST, f"cache {cache_id} does not exist")
            if entry.registered:
                return  # "cannot deallocate registered cache": a logged no-op
            if entry.is_blocks:
                self._free(entry)
                return
            entry.released = True
            if not entry.keys:
                self._free(entry)

    def unregister(self, cache_id: int) -> None:
        with self.lock:
            entry = self.caches.get(cache_id)
            if entry is None or not entry.registered:
                return
            self._free(entry)

    def remove_key(self, key: PackedKey) -> None:
        with self.lock:
            ek = engine_key(key)
            if ek is None or ek not in self.key_table:
                return
            cache_id, _ = self.key_table[ek]
            entry = self.caches.get(cache_id)
            if entry is None or entry.registered:
                return
            self._drop_key(entry, ek)

    def _drop_key(self, entry: CacheEntry, ek: EngineKey) -> None:
        found = self.key_table.pop(ek, None)
        if found is not None and entry.req_at.get(found[1]) == ek:
            del entry.req_at[found[1]]
        entry.keys.discard(ek)
        if entry.released and not entry.keys:
            self._free(entry)

    def free_all(self) -> None:
        """Finalize: every cache goes, whatever references remain."""
        with self.lock:
            for entry in list(self.caches.values()):
                self._free(entry)
            self.key_table.clear()

    def live(self, cache_id: int) -> CacheEntry:
        entry = self.caches.get(cache_id)
        if entry is None or entry.released:
            raise SimError(_NOT_EXIST, f"local cache {cache_id} does not exist")
        return entry

    # -- lookups by a remote puller ----------------------------------------------------------------

    def lookup(self, key: PackedKey) -> Tuple[CacheEntry, int, Optional[EngineKey]]:
        """``(cache, batch index, key to consume)`` a pull names; ``LLM_KV_CACHE_NOT_EXIST`` if none."""
        _, cache_id, batch_index, req_id, prefix_id, _, is_blocks = key
        by_id = not (is_blocks or 0 <= prefix_id < INVALID_ID or 0 <= req_id < INVALID_ID)
        ek = None if by_id else engine_key(key)  # by id, ``engine_key`` says None: every pull by id asks
        if ek is None:
            entry = self.caches.get(cache_id)
            if entry is None:
                raise SimError(_NOT_EXIST, f"remote cache {cache_id} does not exist")
            if not entry.is_blocks and batch_index >= entry.batch_size:
                raise SimError(
                    _NOT_EXIST, f"batch_index {batch_index} >= batch size {entry.batch_size} of {cache_id}"
                )
            consume = entry.req_at.get(batch_index)
            if consume is not None and self.key_table.get(consume) != (cache_id, batch_index):
                consume = None  # a key offered twice in one call is bound at its last index only
            return entry, batch_index, consume
        found = self.key_table.get(ek)
        if found is None:
            raise SimError(self._missing_code(ek), f"remote cache key {ek} does not exist")
        entry = self.caches[found[0]]
        return entry, found[1], ek if ek[0] == "req" and not is_blocks else None

    def find_entry(self, key: PackedKey) -> Tuple[CacheEntry, int]:
        """``(cache, batch index)`` a remote-cache-accessible push names in this live table (``find_in``)."""
        return find_in(self.caches, self.key_table, key)

    @property
    def published(self) -> bool:
        """Whether this instance has published a cache table (version 1 on): every change of its caches
        or keys publishes one (hixl ``cache_manager.cc:573-580``), and every change follows a first
        allocation or registration, each of which takes an id."""
        return self._next_id > 1

    def consume(self, entry: CacheEntry, ek: EngineKey) -> None:
        """A pull delivered what request key ``ek`` names: the key goes (and with it the cache, if it was
        its last reference), unless the cache is registered memory, whose keys a pull leaves alone."""
        if entry.registered:
            return
        with self.lock:
            self._drop_key(entry, ek)
            if self.legacy_codes:
                self.note_completed(ek)

    def note_completed(self, ek: EngineKey) -> None:
        """A pull consumed request key ``ek``; the last ``COMPLETED_KEPT`` such keys are remembered."""
        self.completed[ek] = None
        if len(self.completed) > COMPLETED_KEPT:
            del self.completed[next(iter(self.completed))]

    def _missing_code(self, ek: EngineKey) -> LLMStatusCode:
        if self._legacy_prefix(ek):
            return LLMStatusCode.LLM_PREFIX_NOT_EXIST
        if self.legacy_codes and ek in self.completed:
            return LLMStatusCode.LLM_REQUEST_ALREADY_COMPLETED
        return _NOT_EXIST


def find_in(
    caches: Dict[int, CacheEntry], key_table: Dict[EngineKey, Tuple[int, int]], key: PackedKey
) -> Tuple[CacheEntry, int]:
    """``(cache, batch index)`` a remote-cache-accessible push names, as ``FindCacheEntry`` finds it
    (hixl ``cache_access_table.cc:290-312``, request built at ``layer_wise_transfer_job.cc:188-196``).

    A blocks key names ``(UINT64_MAX, model_id)``. A key by id names its cache when ``cache_id > 0``;
    otherwise the request keeps its default key ``(req_id 0, model_id 0)`` and that request key
    names the cache. The batch is the key's own ``batch_index`` either way. Missing:
    ``LLM_KV_CACHE_NOT_EXIST``.
    """
    _, cache_id, batch_index, _, _, model_id, is_blocks = key
    if is_blocks or cache_id <= 0:
        ek = blocks_slot(model_id) if is_blocks else ("req", 0, 0)
        found = key_table.get(ek)
        if found is None:
            shown = key_ident(key) if is_blocks else (0, 0)
            raise SimError(_NOT_EXIST, f"remote cache key {shown} does not exist")
        return caches[found[0]], 0 if is_blocks else batch_index
    entry = caches.get(cache_id)
    if entry is None:
        raise SimError(_NOT_EXIST, f"remote cache {cache_id} does not exist")
    return entry, batch_index


def _legacy_blocks_allocate(pool: MemoryPool, tensor_size: int, num_tensors: int) -> List[int]:
    """A blocks cache under ``legacy_codes``: a pool that cannot give even one page has no free block;
    one that has pages but too few for the cache is out of blocks memory."""
    try:
        return pool.allocate_many([tensor_size] * num_tensors)
    except SimError as exc:
        if exc.code is not pool.oom_code:
            raise
        page = pool.round_size(1)
        limit = pool.limit
        no_page = pool.free_bytes < page or (limit is not None and pool.used + page > limit)
        code = LLMStatusCode.LLM_NO_FREE_BLOCK if no_page else LLMStatusCode.LLM_BLOCKS_OUT_OF_MEMORY
        raise SimError(code, exc.message) from exc


def legacy_seq_len_check(
    src: CacheEntry, dst: CacheEntry, size: int, src_offset: int, dst_offset: int
) -> None:
    """Under ``legacy_codes``, a contiguous pull longer than the per-request slice of the source or of
    the destination (from its offset) is ``LLM_SEQ_LENOVERLIMIT``: the request's sequence does not fit."""
    if src.is_blocks or dst.is_blocks:
        return  # a blocks/contiguous mix stays LLM_PARAM_INVALID
    src_offset, dst_offset = max(src_offset, 0), max(dst_offset, 0)
    nbytes = src.batch_bytes - src_offset if size == -1 else size
    if nbytes > 0 and (src_offset + nbytes > src.batch_bytes or dst_offset + nbytes > dst.batch_bytes):
        raise SimError(
            LLMStatusCode.LLM_SEQ_LENOVERLIMIT,
            f"{nbytes} B from offsets {src_offset}/{dst_offset} exceed the per-request slice "
            f"(remote {src.batch_bytes} B, local {dst.batch_bytes} B)",
        )


def spans(store: NodeCaches, transport: bool = False) -> Iterator[Tuple[int, int]]:
    """``[start, end)`` of every range one instance owns: its pools and its registered tensors; with
    ``transport``, only those registered with the transport (not a ``remote_accessible=False`` cache)."""
    for pool in (store.device_pool, store.host_pool):
        if pool is not None and pool.capacity > 0:
            yield pool.base, pool.base + pool.capacity
    for entry in list(store.caches.values()):
        if entry.registered and (entry.remote_accessible or not transport):
            for address in entry.addrs:
                yield address, address + max(entry.tensor_size, 1)
