"""KV bytes every process of a fabric can map: simulated allocations backed by shared-memory files.

The fabric's address space is the world's ordinary ``AddressSpace`` with two changes:

- every allocation's backing is an ``mmap`` of its own file in ``/dev/shm`` (mode 0600), so a client
  maps the very bytes of a cache (``get_cache_tensors``, ``tensor_views``) and a pull between two
  processes is one ``memcpy`` inside the fabric, never a copy through a socket. Freeing unlinks the
  file; the pages go once no process maps them any more.
- an address that is not simulated is a raw pointer of some *client* process (``data_ptr()`` of its
  tensor), which only that process can touch. Copies involving one ask ``RawMemory`` (the fabric's
  router), which has the owner read or write its own memory on the peer's behalf.
"""

from __future__ import annotations

import contextlib
import itertools
import mmap
import os
import re
import tempfile
import threading
from typing import Any, Dict, Iterable, List, Optional, Protocol, Sequence, Tuple

import numpy as np
import numpy.typing as npt

from datadist_sim._status import LLMStatusCode
from datadist_sim._world.address_space import AddressSpace, is_simulated
from datadist_sim._world.errors import SimError

Bytes = npt.NDArray[np.uint8]
Range = Tuple[int, int]
ViewRef = Tuple[str, int, Tuple[int, ...], str, Tuple[int, ...]]
"""``(path, offset, shape, dtype, strides)``: enough for another process to map the same bytes."""


class RawMemory(Protocol):
    """Reads and writes raw pointers through the process that owns them."""

    def read(self, ranges: Sequence[Range]) -> List[bytes]: ...

    def check_writable(self, ranges: Sequence[Range]) -> None: ...

    def write(self, chunks: Sequence[Tuple[int, bytes]]) -> None: ...


def shm_directory() -> str:
    return "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()


class SharedAddressSpace(AddressSpace):
    """The fabric's address space: shared-memory backing, and raw pointers served by their owners."""

    def __init__(self, raw: RawMemory, *, backed: bool = True, prefix: Optional[str] = None) -> None:
        super().__init__(backed=backed)
        self._raw = raw
        self._prefix = os.path.join(shm_directory(), prefix or f"datadist-sim-{os.getpid()}")
        self._counter = itertools.count()
        self._segments: Dict[int, Tuple[str, Bytes]] = {}
        self._paths: Dict[int, str] = {}  # id(root array) -> its file
        self._seg_lock = threading.Lock()

    # -- backing ------------------------------------------------------------------------------------

    def on_allocate(self, address: int, nbytes: int) -> None:
        super().on_allocate(address, nbytes)
        if not self.backed or nbytes <= 0:
            return
        path = f"{self._prefix}-{next(self._counter)}"
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.ftruncate(fd, nbytes)
            mapped = mmap.mmap(fd, nbytes)
        finally:
            os.close(fd)
        root: Bytes = np.frombuffer(mapped, dtype=np.uint8)
        # fabric hook: the base keeps one buffer per allocation; ours is the shared file's mapping.
        with self._lock:
            self._buffers[address] = root
        with self._seg_lock:
            self._segments[address] = (path, root)
            self._paths[id(root)] = path

    def on_free(self, address: int, nbytes: int) -> None:
        super().on_free(address, nbytes)
        with self._seg_lock:
            segment = self._segments.pop(address, None)
            if segment is not None:
                self._paths.pop(id(segment[1]), None)
        if segment is not None:
            _unlink(segment[0])

    def release_all(self) -> None:
        """Unlink every backing file (the fabric is going away)."""
        with self._seg_lock:
            paths = [path for path, _ in self._segments.values()]
            self._segments.clear()
            self._paths.clear()
        for path in paths:
            _unlink(path)

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
            self._raw.check_writable(remote_dst)
        fetched = iter(self._raw.read([(s, n) for _, s, n in todo if not is_simulated(s)]))
        writes: List[Tuple[int, bytes]] = []
        for (dst, _, _), target, source in zip(todo, targets, sources):
            data: Any = source if source is not None else np.frombuffer(next(fetched), dtype=np.uint8)
            if target is not None:
                np.copyto(target, data)
            else:
                writes.append((dst, bytes(data)))
        if writes:
            self._raw.write(writes)

    def _check_raw(self, address: int, nbytes: int) -> None:
        if nbytes < 0:
            raise SimError(
                LLMStatusCode.LLM_PARAM_INVALID, f"negative transfer size {nbytes} at {address:#x}"
            )
        end = address + nbytes
        for low, high in self.poisoned:
            if low < end and address < high:
                raise SimError(
                    LLMStatusCode.LLM_DEVICE_MEM_ERROR,
                    f"uncorrectable memory error at {max(low, address):#x} "
                    f"(poisoned range [{low:#x}, {high:#x}))",
                )


_FABRIC_FILE = re.compile(r"^datadist-sim-(\d+)-\d+$")


def reclaim_stale(directory: Optional[str] = None) -> int:
    """Unlink backing files of fabrics that died without cleaning up (killed); returns how many.

    Only files named as a fabric names them, owned by this user, whose fabric process is gone.
    """
    folder = directory if directory is not None else shm_directory()
    removed = 0
    for name in os.listdir(folder):
        match = _FABRIC_FILE.match(name)
        if match is None or _alive(int(match.group(1))):
            continue
        path = os.path.join(folder, name)
        with contextlib.suppress(OSError):
            if os.stat(path).st_uid == os.getuid():
                os.unlink(path)
                removed += 1
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _unlink(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def open_view(ref: ViewRef) -> npt.NDArray[Any]:
    """Map the bytes ``ref`` names into this process (a client's side of ``locate``)."""
    path, offset, shape, dtype, strides = ref
    fd = os.open(path, os.O_RDWR)
    try:
        mapped = mmap.mmap(fd, os.fstat(fd).st_size)
    finally:
        os.close(fd)
    view: npt.NDArray[Any] = np.ndarray(
        shape, dtype=np.dtype(dtype), buffer=mapped, offset=offset, strides=strides
    )
    return view
