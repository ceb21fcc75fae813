"""A fabric memory file as both ends see it: the reference to a view of one (``ViewRef``, made by the
fabric's ``SharedAddressSpace.locate``) and mapping one in this process (a client's side of a cache's
views and of a scratch file), checked to be the sealed file of the size the fabric said."""

from __future__ import annotations

import mmap
import os
from typing import Any, Callable, Tuple

import numpy as np
import numpy.typing as npt

from datadist_sim.fabric.transport.fdpass import check_memory_file

Bytes = npt.NDArray[np.uint8]
Fetch = Callable[[str], Tuple[int, int]]
"""Gets the fabric's file of a name: a descriptor the caller then owns, and the size the fabric says
it has (a client's is ``FabricClient.fetch_file``; in the fabric's own process, ``lend``)."""
ViewRef = Tuple[str, int, Tuple[int, ...], str, Tuple[int, ...]]
"""``(handle, offset, shape, dtype, strides)``: enough for another process to map the same bytes (the
handle is the file's name, what ``open_mapped`` asks for)."""


def open_mapped(handle: str, fetch: Fetch) -> mmap.mmap:
    """Map, in this process, the fabric's file named ``handle``, got through ``fetch``: it must be a
    memory file of that name, of the size the fabric said, sealed so its size can never change (a file
    that could shrink under the mapping would make a touch of it ``SIGBUS``). One that is gone, or not
    what was asked for, raises ``FileNotFoundError``. The descriptor is closed once mapped."""
    fd, size = fetch(handle)
    try:
        check_memory_file(fd, handle, size)
        return mmap.mmap(fd, size)
    finally:
        os.close(fd)


def open_view(ref: ViewRef, fetch: Fetch) -> npt.NDArray[Any]:
    """Map the bytes ``ref`` names into this process (a client's side of ``locate``)."""
    handle, offset, shape, dtype, strides = ref
    view: npt.NDArray[Any] = np.ndarray(
        shape, dtype=np.dtype(dtype), buffer=open_mapped(handle, fetch), offset=offset, strides=strides
    )
    return view


def open_scratch(path: str, fetch: Fetch) -> Bytes:
    """Map a scratch file the fabric made (a client's side of ``Scratch``)."""
    return np.frombuffer(open_mapped(path, fetch), dtype=np.uint8)
