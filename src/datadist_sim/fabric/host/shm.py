"""KV bytes every process of a fabric can map: simulated allocations backed by sealed memory files.

The fabric's address space is the world's ordinary ``AddressSpace`` with two changes:

- every allocation's backing is an ``mmap`` of its own anonymous memory file (``memfd_create``), so a
  client maps the very bytes of a cache (``get_cache_tensors``, ``tensor_views``) and a pull between two
  processes is one ``memcpy`` inside the fabric, never a copy through a socket. A client is told a
  file's random name and asks the fabric for it over its authenticated connection, which hands over a
  descriptor (``fdpass``: ``SCM_RIGHTS``), so no path is involved and a client in another PID or user
  namespace maps it as well. The files have no name in ``/dev/shm``: nobody can guess,
  squat, list or unlink them, and the kernel frees their memory once no process holds or maps them, so
  a fabric that is killed leaves nothing behind and no other fabric (in this PID namespace or another
  sharing ``/dev/shm``) ever has anything of it to reclaim. Each file is sealed against shrinking and
  growing (``F_SEAL_SHRINK | F_SEAL_GROW``) before anyone else can open it: a truncation, which would
  make the fabric's next touch of those pages a ``SIGBUS`` and kill every job's world, is refused by
  the kernel (``EPERM``), and a client maps only a file it finds so sealed. A backing that cannot be
  had is the pool's out-of-memory code.
- an address that is not simulated is a raw pointer of some *client* process (``data_ptr()`` of its
  tensor), which only that process can touch. Copies involving one ask ``RawMemory`` (the fabric's
  router), which has the owner read or write its own memory on the peer's behalf.
"""

from __future__ import annotations

import contextlib
import fcntl
import mmap
import os
import resource
import secrets
import tempfile
import threading
from typing import Any, Callable, Dict, Iterable, List, Optional, Protocol, Sequence, Tuple

import numpy as np
import numpy.typing as npt

from datadist_sim._status import LLMStatusCode
from datadist_sim._world.surface import AddressSpace, SimError, is_simulated
from datadist_sim.fabric.transport.memfile import Bytes, ViewRef

Range = Tuple[int, int]


Take = Callable[[int], "Scratch"]
"""Lends a scratch file of at least the given size for the rest of one copy."""


class RawMemory(Protocol):
    """Reads and writes raw pointers through the process that owns them."""

    def read(self, ranges: Sequence[Range], take: Take) -> List[Bytes]: ...

    def check_writable(self, ranges: Sequence[Range], alone: bool = False) -> None: ...

    def write(
        self, chunks: Sequence[Tuple[int, Bytes]], take: Take, lent: Sequence[Scratch] = ()
    ) -> None: ...

    def copy_direct(self, copies: Sequence[Tuple[int, int, int]]) -> bool: ...


def shm_directory() -> str:
    """Where shared-memory files go (the benchmarks' baseline maps such files)."""
    return "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()


class SharedAddressSpace(AddressSpace):
    """The fabric's address space: shared-memory backing, and raw pointers served by their owners."""

    raw_per_process = True

    def __init__(self, raw: RawMemory, *, backed: bool = True, prefix: Optional[str] = None) -> None:
        super().__init__(backed=backed)
        self._raw = raw
        self._prefix = prefix or "datadist-sim"
        self._pools: List[Tuple[int, int, LLMStatusCode]] = []  # (base, end, oom code) of each pool
        self._segments: Dict[int, Tuple[Segment, Bytes]] = {}
        self._paths: Dict[int, str] = {}  # id(root array) -> its file
        self._seg_lock = threading.Lock()
        self._scratch = ScratchPool(self._prefix)
        _raise_file_limit()

    # -- backing ------------------------------------------------------------------------------------

    def create_pool(self, memory_size: int, *, oom_code: LLMStatusCode, **kwargs: Any) -> Any:
        pool = super().create_pool(memory_size, oom_code=oom_code, **kwargs)
        with self._seg_lock:
            self._pools.append((pool.base, pool.base + max(memory_size, 1), oom_code))
        return pool

    def _oom_code(self, address: int) -> LLMStatusCode:
        with self._seg_lock:
            for low, high, code in self._pools:
                if low <= address < high:
                    return code
        return LLMStatusCode.LLM_OUT_OF_MEMORY

    def on_allocate(self, address: int, nbytes: int, requested: Optional[int] = None) -> None:
        # the shared file spans the whole reservation: a file's pages cost memory only once written,
        # so the padding is free here, and views of it always alias the allocation
        super().on_allocate(address, nbytes, 0)
        if not self.backed or nbytes <= 0:
            return
        try:
            segment, mapped = _create_mapped(self._prefix, nbytes)
        except OSError as exc:
            super().on_free(address, nbytes)
            raise SimError(
                self._oom_code(address), f"no shared memory for {nbytes} B at {address:#x}: {exc}"
            ) from None
        root: Bytes = np.frombuffer(mapped, dtype=np.uint8)
        # fabric hook: the base keeps one buffer per allocation; ours is the shared file's mapping.
        with self._lock:
            self._buffers[address] = root
        with self._seg_lock:
            self._segments[address] = (segment, root)
            self._paths[id(root)] = segment.handle

    def on_free(self, address: int, nbytes: int) -> None:
        super().on_free(address, nbytes)
        with self._seg_lock:
            segment = self._segments.pop(address, None)
            if segment is not None:
                self._paths.pop(id(segment[1]), None)
        if segment is not None:
            segment[0].close()

    def release_all(self) -> None:
        """Close every backing file (the fabric is going away; mappings still held keep their bytes)."""
        with self._seg_lock:
            segments = [segment for segment, _ in self._segments.values()]
            self._segments.clear()
            self._paths.clear()
        for segment in segments:
            segment.close()
        self._scratch.release_all()

    @property
    def scratch_files_made(self) -> int:
        return self._scratch.made

    @property
    def segment_count(self) -> int:
        with self._seg_lock:
            return len(self._segments)

    def locate(self, array: npt.NDArray[Any]) -> Optional[ViewRef]:
        """Where ``array``'s bytes live, if it is a view of shared backing; None otherwise."""
        root: Any = array
        while isinstance(root.base, np.ndarray):
            root = root.base
        with self._seg_lock:
            path = self._paths.get(id(root))
        if path is None:
            return None
        offset = array.__array_interface__["data"][0] - root.__array_interface__["data"][0]
        return path, offset, tuple(array.shape), array.dtype.str, tuple(array.strides)

    # -- copies that involve raw pointers of other processes ------------------------------------------

    def copy_ranges(self, ranges: Iterable[Tuple[int, int, int]]) -> None:
        """All or nothing, as the base: simulated ranges and remote destinations are checked, remote
        sources read, before the first byte is written."""
        todo = list(ranges)
        if not self.backed or all(is_simulated(d) and is_simulated(s) for d, s, _ in todo):
            super().copy_ranges(todo)
            return
        for dst, src, nbytes in todo:
            for address in (dst, src):
                if not is_simulated(address):
                    self._check_raw(address, nbytes)
        targets = [self.resolve(d, n, writable=True) if is_simulated(d) else None for d, _, n in todo]
        sources = [self.resolve(s, n) if is_simulated(s) else None for _, s, n in todo]
        remote_dst = [(d, n) for d, _, n in todo if not is_simulated(d)]
        if remote_dst:
            self._raw.check_writable(remote_dst, alone=len(remote_dst) == len(todo))
        if not any(is_simulated(d) or is_simulated(s) for d, s, _ in todo) and self._raw.copy_direct(todo):
            return
        taken: List[Scratch] = []

        def take(nbytes: int) -> Scratch:
            taken.append(self._scratch.take(nbytes))
            return taken[-1]

        try:
            fetched = iter(self._raw.read([(s, n) for _, s, n in todo if not is_simulated(s)], take))
            writes: List[Tuple[int, Bytes]] = []
            for (dst, _, _), target, source in zip(todo, targets, sources):
                data: Bytes = source if source is not None else next(fetched)
                if target is not None:
                    np.copyto(target, data)
                else:
                    writes.append((dst, data))
            if writes:
                self._raw.write(writes, take, taken)
        finally:
            for scratch in taken:
                self._scratch.give(scratch)

    def _check_raw(self, address: int, nbytes: int) -> None:
        if nbytes < 0:
            raise SimError(
                LLMStatusCode.LLM_PARAM_INVALID, f"negative transfer size {nbytes} at {address:#x}"
            )
        self._check_poison(address, nbytes)


SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL
"""A backing's size is fixed for its life: nobody can truncate it under a mapping (``SIGBUS``)."""


class Segment:
    """One sealed memory file the fabric holds open: its descriptor, and the name clients ask for it by
    (``lend``)."""

    __slots__ = ("fd", "handle")

    def __init__(self, fd: int, name: str) -> None:
        self.fd = fd
        self.handle = name
        with _files_lock:
            _files[name] = fd

    def close(self) -> None:
        """Give up the descriptor (the memory goes once no process maps it any more)."""
        with _files_lock:
            fd, self.fd = self.fd, -1
            if _files.get(self.handle) == fd:
                del _files[self.handle]
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)


_files: Dict[str, int] = {}
"""Every live memory file of this process by name: what ``lend`` may hand out."""
_files_lock = threading.Lock()


def lend(name: str) -> Tuple[int, int]:
    """A duplicate of the descriptor of this process's memory file ``name`` (the caller closes it), and
    the file's size; ``FileNotFoundError`` if it is gone (freed). The names are random (64 bits) and
    only ever told to the fabric's authenticated peers."""
    with _files_lock:  # dup under the lock: a concurrent close cannot hand over a reused number
        fd = _files.get(name) if type(name) is str else None
        if fd is None:
            raise FileNotFoundError(f"the fabric's memory {name!r} is gone (freed)")
        mine = os.dup(fd)
    try:
        return mine, os.fstat(mine).st_size
    except OSError:
        os.close(mine)
        raise


def _create_mapped(prefix: str, nbytes: int) -> Tuple[Segment, mmap.mmap]:
    """A new sealed memory file ``<prefix>-<random>`` of ``nbytes``, and its mapping; failures raise
    ``OSError`` (``ENOMEM``, ``EMFILE``: the caller's out-of-memory code)."""
    name = f"{os.path.basename(prefix)}-{secrets.token_hex(8)}"
    fd = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        os.ftruncate(fd, nbytes)
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, SEALS)  # before anyone else can reach it
        mapped = mmap.mmap(fd, nbytes)
    except OSError:
        os.close(fd)
        raise
    return Segment(fd, name), mapped


def _raise_file_limit() -> None:
    """Each backing holds a descriptor for its life: let the fabric have as many as it is allowed."""
    with contextlib.suppress(ValueError, OSError):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


class Scratch:
    """A shared file that carries one large transfer to or from a client's raw memory: the client maps
    it by its name (``path``) and copies, so the bytes never pass through the socket."""

    def __init__(self, prefix: str, nbytes: int) -> None:
        self._segment, mapped = _create_mapped(prefix, nbytes)
        self.path = self._segment.handle
        self.size = nbytes
        self.array: Bytes = np.frombuffer(mapped, dtype=np.uint8)

    def split(self, sizes: Sequence[int]) -> List[Bytes]:
        """Consecutive views of the given sizes."""
        views, offset = [], 0
        for size in sizes:
            views.append(self.array[offset : offset + size])
            offset += size
        return views

    def fill(self, chunks: Sequence[Bytes]) -> List[Tuple[int, int]]:
        """Copy ``chunks`` in one after another; their ``(offset, nbytes)``."""
        placed, offset = [], 0
        for chunk in chunks:
            self.array[offset : offset + chunk.nbytes] = chunk.reshape(-1).view(np.uint8)
            placed.append((offset, chunk.nbytes))
            offset += chunk.nbytes
        return placed

    def unlink(self) -> None:
        """Give the file up; the mapping stays valid for as long as views of it live."""
        self._segment.close()


class ScratchPool:
    """Scratch files kept warm between transfers: touching fresh shared pages costs more than the
    copy itself, so a file, once used, is lent again (to one copy at a time)."""

    KEEP = 4

    def __init__(self, prefix: str) -> None:
        self._prefix = prefix
        self._free: List[Scratch] = []
        self._lock = threading.Lock()
        self._made = 0

    def take(self, nbytes: int) -> Scratch:
        with self._lock:
            fits = [scratch for scratch in self._free if scratch.size >= nbytes]
            if fits:
                best = min(fits, key=lambda scratch: scratch.size)
                self._free.remove(best)
                return best
            self._made += 1
        size = max(1 << 20, 1 << (nbytes - 1).bit_length())
        try:
            return Scratch(f"{self._prefix}-scratch", size)
        except OSError as exc:
            raise SimError(
                LLMStatusCode.LLM_OUT_OF_MEMORY, f"no shared memory for a {size} B transfer buffer: {exc}"
            ) from None

    def give(self, scratch: Scratch) -> None:
        with self._lock:
            self._free.append(scratch)
            self._free.sort(key=lambda each: each.size)
            evicted = self._free[: -self.KEEP] if len(self._free) > self.KEEP else []
            self._free = self._free[len(evicted) :]
        for each in evicted:
            each.unlink()

    @property
    def made(self) -> int:
        """Scratch files made so far (reuse keeps this small)."""
        with self._lock:
            return self._made

    def release_all(self) -> None:
        with self._lock:
            free, self._free = self._free, []
        for each in free:
            each.unlink()
