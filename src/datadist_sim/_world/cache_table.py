"""The peer's cache table as one side of a link reads it when remote cache access is on.

With ``llm.EnableRemoteCacheAccessible`` the engine moves bytes one-sidedly: a pull reads the peer's
memory (``PullCacheByGet``, hixl ``data_cache_engine.cc:153-155``) and a push writes it
(``layer_wise_transfer_job.cc:248-253``), with no message to the peer's engine. Where the bytes are is
found in the peer's cache access table, which each instance publishes in device memory on every change
of its caches or keys (``cache_manager.cc:146,159,204,340,347,407`` -> ``UpdateCacheTable``,
``:573-580``; versions from 1, ``cache_access_table.cc:152``). Each link end keeps its own copy
(``comm_entity.cc:275``; hixl backend ``hixl_entity.cc:24-25``) and reads the peer's table into it only
while its version is 0, that is at the first lookup on the link (``cache_access_table.cc:290-294``), and
never again: a cache the peer registers later is not found (``LLM_KV_CACHE_NOT_EXIST``,
``:296-308``) until the link is made again, which makes a new copy.

The copy holds each cache's addresses without owning them (``cache_access_table.cc:67-81``), so a cache
the peer frees after the copy is still found. What the transfer then meets: pool memory stays registered
with the transport for the instance's life (``data_cache_engine.cc:295-296,322-323``), so the transfer
goes to those addresses as they are now (another cache's bytes, if the pool gave them out again); the
simulator has no bytes for pool memory no cache holds and refuses such a transfer with
``LLM_PARAM_INVALID`` where the hardware would read stale bytes. Registered memory leaves the transport
when unregistered (``data_cache_engine.cc:123``, ``comm_mem_manager.cc:106-``): the simulator refuses a
transfer to or from it with ``LLM_PARAM_INVALID`` (inferred: which code HCCL or hixl gives for memory it
no longer knows is not in the open source).

A link end that did not turn remote cache access on reads its peer's live table (the peer's engine
serves each pull, ``fsm/send_state.cc``), as ``NodeCaches.lookup`` does.
"""

from __future__ import annotations

from typing import Dict, Tuple

from datadist_sim._status import LLMStatusCode
from datadist_sim._world.caches import INVALID_ID, CacheEntry, NodeCaches, find_in
from datadist_sim._world.cluster import PeerLink
from datadist_sim._world.errors import SimError
from datadist_sim._world.keys import EngineKey, PackedKey, engine_key

_P = LLMStatusCode.LLM_PARAM_INVALID
_NOT_EXIST = LLMStatusCode.LLM_KV_CACHE_NOT_EXIST


class CacheTable:
    """A copy of a peer's published table: its caches by id and its key table, as they were when read.
    ``final`` is False while the peer had published nothing (version 0): the next lookup reads again."""

    __slots__ = ("caches", "final", "key_table")

    def __init__(self, store: NodeCaches) -> None:
        self.caches: Dict[int, CacheEntry] = dict(store.caches)
        # only request and blocks keys are published, not prefix keys (``cache_manager.cc:578``)
        self.key_table: Dict[EngineKey, Tuple[int, int]] = {
            ek: found for ek, found in store.key_table.items() if ek[0] != "prefix"
        }
        self.final = store.published

    def lookup(self, key: PackedKey) -> Tuple[CacheEntry, int]:
        """``(cache, batch index)`` a pull names, as ``NodeCaches.lookup`` finds it in a live table;
        nothing is consumed (the peer's engine takes no part in a one-sided read)."""
        _, cache_id, batch_index, req_id, prefix_id, _, is_blocks = key
        by_id = not (is_blocks or 0 <= prefix_id < INVALID_ID or 0 <= req_id < INVALID_ID)
        ek = None if by_id else engine_key(key)
        if ek is None:
            entry = self.caches.get(cache_id)
            if entry is None:
                raise SimError(_NOT_EXIST, f"remote cache {cache_id} is not in the table read at link")
            if not entry.is_blocks and batch_index >= entry.batch_size:
                raise SimError(
                    _NOT_EXIST, f"batch_index {batch_index} >= batch size {entry.batch_size} of {cache_id}"
                )
            return entry, batch_index
        found = self.key_table.get(ek)
        if found is None:
            raise SimError(_NOT_EXIST, f"remote cache key {ek} is not in the table read at link")
        return self.caches[found[0]], found[1]

    def find_entry(self, key: PackedKey) -> Tuple[CacheEntry, int]:
        """``(cache, batch index)`` a push names (``NodeCaches.find_entry``'s rule) in this copy."""
        return find_in(self.caches, self.key_table, key)


def table_of(peer: PeerLink, store: NodeCaches) -> CacheTable:
    """The copy of ``store``'s table this link end reads from, made at its first lookup (under the
    peer store's lock)."""
    table = peer.table
    if isinstance(table, CacheTable) and table.final:
        return table
    fresh = CacheTable(store)
    peer.table = fresh
    return fresh


def check_accessible(entry: CacheEntry, side: str) -> None:
    """A one-sided transfer needs both caches registered with the transport: ``LLM_PARAM_INVALID``
    otherwise (pull: ``data_transfer_client.cc:232-235``; push: ``layer_wise_transfer_job.cc:217,249``)."""
    if not entry.remote_accessible:
        raise SimError(_P, f"{side} cache {entry.cache_id} is not remote accessible")


def check_reachable(store: NodeCaches, entry: CacheEntry) -> None:
    """A cache of the copy that the peer has since unregistered is memory the transport no longer
    knows (the module's doc); pool memory stays reachable, and the address space says what is there."""
    if entry.registered and store.caches.get(entry.cache_id) is not entry:
        raise SimError(
            _P,
            f"remote cache {entry.cache_id} was unregistered after this link read the peer's table; "
            "its memory is no longer registered with the transport",
        )
