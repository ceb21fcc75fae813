"""The bytes behind addresses: simulated device/host memory, and raw pointers into this very process.

Two kinds of address reach a transfer:

- **Simulated addresses**, handed out by pools made here. Every pool gets its own region starting at
  ``SIM_VA_BASE + k * SIM_REGION_SIZE`` (``k`` counts pools, never reused, so a stale address can never
  alias newer memory). ``SIM_VA_BASE = 2**60`` lies above every user-space mapping Linux can create
  (47-bit, or 56-bit with 5-level paging, on x86-64; 48/52-bit on AArch64) and below ``2**63``, so these
  addresses fit an int64, never collide with a real pointer, and the range alone tells the two kinds
  apart. Regions are 1 TiB-aligned (hence 2 MiB-aligned); the alignment of each tensor inside is the
  pool's choice (page size by default, as in the engine; ``HUGE_PAGE`` for memory that stands in for a
  client's own device tensors, which HCCS wants 2 MiB-aligned). Regions are per pool, not per device
  index: every simulated process usually runs on "device 0".
- **Raw pointers** (``tensor.data_ptr()`` of a CPU tensor, ``arr.ctypes.data``): read and written in place,
  but only once ``/proc/self/maps`` shows the whole range mapped with the needed permissions. Anything
  else (``0x10``, an invented NPU address, a non-Linux host) is metadata only: touching its bytes raises
  ``SimError(LLM_PARAM_INVALID)`` (inferred: the real engine would fail in HCCL or the runtime, which the
  API reports as a parameter/registration problem), never a crash.

Backing is one zeroed numpy buffer per allocation, of the bytes *asked for*, not of the page-rounded
reservation: a 512-byte cache in a pool of 64 KiB pages holds 512 bytes, and memory grows
with what is allocated, not with the declared pool size. Addresses, and every check against them
(bounds, ownership, poison, registration), still see the whole reservation, so the same allocations get
the same addresses. The reservation's tail past the request (its padding) gets bytes only when something
touches it: a buffer of its own, made on first touch; a copy across the boundary moves piece by piece;
a *view* across it joins both into one buffer of the whole reservation, after which views taken before
no longer alias the allocation (only a view reaching past the bytes asked for can cause that; the world
remakes the views its pull fast path keeps, ``on_join``). With
``backed=False`` (metadata-only mode) no bytes exist: transfers validate simulated ranges and poison,
then move nothing, and ``view`` raises ``SimError(LLM_FEATURE_NOT_ENABLED)``.
"""

from __future__ import annotations

import ctypes
import threading
from bisect import bisect_left, bisect_right
from typing import Callable, Iterable, List, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

from datadist_sim._status import LLMStatusCode
from datadist_sim._world.errors import SimError
from datadist_sim._world.memory import DEFAULT_PAGE_SHIFT, MemoryPool
from datadist_sim._world.process_memory import PROCESS_MEMORY as PROCESS_MEMORY
from datadist_sim._world.process_memory import Again
from datadist_sim._world.process_memory import ProcessMemory as ProcessMemory
from datadist_sim._world.process_memory import raw_view as raw_view

SIM_VA_BASE = 1 << 60
SIM_VA_LIMIT = 1 << 63
SIM_REGION_SIZE = 1 << 40
HUGE_PAGE = 2 << 20

Bytes = npt.NDArray[np.uint8]
_INVALID = LLMStatusCode.LLM_PARAM_INVALID


def is_simulated(address: int) -> bool:
    """Whether ``address`` belongs to the simulator's address range (as opposed to a raw pointer)."""
    return SIM_VA_BASE <= address < SIM_VA_LIMIT


class AddressSpace:
    """The world's memory: pools carved from simulated regions, their backing, raw pointers, poison.

    Thread-safe: the allocation index is guarded by a lock; byte copies run outside it (views keep their
    buffers alive, so a concurrent free cannot pull memory from under a copy of simulated memory).
    """

    raw_per_process = False
    """Whether clusters may live in different OS processes, so that one raw pointer can name different
    memory for different clusters (the fabric's space); in-process, a raw pointer is one memory."""

    def __init__(self, *, backed: bool = True, process_memory: Optional[ProcessMemory] = None) -> None:
        self.backed = backed
        self.process_memory = process_memory if process_memory is not None else PROCESS_MEMORY
        self._lock = threading.Lock()
        self._next_base = SIM_VA_BASE
        self._starts: list[int] = []
        self._sizes: dict[int, int] = {}
        self._buffers: dict[int, Bytes] = {}  # the bytes asked for, from each allocation's start
        self._pads: dict[int, Bytes] = {}  # the rest of a reservation, once something touched it
        self.on_join: Optional[Callable[[int], None]] = None
        """Told the start of an allocation whose bytes a view across its padding's edge joined into a
        new buffer (so whoever keeps views of the old one can make them again)."""
        self._poison: list[tuple[int, int]] = []  # (start, end), sorted; replaced, never mutated
        self._poison_span = 0  # the longest poisoned range: bounds how far back an overlap can start
        self.has_poison = False
        """Whether any range is poisoned: a plain attribute, kept with ``_poison`` wherever that is
        replaced, since every transfer's fast path reads it."""

    # -- pools and the allocation index --------------------------------------------------------------

    def create_pool(
        self,
        memory_size: int,
        *,
        oom_code: LLMStatusCode,
        page_shift: int = DEFAULT_PAGE_SHIFT,
        alignment: Optional[int] = None,
        name: str = "pool",
    ) -> MemoryPool:
        """A pool in a fresh region of simulated addresses, whose allocations this space backs."""
        with self._lock:
            base = self._next_base
            span = max(memory_size, 1)
            self._next_base = base + -(-span // SIM_REGION_SIZE) * SIM_REGION_SIZE
            if self._next_base > SIM_VA_LIMIT:
                raise SimError(LLMStatusCode.LLM_OUT_OF_MEMORY, "simulated address space exhausted")
        return MemoryPool(
            memory_size,
            oom_code=oom_code,
            page_shift=page_shift,
            base=base,
            alignment=alignment,
            name=name,
            observer=self,
        )

    def on_allocate(self, address: int, nbytes: int, requested: Optional[int] = None) -> None:
        """Index ``nbytes`` reserved at ``address``; back the ``requested`` bytes (all, if not given)."""
        used = nbytes if requested is None else min(max(requested, 0), nbytes)
        buffer = np.zeros(used, dtype=np.uint8) if self.backed else None
        with self._lock:
            index = bisect_right(self._starts, address)
            self._starts.insert(index, address)
            self._sizes[address] = nbytes
            if buffer is not None:
                self._buffers[address] = buffer

    def on_free(self, address: int, nbytes: int) -> None:
        """Forget the allocation; poison inside it goes too. The driver retires a page hit by a UCE
        and the pool's next user gets clean memory, so a fresh cache never reads as poisoned."""
        with self._lock:
            index = bisect_right(self._starts, address) - 1
            if index >= 0 and self._starts[index] == address:
                del self._starts[index]
            self._sizes.pop(address, None)
            self._buffers.pop(address, None)
            self._pads.pop(address, None)
            if self._poison:
                self._drop_poison(address, address + nbytes)

    def allocation_containing(self, address: int) -> Optional[tuple[int, int]]:
        """``(start, reserved bytes)`` of the live simulated allocation holding ``address``, if any."""
        with self._lock:
            index = bisect_right(self._starts, address) - 1
            if index < 0:
                return None
            start = self._starts[index]
            size = self._sizes[start]
        return (start, size) if address < start + size else None

    @property
    def backed_bytes(self) -> int:
        """Bytes of backing buffers currently held (0 in metadata-only mode)."""
        with self._lock:
            held = sum(buffer.nbytes for buffer in self._buffers.values())
            return held + sum(pad.nbytes for pad in self._pads.values())

    # -- resolving addresses to bytes ------------------------------------------------------------------

    def resolve(self, address: int, nbytes: int, *, writable: bool = False) -> Optional[Bytes]:
        """Check ``[address, address + nbytes)`` and return its bytes, or ``None`` in metadata-only mode.

        Raises ``SimError(LLM_DEVICE_MEM_ERROR)`` on a poisoned range and ``SimError(LLM_PARAM_INVALID)``
        on anything it cannot vouch for; never touches memory before both checks pass.
        """
        if nbytes < 0:
            raise SimError(_INVALID, f"negative transfer size {nbytes} at {address:#x}")
        if self._poison:
            self._check_poison(address, nbytes)
        if is_simulated(address):
            found = self._resolve_simulated(address, nbytes, join=True)
            assert not isinstance(found, list)  # joined
            return found
        if not self.backed:
            return None
        if nbytes == 0:
            return np.empty(0, dtype=np.uint8)
        self._vouch(address, nbytes, writable)
        return raw_view(address, nbytes, writable=writable)

    def _vouch(self, address: int, nbytes: int, writable: bool) -> None:
        """Refuse a raw range this process does not map (readable, and writable if asked) right now."""
        if not self.process_memory.covers(address, nbytes, writable=writable):
            access = "writable" if writable else "readable"
            raise SimError(
                _INVALID,
                f"address {address:#x} (+{nbytes} B) is neither simulated memory nor {access} memory of "
                "this process; the simulator cannot move its bytes (metadata-only address)",
            )

    def view(self, address: int, nbytes: int) -> Bytes:
        """A writable uint8 view of ``nbytes`` at ``address`` (any offset inside a live allocation)."""
        if not self.backed:
            raise SimError(
                LLMStatusCode.LLM_FEATURE_NOT_ENABLED,
                "metadata-only address space: no bytes back any address",
            )
        array = self.resolve(address, nbytes, writable=True)
        assert array is not None  # backed mode always yields bytes
        return array

    def _resolve_simulated(self, address: int, nbytes: int, *, join: bool) -> Union[Bytes, List[Bytes], None]:
        """The bytes of a simulated range: one view, or (``join`` False, a range across the end of the
        bytes asked for) the two pieces on either side of it."""
        with self._lock:
            index = bisect_right(self._starts, address) - 1
            start = self._starts[index] if index >= 0 else -1
            size = self._sizes.get(start, 0)
            buffer = self._buffers.get(start)
        if not start <= address < start + size:
            raise SimError(
                _INVALID, f"simulated address {address:#x} is not inside a live allocation (freed?)"
            )
        offset = address - start
        if offset + nbytes > size:
            raise SimError(
                _INVALID,
                f"range [{address:#x}, {address + nbytes:#x}) crosses the end of its allocation "
                f"[{start:#x}, {start + size:#x})",
            )
        if buffer is None:
            return None
        if offset + nbytes <= buffer.nbytes:
            return buffer[offset : offset + nbytes]
        return self._past_request(start, offset, nbytes, join)

    def _past_request(self, start: int, offset: int, nbytes: int, join: bool) -> Union[Bytes, List[Bytes]]:
        """A range of the allocation at ``start`` that reaches into its padding (see the module's doc)."""
        found = self._reach_padding(start, offset, nbytes, join)
        if isinstance(found, tuple):  # joined: the old buffer no longer holds the allocation's bytes
            if self.on_join is not None:
                self.on_join(start)
            return found[0]
        return found

    def _reach_padding(
        self, start: int, offset: int, nbytes: int, join: bool
    ) -> Union[Bytes, List[Bytes], Tuple[Bytes]]:
        with self._lock:
            buffer, size = self._buffers.get(start), self._sizes.get(start, 0)
            if buffer is None:
                raise SimError(_INVALID, f"simulated address {start + offset:#x} was freed meanwhile")
            used, end = buffer.nbytes, offset + nbytes
            if end <= used:  # joined meanwhile
                return buffer[offset:end]
            pad = self._pads.get(start)
            if pad is None and not (join and offset < used):
                pad = self._pads[start] = np.zeros(size - used, dtype=np.uint8)
            if offset >= used:
                assert pad is not None
                return pad[offset - used : end - used]
            if not join:
                assert pad is not None
                return [buffer[offset:], pad[: end - used]]
            joined = np.zeros(size, dtype=np.uint8)
            joined[:used] = buffer
            if pad is not None:
                joined[used:] = pad
            self._buffers[start] = joined
            self._pads.pop(start, None)
            return (joined[offset:end],)

    def backing(self, address: int, nbytes: int) -> Optional[Bytes]:
        """The whole buffer backing the live simulated allocation that starts at ``address``, if it holds
        at least ``nbytes`` (else None: raw, metadata-only or not an allocation's start). For copies
        that resolve a tensor once and move many blocks of it in one step."""
        with self._lock:
            buffer = self._buffers.get(address)
        return buffer if buffer is not None and buffer.nbytes >= nbytes else None

    # -- copies ----------------------------------------------------------------------------------------

    def copy(self, dst: int, src: int, nbytes: int) -> None:
        """Copy ``nbytes`` from ``src`` to ``dst``; nothing is written unless both ranges check out."""
        self.copy_ranges(((dst, src, nbytes),))

    def copy_ranges(self, ranges: Iterable[tuple[int, int, int]]) -> None:
        """Copy each ``(dst, src, nbytes)`` in order, all or nothing.

        Every range is resolved and validated before the first byte moves, so a failing transfer leaves
        every destination exactly as it was. Ranges run in order, so a later source that overlaps an
        earlier destination sees the new bytes, as successive device copies would.
        """
        if type(ranges) is list and len(ranges) == 1 and self.backed and not self._poison:
            # one small raw range to another (a small hixl transfer): the kernel vouches for both as it
            # copies (``ProcessMemory.copy_small``); anything it cannot take that way goes the full path
            dst, src, nbytes = ranges[0]
            if (
                not is_simulated(dst)
                and not is_simulated(src)
                and self.process_memory.copy_small(dst, src, nbytes)
            ):
                return
        plan = [
            (self._pieces(dst, nbytes, True), self._pieces(src, nbytes, False), nbytes)
            for dst, src, nbytes in ranges
        ]
        for target, source, nbytes in plan:
            if target is None or source is None:
                continue
            if type(target) is int and type(source) is int:
                # raw to raw, both vouched for: one memmove, without building a view of either side
                ctypes.memmove(target, source, nbytes)
                continue
            dst_bytes = raw_view(target, nbytes, writable=True) if isinstance(target, int) else target
            src_bytes = raw_view(source, nbytes, writable=False) if isinstance(source, int) else source
            if not isinstance(dst_bytes, list) and not isinstance(src_bytes, list):
                # memoryview assignment: one memcpy/memmove, like ``np.copyto`` on flat bytes, without
                # numpy's per-call dispatch (a few µs on a small pull)
                dst_bytes.data[:] = src_bytes.data
            else:  # across the end of the bytes asked for: gather first (the two may overlap)
                data = np.concatenate(src_bytes) if isinstance(src_bytes, list) else src_bytes.copy()
                offset = 0
                for piece in dst_bytes if isinstance(dst_bytes, list) else [dst_bytes]:
                    piece[:] = data[offset : offset + piece.nbytes]
                    offset += piece.nbytes

    def small_pair(self, dst: int, src: int, nbytes: int) -> Optional[Again]:
        """What a small copy between two raw ranges of this process needs to run again at once
        (``copy_again``), for a caller that will move the same range again; None where that copy is
        not one memmove the kernel vouches for (simulated memory, raw pointers of other processes, no
        backing, more than ``ProcessMemory.small_pair`` takes)."""
        if not self.backed or self.raw_per_process or is_simulated(dst) or is_simulated(src):
            return None
        memory = self.process_memory
        pair = memory.small_pair(dst, src, nbytes)
        return None if pair is None else (pair, memory.parse)

    def copy_again(self, again: Again) -> bool:
        """Run a copy ``small_pair`` found, as ``copy_ranges`` would have; False (nothing written) if it
        cannot so: memory is poisoned (the full path says where), the maps were read again since, or a
        page of either range is gone."""
        return not self.has_poison and self.process_memory.copy_pair(again)

    def _pieces(self, address: int, nbytes: int, writable: bool) -> Union[Bytes, List[Bytes], int, None]:
        """As ``resolve``, but a simulated range across the end of the bytes asked for comes in two
        pieces instead of joining the allocation's buffers (which would detach views of it), and a
        vouched-for raw range is its address (a copy between two of them needs no view)."""
        if nbytes <= 0 or not self.backed:
            return self.resolve(address, nbytes, writable=writable)
        if self._poison:
            self._check_poison(address, nbytes)
        if not is_simulated(address):
            self._vouch(address, nbytes, writable)
            return address
        return self._resolve_simulated(address, nbytes, join=False)

    # -- poison (UCE fault injection) -------------------------------------------------------------------

    def poison(self, address: int, nbytes: int) -> None:
        """Mark a range as hit by an uncorrectable memory error: touching it raises LLM_DEVICE_MEM_ERROR
        (a transfer tells the peer's memory from the caller's). Freeing the allocation clears it."""
        if nbytes <= 0:
            raise ValueError(f"poisoned range must be non-empty, got {nbytes} B")
        entry = (address, address + nbytes)
        with self._lock:
            poison = self._poison
            index = bisect_left(poison, entry)
            if index < len(poison) and poison[index] == entry:
                return
            self._poison = [*poison[:index], entry, *poison[index:]]
            self._poison_span = max(self._poison_span, nbytes)
            self.has_poison = True

    def heal(self, address: Optional[int] = None, nbytes: int = 1) -> None:
        """Drop poisoned ranges overlapping ``[address, address + nbytes)``, or all of them."""
        with self._lock:
            if address is None:
                self._poison = []
                self._poison_span = 0
                self.has_poison = False
            else:
                self._drop_poison(address, address + nbytes)

    def _drop_poison(self, address: int, end: int) -> None:
        """Drop every poisoned range overlapping ``[address, end)`` (called with the lock held)."""
        kept = [r for r in self._poison if r[1] <= address or r[0] >= end]
        if len(kept) != len(self._poison):
            self._poison = kept
            self._poison_span = max((high - low for low, high in kept), default=0)
            self.has_poison = bool(kept)

    def poisoned_range(self, address: int, nbytes: int) -> Optional[tuple[int, int]]:
        """The first poisoned ``(start, end)`` overlapping ``[address, address + nbytes)``, or None.

        A bisection, not a scan: only ranges starting within the longest poisoned span before
        ``address`` can reach into it.
        """
        poison = self._poison
        if not poison:
            return None
        end = address + nbytes
        low = bisect_left(poison, (address - self._poison_span + 1,))
        high = bisect_left(poison, (end,))
        for index in range(low, high):
            if poison[index][1] > address:
                return poison[index]
        return None

    def is_poisoned(self, address: int, nbytes: int) -> bool:
        """Whether ``[address, address + nbytes)`` overlaps a poisoned range."""
        return self.poisoned_range(address, nbytes) is not None

    @property
    def poisoned(self) -> list[tuple[int, int]]:
        """``(start, end)`` of every poisoned range, in address order."""
        return list(self._poison)

    def _check_poison(self, address: int, nbytes: int) -> None:
        hit = self.poisoned_range(address, nbytes)
        if hit is not None:
            low, high = hit
            raise SimError(
                LLMStatusCode.LLM_DEVICE_MEM_ERROR,
                f"uncorrectable memory error at {max(low, address):#x} "
                f"(poisoned range [{low:#x}, {high:#x}))",
            )


def tensor_views(
    space: AddressSpace, addrs: Sequence[int], shape: Sequence[int], dtype: npt.DTypeLike
) -> list[npt.NDArray[np.generic]]:
    """Numpy views of a cache's tensors from their addresses (the simulator's ``create_npu_tensors``).

    Each view aliases the backing bytes: writing into it is writing into the cache.
    """
    np_dtype = np.dtype(dtype)
    dims = tuple(int(dim) for dim in shape)
    nbytes = int(np.prod(dims, dtype=np.int64)) * np_dtype.itemsize
    return [space.view(address, nbytes).view(np_dtype).reshape(dims) for address in addrs]
