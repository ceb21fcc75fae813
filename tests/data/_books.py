"""What a failed call must leave as it was: every instance's books and the bytes of given caches."""

from __future__ import annotations

from typing import Any, List, Tuple

import numpy as np

import datadist_sim
from datadist_sim._world.world import SimWorld


def books(world: SimWorld) -> List[Tuple[Any, ...]]:
    """Per live instance: bound keys, caches (id, released), pool use and registered-memory counts."""
    snapshot: List[Tuple[Any, ...]] = []
    for cluster_id, store in sorted(world.caches.items()):
        pools = tuple(None if pool is None else pool.used for pool in (store.device_pool, store.host_pool))
        ledger = (store.ledger.address_count, store.ledger.device_bytes, store.ledger.host_bytes)
        snapshot.append(
            (
                cluster_id,
                sorted(store.key_table.items()),
                sorted((cid, entry.released) for cid, entry in store.caches.items()),
                pools,
                ledger,
            )
        )
    return snapshot


def contents(*caches: object) -> List[bytes]:
    """The bytes of every tensor of ``caches`` (``Cache``/``KvCache`` handles), in order."""
    return [np.ascontiguousarray(v).tobytes() for c in caches for v in datadist_sim.tensor_views(c)]  # type: ignore[arg-type]


def fill(cache: object, seed: int) -> None:
    """Random bytes into every tensor of ``cache``."""
    rng = np.random.default_rng(seed)
    for view in datadist_sim.tensor_views(cache):  # type: ignore[arg-type]
        raw = view.view(np.uint8)
        raw[...] = rng.integers(0, 256, raw.shape, dtype=np.uint8)
