"""The fabric's side of a client process's ``hixl.Hixl``: the ordinary face object, in the shared world.

A client's ``Hixl`` (``fabric/client/hixl_proxy.py``) sends plain values; ``HostedHixl`` rebuilds the face's
data classes and enums from them with the face's own constructors (so a value a peer made up is refused
as the binding refuses it, with a ``TypeError`` that fails only that request), runs the face's method,
and answers with plain values again. Everything the engine decides is the in-process face's and world's,
unchanged: codes, order of checks, virtual time, faults and trace.

``HixlOwners`` knows which process each engine belongs to. A transfer names its two engines as the
parties of its copy (``surface.copy_parties``), and the fabric's raw router asks it which process holds
each side's memory, so a READ reads the remote engine's process and writes only the caller's, whatever
numbers the two processes' pointers happen to be. When a process is lost its engines are finalized, as
the real engine's peers find a dead process's listener gone.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any, Dict, List, Optional, Tuple

from datadist_sim.fabric.host.carried import INLINE_BYTES, carrying
from datadist_sim.fabric.host.session import Session, calling_session
from datadist_sim.hixl._engine import Hixl
from datadist_sim.hixl._enum import MemType, TransferOp
from datadist_sim.hixl._types import GetTransferStatusArgs, MemDesc, NotifyDesc, TransferArgs, TransferOpDesc


class HixlOwners:
    """Which client process each live hixl engine of the world belongs to."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owner: weakref.WeakKeyDictionary[Any, Session] = weakref.WeakKeyDictionary()
        self._hosted: Dict[Session, weakref.WeakSet[HostedHixl]] = {}

    def hosted(self, session: Session, obj: HostedHixl) -> None:
        with self._lock:
            self._hosted.setdefault(session, weakref.WeakSet()).add(obj)

    def engine_opened(self, engine: Any, session: Session) -> None:
        with self._lock:
            self._owner[engine] = session

    def owner(self, engine: Any) -> Optional[Session]:
        """The process whose ``Hixl`` opened ``engine`` (None for an engine of no client process)."""
        with self._lock:
            try:
                return self._owner.get(engine)
            except TypeError:  # not an engine at all (it cannot be weakly referenced): no process's
                return None

    def session_lost(self, session: Session) -> None:
        """Finalize every engine the lost process still had open."""
        with self._lock:
            objects = list(self._hosted.pop(session, ()))
        for obj in objects:
            obj.finalize()


class HostedHixl:
    """One client process's ``Hixl``, living in the fabric."""

    def __init__(self, owners: HixlOwners) -> None:
        session = calling_session()
        if session is None:
            raise RuntimeError("a hosted hixl engine is made only for a client process's request")
        self._face = Hixl()
        self._owners = owners
        self._session = session
        owners.hosted(session, self)

    def __str__(self) -> str:
        return repr(self._face)

    def initialize(self, local: str, options: Dict[str, str]) -> int:
        code = self._face.initialize(local, options)
        engine = self._face._engine  # the world's engine, once open: its memory is this process's
        if engine is not None:
            self._owners.engine_opened(engine, self._session)
        return code

    def finalize(self) -> None:
        self._face.finalize()

    def register_mem(self, addr: int, nbytes: int, mem_type: int) -> Tuple[int, int]:
        return self._face.register_mem(MemDesc(addr, nbytes), MemType(mem_type))

    def deregister_mem(self, handle: int) -> int:
        return self._face.deregister_mem(handle)

    def connect(self, remote: str, timeout_in_millis: int) -> int:
        return self._face.connect(remote, timeout_in_millis=timeout_in_millis)

    def disconnect(self, remote: str, timeout_in_millis: int) -> int:
        return self._face.disconnect(remote, timeout_in_millis=timeout_in_millis)

    def connect_async(self, remote: str, timeout_in_millis: int) -> int:
        return self._face.connect_async(remote, timeout_in_millis=timeout_in_millis)

    def disconnect_async(self, remote: str, timeout_in_millis: int) -> int:
        return self._face.disconnect_async(remote, timeout_in_millis=timeout_in_millis)

    def get_async_connect_status(self, remote: str) -> Tuple[int, int]:
        code, state = self._face.get_async_connect_status(remote)
        return code, int(state)

    def get_all_async_connect_status(self) -> Tuple[int, Dict[str, int]]:
        code, table = self._face.get_all_async_connect_status()
        return code, {remote: int(state) for remote, state in table.items()}

    def transfer_sync(self, remote: str, op: int, descs: List[Any], timeout_in_millis: int) -> int:
        return self._face.transfer_sync(
            remote, TransferOp(op), _descs(descs), timeout_in_millis=timeout_in_millis
        )

    def read_sync(
        self, remote: str, descs: List[Any], timeout_in_millis: int
    ) -> Tuple[int, List[Tuple[int, bytes]]]:
        """``transfer_sync`` READ whose bytes come back in the reply: the caller has checked that its
        local ranges are writable memory of its own and writes what the world wrote there, all or
        nothing, when the reply arrives (``fabric/host/carried.py``). Exactly the world's writes come
        back, whatever the code (none, for a refused or failed transfer). A list too large for one
        reply is the ordinary transfer."""
        built = _descs(descs)
        if sum(max(0, d._len) for d in built) > INLINE_BYTES:
            return self.transfer_sync(remote, int(TransferOp.READ), descs, timeout_in_millis), []
        with carrying(vouched=[(d._local_addr, d._len) for d in built]) as carried:
            # by position, as the binding's common call: the face's fast path, the same checks
            code = self._face.transfer_sync(remote, TransferOp.READ, built, timeout_in_millis)
        return code, carried.chunks

    def write_sync(self, remote: str, descs: List[Any], data: List[Any], timeout_in_millis: int) -> int:
        """``transfer_sync`` WRITE whose source bytes came with the call: ``data[i]`` is what the caller
        read at its ``descs[i]`` local range as it called (``fabric/host/carried.py``). Bytes that are
        not one per descriptor, of its length, are refused as a malformed call."""
        built = _descs(descs)
        if type(data) is not list or len(data) != len(built):
            raise TypeError("write_sync: one bytes object per descriptor")
        supplied: Dict[Tuple[int, int], bytes] = {}
        for desc, chunk in zip(built, data):
            if type(chunk) is not bytes or len(chunk) != desc._len:
                raise TypeError("write_sync: each descriptor's bytes, of its length")
            supplied[(desc._local_addr, desc._len)] = chunk
        if sum(len(chunk) for chunk in data) > INLINE_BYTES:
            return self.transfer_sync(remote, int(TransferOp.WRITE), descs, timeout_in_millis)
        with carrying(supplied=supplied):
            return self._face.transfer_sync(remote, TransferOp.WRITE, built, timeout_in_millis)

    def transfer_async(self, remote: str, op: int, descs: List[Any], user_data: int) -> Tuple[int, int]:
        args = TransferArgs()
        args.user_data = user_data
        return self._face.transfer_async(remote, TransferOp(op), _descs(descs), args)

    def get_transfer_status(self, req: int) -> Tuple[int, int]:
        code, state = self._face.get_transfer_status(req)
        return code, int(state)

    def get_all_transfer_status(self, max_query_count: int, skip_waiting: bool) -> Tuple[int, List[Any]]:
        args = GetTransferStatusArgs(max_query_count=max_query_count, skip_waiting=skip_waiting)
        code, found = self._face.get_all_transfer_status(args)
        return code, [(r.req, r.user_data, int(r.status)) for r in found]

    def send_notify(self, remote: str, name: bytes, msg: bytes, timeout_in_millis: int) -> int:
        return self._face.send_notify(remote, NotifyDesc(name, msg), timeout_in_millis=timeout_in_millis)

    def get_notifies(self) -> Tuple[int, List[Tuple[bytes, bytes]]]:
        code, found = self._face.get_notifies()
        return code, [(bytes(n._name), bytes(n._notify_msg)) for n in found]


def _descs(descs: List[Any]) -> List[TransferOpDesc]:
    """Descriptors rebuilt from ``(local_addr, remote_addr, len)`` triples; anything else is refused as
    the binding refuses a value it cannot cast."""
    if type(descs) is not list:
        raise TypeError("op_descs must be a list of (local_addr, remote_addr, len)")
    built = []
    for item in descs:
        if type(item) is not tuple or len(item) != 3:
            raise TypeError("op_descs must be a list of (local_addr, remote_addr, len)")
        local, remote, nbytes = item
        built.append(TransferOpDesc(local_addr=local, remote_addr=remote, len=nbytes))
    return built
