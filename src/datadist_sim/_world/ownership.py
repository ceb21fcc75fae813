"""Memory belongs to one cluster: who may register a range, and where a push may write.

On real hardware every instance is its own process on its own device, so an address means something
only to the cluster that owns it: its memory pools (registered with the transport at ``init``, hixl
``data_cache_engine.cc:295``, ``:322``) and the caches it registered (``comm_mem_manager.cc:73-104``).
A remote write goes through the transport's one-sided put into memory the peer registered; the engine
itself never checks a ``TransferConfig`` address (``layer_wise_transfer_job.cc:28-44`` copies it into the
descriptor as given), so what HCCL would do with a foreign address is not in the open source. Here all
clusters share one address space, so the simulator must check what the hardware enforces by isolation:

- ``register_cache`` / ``register_blocks_cache`` of a range that overlaps another live cluster's memory
  (its pools or its registered caches) is refused with ``LLM_PARAM_INVALID`` (inferred: the code the
  engine gives every other rejected register argument), nothing registered;
- a ``TransferConfig.dst_addrs`` range that is not wholly inside the destination cluster's memory
  (another cluster's cache, the sender's own cache, or nothing at all) is refused with
  ``LLM_PARAM_INVALID`` before any byte moves; so is one inside a cache the destination registered with
  ``remote_accessible=False``, which the engine keeps out of the transport (``comm_mem_manager.cc:75-78``)
  and a one-sided put therefore cannot reach (inferred code, as above).

Memory the caller registers that no cluster owns (a raw pointer of its own, a made-up address for
metadata-only use) stays the caller's to register, as before. In a fabric, where clusters run in
separate processes, a raw pointer registered by one process may equal another's, so only simulated
addresses are checked at registration there.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, List, Optional, Sequence, Tuple

from datadist_sim._status import LLMStatusCode
from datadist_sim._world.address_space import is_simulated
from datadist_sim._world.caches import spans
from datadist_sim._world.errors import SimError

if TYPE_CHECKING:
    from datadist_sim._world.world import SimWorld

_P = LLMStatusCode.LLM_PARAM_INVALID


def owners(world: SimWorld, address: int, nbytes: int) -> List[int]:
    """Live clusters whose memory overlaps ``[address, address + nbytes)``, in id order."""
    end = address + max(nbytes, 1)
    found = []
    for cluster_id, store in sorted(world.caches.items()):
        if any(start < end and address < stop for start, stop in spans(store)):
            found.append(cluster_id)
    return found


def holds(world: SimWorld, cluster_id: int, address: int, nbytes: int, *, transport: bool = False) -> bool:
    """Whether ``[address, address + nbytes)`` lies wholly inside one range ``cluster_id`` owns (with
    ``transport``: one it registered with the transport)."""
    store = world.caches.get(cluster_id)
    if store is None:
        return False
    end = address + max(nbytes, 1)
    return any(start <= address and end <= stop for start, stop in spans(store, transport))


def check_register(world: SimWorld, cluster_id: int, addrs: Sequence[int], nbytes: int) -> None:
    """Refuse a registration whose tensors overlap memory of another live cluster.

    When clusters may run in different processes (the fabric), a raw pointer is checked no further: the
    same number can be a different process's own memory.
    """
    for address in addrs:
        if world.memory.raw_per_process and not is_simulated(address):
            continue
        others = [owner for owner in owners(world, address, nbytes) if owner != cluster_id]
        if others:
            raise SimError(
                _P,
                f"address {address:#x} (+{nbytes} B) is memory of cluster {others[0]}, "
                f"not of cluster {cluster_id}: it cannot be registered here",
            )


def check_destinations(world: SimWorld, remote_id: int, ranges: Sequence[Tuple[int, int, int]]) -> None:
    """Refuse a push whose destination ranges are not all memory ``remote_id`` registered with the
    transport."""
    for dst, _, nbytes in ranges:
        if holds(world, remote_id, dst, nbytes, transport=True):
            continue
        if holds(world, remote_id, dst, nbytes):
            raise SimError(
                _P,
                f"dst address {dst:#x} (+{nbytes} B) is a cache cluster {remote_id} registered with "
                "remote_accessible=False: it is not registered with the transport",
            )
        others = owners(world, dst, nbytes)
        whose = f"memory of cluster {others[0]}" if others else "memory of no cluster"
        raise SimError(
            _P,
            f"dst address {dst:#x} (+{nbytes} B) is {whose}, not memory of the destination cluster "
            f"{remote_id}",
        )


# -- whose memory a copy touches --------------------------------------------------------------------------
#
# A transfer knows which cluster each side of it is (a pull writes the caller's cache from the remote's, a
# push the other way round), but the address space it copies through sees only numbers. Where clusters run
# in separate processes (the fabric), a raw pointer means something only in the process that registered it
# and two processes may hold memory at the same number (``fork``ed workers, ASLR off), so the copy's
# parties are published for the running thread while the transfer runs: the fabric's router asks the
# destination's process to write and the source's to read, never a process chosen by the address alone.

_parties = threading.local()
Parties = Optional[Tuple[object, object]]
"""A copy's two sides: cluster ids for an LLM-DataDist transfer, ``HixlEngine`` objects for a hixl one
(an engine has no cluster id; the fabric knows which process opened it)."""


def enter_copy(dst_cluster: object, src_cluster: object) -> Parties:
    """Name ``(destination, source)`` clusters (or hixl engines) of the copies this thread runs next;
    returns what was named before, for ``leave_copy`` (plain calls, not a context manager: a small pull
    runs this each time)."""
    before: Parties = getattr(_parties, "value", None)
    _parties.value = (dst_cluster, src_cluster)
    return before


def leave_copy(before: Parties) -> None:
    _parties.value = before


def copy_parties() -> Parties:
    """``(destination, source)`` clusters (or hixl engines) of the transfer this thread is running, or
    None."""
    found: Parties = getattr(_parties, "value", None)
    return found
