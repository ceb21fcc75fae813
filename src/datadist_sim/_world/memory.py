"""A real allocator over a simulated address range: the engine's memory pool, with real fragmentation.

The real pool (hixl ``ScalableAllocator``, behind ``mem_pool_cfg``/``host_mem_pool_cfg``) rounds every
request up to whole pages, keeps free spans in per-page-count layers, takes the *smallest* free span that
fits (``SpanLayerLut::FindFitLayerId`` is a ``lower_bound`` on the span length), carves the request from
the span's high end (``SplitSpan`` returns the upper buddy) and merges a freed span with free neighbours.
:class:`MemoryPool` reproduces those rules over a sorted free list:

- **best fit**, ties broken by the lowest address (the engine's tie order is a linked-list detail; ours is
  deterministic), allocation from the high end of the chosen block;
- sizes round up to the *granule*: the page size (``1 << page_shift``), or a larger power-of-two
  ``alignment`` if one is asked for. Both the start and the size of every allocation are granule
  multiples, so every free block is too and ``largest_free_block`` is always allocatable;
- a request of 0 bytes takes one granule, as ``GetAllocSize`` does.

The pool deals in addresses only. Bytes live behind an observer (see ``address_space``), told of every
allocation and free, so there is one way to allocate and backing can never drift from the pool.
"""

from __future__ import annotations

import json
import threading
from bisect import bisect_left
from dataclasses import dataclass
from typing import Optional, Protocol, Sequence, Tuple

from datadist_sim._status import LLMStatusCode
from datadist_sim._world.errors import SimError

PAGE_SHIFT_MIN = 10
PAGE_SHIFT_MAX = 31  # exclusive, as in the engine's ParseMemoryPoolConfig
DEFAULT_PAGE_SHIFT = 16
_UINT32_MAX = 0xFFFFFFFF


class PoolObserver(Protocol):
    """Told of every allocation and free, under the pool's lock, so an address freed by one thread and
    re-allocated by another reaches the observer in the same order as it reached the books."""

    def on_allocate(self, address: int, nbytes: int, requested: int) -> None:
        """``nbytes`` reserved at ``address`` (whole granules) for a request of ``requested`` bytes."""
        ...

    def on_free(self, address: int, nbytes: int) -> None: ...


@dataclass(frozen=True)
class PoolStats:
    """A consistent snapshot of a pool's counters (read under the pool's lock)."""

    capacity: int
    used: int
    free_bytes: int
    largest_free_block: int
    free_block_count: int
    allocation_count: int
    total_allocations: int
    failed_allocations: int
    peak_used: int
    limit: Optional[int]


def _is_power_of_two(value: int) -> bool:
    return value > 0 and value & (value - 1) == 0


class MemoryPool:
    """A thread-safe allocator over ``[base, base + capacity)``.

    ``oom_code`` is what exhaustion raises: the caller picks ``LLM_DEVICE_OUT_OF_MEMORY`` (KvCacheManager
    mode) or ``LLM_OUT_OF_MEMORY`` (CacheManager mode). ``capacity`` is the declared ``memory_size``
    rounded *down* to the granule (the engine counts whole pages), so ``used + free_bytes == capacity``.
    """

    def __init__(
        self,
        memory_size: int,
        *,
        oom_code: LLMStatusCode,
        page_shift: int = DEFAULT_PAGE_SHIFT,
        base: int = 0,
        alignment: Optional[int] = None,
        name: str = "pool",
        observer: Optional[PoolObserver] = None,
    ) -> None:
        _check_config(memory_size, page_shift)
        page_size = 1 << page_shift
        granule = page_size if alignment is None else alignment
        if not _is_power_of_two(granule) or granule < page_size:
            raise SimError(
                LLMStatusCode.LLM_PARAM_INVALID,
                f"alignment must be a power of two >= the page size {page_size}, got {alignment}",
            )
        if base < 0 or base % granule:
            raise SimError(LLMStatusCode.LLM_PARAM_INVALID, f"pool base {base:#x} is not {granule}-aligned")
        self.name = name
        self.base = base
        self.page_shift = page_shift
        self.page_size = page_size
        self.granule = granule
        self.oom_code = oom_code
        self.declared_size = memory_size
        self.capacity = memory_size // granule * granule
        self._observer = observer
        self._lock = threading.Lock()
        self._free_starts: list[int] = [base] if self.capacity else []
        self._free_sizes: dict[int, int] = {base: self.capacity} if self.capacity else {}
        self._live: dict[int, int] = {}
        self._used = 0
        self._peak = 0
        self._total = 0
        self._failed = 0
        self._limit: Optional[int] = None

    # -- statistics ---------------------------------------------------------------------------------

    @property
    def used(self) -> int:
        return self._used

    @property
    def free_bytes(self) -> int:
        return self.capacity - self._used

    @property
    def largest_free_block(self) -> int:
        with self._lock:
            return max(self._free_sizes.values(), default=0)

    @property
    def allocation_count(self) -> int:
        """Live allocations (not a running total: see ``stats().total_allocations``)."""
        return len(self._live)

    @property
    def peak_used(self) -> int:
        return self._peak

    @property
    def limit(self) -> Optional[int]:
        return self._limit

    def stats(self) -> PoolStats:
        with self._lock:
            return PoolStats(
                capacity=self.capacity,
                used=self._used,
                free_bytes=self.capacity - self._used,
                largest_free_block=max(self._free_sizes.values(), default=0),
                free_block_count=len(self._free_starts),
                allocation_count=len(self._live),
                total_allocations=self._total,
                failed_allocations=self._failed,
                peak_used=self._peak,
                limit=self._limit,
            )

    def free_blocks(self) -> list[tuple[int, int]]:
        """``(address, nbytes)`` of every free block, in address order (for tests and diagnostics)."""
        with self._lock:
            return [(start, self._free_sizes[start]) for start in self._free_starts]

    def allocations(self) -> dict[int, int]:
        """A copy of the live allocations, ``address -> reserved bytes``."""
        with self._lock:
            return dict(self._live)

    def size_of(self, address: int) -> int:
        """Reserved bytes of the live allocation starting at ``address``."""
        with self._lock:
            if address not in self._live:
                raise SimError(LLMStatusCode.LLM_PARAM_INVALID, f"{self.name}: no allocation at {address:#x}")
            return self._live[address]

    def round_size(self, nbytes: int) -> int:
        """What a request of ``nbytes`` reserves: whole granules, at least one."""
        granule = self.granule
        return max(granule, -(-nbytes // granule) * granule)

    # -- fault injection ----------------------------------------------------------------------------

    def set_limit(self, nbytes: Optional[int]) -> None:
        """Make allocations fail once ``used`` would exceed ``nbytes``; existing allocations stay.

        ``None`` removes the limit. A limit below the current usage is allowed: it blocks every new
        allocation until enough is freed.
        """
        if nbytes is not None and nbytes < 0:
            raise ValueError(f"limit must be >= 0 or None, got {nbytes}")
        with self._lock:
            self._limit = nbytes

    # -- allocation ---------------------------------------------------------------------------------

    def allocate(self, nbytes: int) -> int:
        """Reserve ``round_size(nbytes)`` bytes and return the start address; raise ``oom_code`` if not."""
        if nbytes < 0:
            raise SimError(LLMStatusCode.LLM_PARAM_INVALID, f"{self.name}: negative size {nbytes}")
        size = self.round_size(nbytes)
        with self._lock:
            address = self._take(size, nbytes)
            if self._observer is not None:
                try:
                    self._observer.on_allocate(address, size, nbytes)
                except BaseException:
                    self._give_back(address)
                    raise
        return address

    def allocate_many(self, sizes: Sequence[int]) -> list[int]:
        """Allocate every size or none: on a failure, what was taken is freed before the error propagates."""
        taken: list[int] = []
        try:
            for nbytes in sizes:
                taken.append(self.allocate(nbytes))
        except BaseException:
            for address in reversed(taken):
                self.free(address)
            raise
        return taken

    def free(self, address: int) -> None:
        """Return an allocation to the pool, merging it with free neighbours.

        An address that is not the start of a live allocation (never allocated, or already freed) raises
        ``SimError(LLM_PARAM_INVALID)``: the real engine frees through shared pointers and cannot double
        free, so reaching this is a bug in the caller, reported loudly rather than corrupting the books.
        """
        with self._lock:
            if address not in self._live:
                raise SimError(
                    LLMStatusCode.LLM_PARAM_INVALID,
                    f"{self.name}: free of {address:#x}, which is not a live allocation (double free?)",
                )
            size = self._give_back(address)
            if self._observer is not None:
                self._observer.on_free(address, size)

    def reset(self) -> None:
        """Free every live allocation (pool teardown at ``finalize``)."""
        for address in sorted(self.allocations()):
            self.free(address)

    # -- internals (called with the lock held) ------------------------------------------------------

    def _take(self, size: int, requested: int) -> int:
        if self._limit is not None and self._used + size > self._limit:
            self._failed += 1
            raise SimError(
                self.oom_code,
                f"{self.name}: allocating {requested} B ({size} B reserved) would exceed the injected "
                f"limit of {self._limit} B ({self._used} B in use)",
            )
        best = -1
        best_size = 0
        for start in self._free_starts:
            block = self._free_sizes[start]
            if block >= size and (best < 0 or block < best_size):
                best, best_size = start, block
                if block == size:
                    break
        if best < 0:
            self._failed += 1
            largest = max(self._free_sizes.values(), default=0)
            raise SimError(
                self.oom_code,
                f"{self.name}: cannot allocate {requested} B ({size} B reserved): "
                f"{self.capacity - self._used} B free of {self.capacity} B, largest free block {largest} B",
            )
        address = best + best_size - size
        if best_size == size:
            del self._free_starts[bisect_left(self._free_starts, best)]
            del self._free_sizes[best]
        else:
            self._free_sizes[best] = best_size - size
        self._live[address] = size
        self._used += size
        self._total += 1
        self._peak = max(self._peak, self._used)
        return address

    def _give_back(self, address: int) -> int:
        size = self._live.pop(address)
        self._used -= size
        starts, sizes = self._free_starts, self._free_sizes
        index = bisect_left(starts, address)
        start, end = address, address + size
        if index < len(starts) and starts[index] == end:
            end += sizes.pop(starts.pop(index))
        if index > 0 and starts[index - 1] + sizes[starts[index - 1]] == start:
            start = starts[index - 1]
            sizes[start] = end - start
        else:
            starts.insert(index, start)
            sizes[start] = end - start
        return size

    def __repr__(self) -> str:
        return (
            f"MemoryPool(name={self.name!r}, base={self.base:#x}, capacity={self.capacity}, "
            f"used={self._used}, page_shift={self.page_shift}, granule={self.granule})"
        )


def _check_config(memory_size: int, page_shift: int) -> None:
    """The engine's ``ParseMemoryPoolConfig`` rules; a violation is ``LLM_PARAM_INVALID`` at ``init``."""
    if memory_size <= 0:
        raise SimError(LLMStatusCode.LLM_PARAM_INVALID, f"memory_size must be > 0, got {memory_size}")
    if not PAGE_SHIFT_MIN <= page_shift < PAGE_SHIFT_MAX:
        raise SimError(
            LLMStatusCode.LLM_PARAM_INVALID,
            f"page_shift must be in [{PAGE_SHIFT_MIN}, {PAGE_SHIFT_MAX}), got {page_shift}",
        )
    if (memory_size >> page_shift) >= _UINT32_MAX:
        raise SimError(
            LLMStatusCode.LLM_PARAM_INVALID,
            f"memory_size >> page_shift must be < UINT32_MAX, got {memory_size} >> {page_shift}",
        )
    if memory_size < 1 << page_shift:
        # llm_mem_pool.cc:45-47: the pool must hold at least one page.
        raise SimError(
            LLMStatusCode.LLM_PARAM_INVALID,
            f"Check page_size <= memory_size failed, page_shift = {page_shift}, "
            f"page_size = {1 << page_shift}, memory_size = {memory_size}",
        )


def _json_unsigned(value: object) -> bool:
    """nlohmann's ``is_number_unsigned``: a JSON integer >= 0 that fits 64 bits (no bool, float, string)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 64


def parse_pool_config(text: str) -> Tuple[int, int]:
    """hixl ``ParseMemoryPoolConfig`` (``data_cache_engine.cc:35-60``): ``memory_size`` must be an
    unsigned JSON integer, ``page_shift`` (optional) too; anything else is ``LLM_PARAM_INVALID``."""
    try:
        cfg = json.loads(text)
        size = cfg["memory_size"]
        shift = cfg.get("page_shift", DEFAULT_PAGE_SHIFT)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise SimError(
            LLMStatusCode.LLM_PARAM_INVALID, f"invalid memory pool config {text!r}: {exc}"
        ) from exc
    if not _json_unsigned(size):
        raise SimError(
            LLMStatusCode.LLM_PARAM_INVALID, f"memory_size is not an unsigned integer: config = {text}"
        )
    if not _json_unsigned(shift):
        raise SimError(
            LLMStatusCode.LLM_PARAM_INVALID, f"page_shift is not an unsigned integer: config = {text}"
        )
    return int(size), int(shift)
