"""``hixl.Hixl`` as a client process of a fabric sees it: the engine lives in the fabric's world.

Each process's engines are registered in the one shared world, so an engine in one process connects to
another process's by ``"ip:port"`` and moves bytes between the two processes' registered memory; the
fabric has the owning process read or write its raw memory (``fabric/host/raw.py``), as it does for an
``LLMDataDist``'s caches.

The binding's argument casting runs here, with the face's own method specs, so a wrong argument raises
the same ``TypeError`` it raises in one process. What then crosses the socket is plain values only
(numbers, text, bytes, lists, tuples, dicts): the hixl data classes and enums are taken apart here and
rebuilt on the other side (``fabric/host/hixl_host.py``), never decoded as objects, so the fabric's codec
carries nothing new. Results come back the same way and are rebuilt into the face's types.

A small synchronous READ (up to ``REPLY_BYTES``) whose local ranges this process can vouch for as its
own writable memory asks for its bytes in the reply (``read_sync``): the fabric decides everything as
for any transfer, reads the remote process's memory itself where the kernel lets it, and returns exactly
what the world wrote into this process's ranges, which is written here once every range is checked
again (all or nothing). So the call costs one round trip, where asking this process to check, and then
to write, its own memory while it waits for the reply cost two more (``fabric/host/carried.py``).
A small WRITE likewise reads its local ranges here and sends their bytes with the call (``write_sync``),
so the fabric asks only the destination's process, once, to write them.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from datadist_sim._world.surface import SimError
from datadist_sim.fabric.client.client import FabricClient, current_client
from datadist_sim.fabric.client.client import _own as own_memory
from datadist_sim.fabric.client.remote import RemoteObject, stands_for
from datadist_sim.hixl import _codes as codes
from datadist_sim.hixl import _engine as face
from datadist_sim.hixl._cast import Method, bind
from datadist_sim.hixl._enum import AsyncConnectStatus, TransferOp, TransferStatus
from datadist_sim.hixl._types import NotifyDesc, TransferResult

TYPE_NAME = "HostedHixl"
"""The fabric's class a client's ``Hixl`` stands for (``fabric/host/hixl_host.py``)."""
REPLY_BYTES = 256 << 10
"""A READ of up to this many bytes comes back in the reply (the fabric's own bound is
``raw.INLINE_BYTES``: above it, it makes the ordinary transfer)."""


def _client() -> FabricClient:
    client = current_client()
    if client is None:
        raise RuntimeError("DATADIST_SIM_FABRIC is not set: this process belongs to no fabric")
    return client


@stands_for(TYPE_NAME)
class Hixl(RemoteObject):
    """``hixl.Hixl()`` of a process in a cross-process world: its engine is built in the fabric when
    the object is, and every method runs there."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        bind("Hixl", (), args, kwargs)
        client = _client()
        handle = client.request("new_hixl")
        super().__init__(client, handle, TYPE_NAME)
        client.adopt(handle, self)

    def __repr__(self) -> str:
        return f"<hixl.hixl.Hixl object at 0x{id(self):x}>"

    __str__ = __repr__

    def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        return self._client.request("call", self, name, args, kwargs)

    # -- life ---------------------------------------------------------------------------------------

    def initialize(self, *args: object, **kwargs: object) -> int:
        local, options = face.INITIALIZE.load(self, args, kwargs)
        return int(self._call("initialize", local, dict(options)))

    def finalize(self, *args: object, **kwargs: object) -> None:
        face.FINALIZE.load(self, args, kwargs)
        self._call("finalize")

    # -- memory -------------------------------------------------------------------------------------

    def register_mem(self, *args: object, **kwargs: object) -> Tuple[int, int]:
        desc, mem_type = face.REGISTER_MEM.load(self, args, kwargs)
        code, handle = self._call("register_mem", desc.addr, desc.len, int(mem_type))
        return int(code), int(handle)

    def deregister_mem(self, *args: object, **kwargs: object) -> int:
        (handle,) = face.DEREGISTER_MEM.load(self, args, kwargs)
        return int(self._call("deregister_mem", handle))

    # -- connections --------------------------------------------------------------------------------

    def _link(self, name: str, method: Method, args: Tuple[object, ...], kwargs: Dict[str, object]) -> int:
        remote, timeout = method.load(self, args, kwargs)
        return int(self._call(name, remote, timeout_in_millis=timeout))

    def connect(self, *args: object, **kwargs: object) -> int:
        return self._link("connect", face.CONNECT, args, kwargs)

    def disconnect(self, *args: object, **kwargs: object) -> int:
        return self._link("disconnect", face.DISCONNECT, args, kwargs)

    def connect_async(self, *args: object, **kwargs: object) -> int:
        return self._link("connect_async", face.CONNECT_ASYNC, args, kwargs)

    def disconnect_async(self, *args: object, **kwargs: object) -> int:
        return self._link("disconnect_async", face.DISCONNECT_ASYNC, args, kwargs)

    def get_async_connect_status(self, *args: object, **kwargs: object) -> Tuple[int, AsyncConnectStatus]:
        (remote,) = face.GET_ASYNC_CONNECT_STATUS.load(self, args, kwargs)
        code, state = self._call("get_async_connect_status", remote)
        return int(code), AsyncConnectStatus(int(state))

    def get_all_async_connect_status(
        self, *args: object, **kwargs: object
    ) -> Tuple[int, Dict[str, AsyncConnectStatus]]:
        face.GET_ALL_ASYNC_CONNECT_STATUS.load(self, args, kwargs)
        code, table = self._call("get_all_async_connect_status")
        return int(code), {str(remote): AsyncConnectStatus(int(state)) for remote, state in table.items()}

    # -- transfers ----------------------------------------------------------------------------------

    def transfer_sync(self, *args: object, **kwargs: object) -> int:
        remote, op, descs, timeout = face.TRANSFER_SYNC.load(self, args, kwargs)
        plain = _plain(descs)
        if int(op) == int(TransferOp.READ) and _vouch(plain):
            code, chunks = self._call("read_sync", remote, plain, timeout_in_millis=timeout)
            return _write_delivered(int(code), chunks, plain)
        if int(op) == int(TransferOp.WRITE):
            data = _supply(plain)
            if data is not None:
                return int(self._call("write_sync", remote, plain, data, timeout_in_millis=timeout))
        return int(self._call("transfer_sync", remote, int(op), plain, timeout_in_millis=timeout))

    def transfer_async(self, *args: object, **kwargs: object) -> Tuple[int, int]:
        remote, op, descs, targs = face.TRANSFER_ASYNC.load(self, args, kwargs)
        code, req = self._call("transfer_async", remote, int(op), _plain(descs), targs.user_data)
        return int(code), int(req)

    def get_transfer_status(self, *args: object, **kwargs: object) -> Tuple[int, TransferStatus]:
        (req,) = face.GET_TRANSFER_STATUS.load(self, args, kwargs)
        code, state = self._call("get_transfer_status", req)
        return int(code), TransferStatus(int(state))

    def get_all_transfer_status(self, *args: object, **kwargs: object) -> Tuple[int, List[TransferResult]]:
        (sargs,) = face.GET_ALL_TRANSFER_STATUS.load(self, args, kwargs)
        code, found = self._call("get_all_transfer_status", sargs.max_query_count, sargs.skip_waiting)
        results = [TransferResult._make(int(r), int(u), TransferStatus(int(s))) for r, u, s in found]
        return int(code), results

    # -- notifies -----------------------------------------------------------------------------------

    def send_notify(self, *args: object, **kwargs: object) -> int:
        remote, notify, timeout = face.SEND_NOTIFY.load(self, args, kwargs)
        name, msg = bytes(notify._name), bytes(notify._notify_msg)
        return int(self._call("send_notify", remote, name, msg, timeout_in_millis=timeout))

    def get_notifies(self, *args: object, **kwargs: object) -> Tuple[int, List[NotifyDesc]]:
        face.GET_NOTIFIES.load(self, args, kwargs)
        code, found = self._call("get_notifies")
        return int(code), [NotifyDesc(bytes(name), bytes(msg)) for name, msg in found]


def _plain(descs: List[Any]) -> List[Tuple[int, int, int]]:
    return [(d._local_addr, d._remote_addr, d._len) for d in descs]


def _small(plain: Sequence[Tuple[int, int, int]]) -> bool:
    total = 0
    for _, _, nbytes in plain:
        if type(nbytes) is not int or nbytes <= 0:
            return False
        total += nbytes
    return bool(plain) and total <= REPLY_BYTES


def _vouch(plain: Sequence[Tuple[int, int, int]]) -> bool:
    """Whether a READ of these descriptors can take its bytes in the reply: small enough, and every local
    range writable memory of this process (else the fabric decides, and refuses, as for any transfer)."""
    if not _small(plain):
        return False
    try:
        for local, _, nbytes in plain:
            own_memory(local, nbytes, writable=True)
    except SimError:
        return False
    return True


def _supply(plain: Sequence[Tuple[int, int, int]]) -> Optional[List[bytes]]:
    """The bytes of each local range of a small WRITE, read here to go with the call; None (the fabric
    then asks for them, and decides, as for any transfer) if it is too large or a range is not readable
    memory of this process. Reading them before the fabric decides is harmless: it writes nothing."""
    if not _small(plain):
        return None
    try:
        return [bytes(own_memory(local, nbytes, writable=False)) for local, _, nbytes in plain]
    except SimError:
        return None


def _write_delivered(code: int, chunks: object, plain: Sequence[Tuple[int, int, int]]) -> int:
    """Write what the fabric's world wrote into this process's memory, all or nothing: each chunk must lie
    in a local range of the call, and every target is checked writable again before the first byte. If
    one went away meanwhile (another thread freed it), nothing is written and the READ answers
    ``PARAM_INVALID``, as the fabric's own check of it would have."""
    if type(chunks) is not list:
        raise TypeError("a malformed READ reply")
    targets: List[Tuple[Any, bytes]] = []
    try:
        for item in chunks:
            address, data = _chunk(item, plain)
            targets.append((own_memory(address, len(data), writable=True), data))
    except SimError:
        return codes.PARAM_INVALID
    for target, data in targets:
        np.copyto(target, np.frombuffer(data, dtype=np.uint8))
    return code


def _chunk(item: object, plain: Sequence[Tuple[int, int, int]]) -> Tuple[int, bytes]:
    found: Optional[Tuple[int, bytes]] = None
    if type(item) is tuple and len(item) == 2 and type(item[0]) is int and type(item[1]) is bytes:
        found = (item[0], item[1])
    if found is None or not any(
        local <= found[0] and found[0] + len(found[1]) <= local + nbytes for local, _, nbytes in plain
    ):
        raise TypeError("a READ reply names memory outside the call's local ranges")
    return found
