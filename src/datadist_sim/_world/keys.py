"""Cache keys as the engines index them, and the checks one allocate/register call's keys go through.

Keys arrive packed as ``Key`` (the face's ``pack_*`` helpers build them). The engine indexes a key
by ``(req_id, model_id)``, by ``(prefix_id, model_id)`` in a separate table when ``prefix_id`` is valid,
or by ``model_id`` for a blocks key (``(UINT64_MAX, model_id)`` in the request table); ``cluster_id`` only
routes a pull or push to its peer and is no part of a key. The facts, with file and line:
``docs/vendor_facts.md``, "Keys and memory ownership".
"""

from __future__ import annotations

from typing import Dict, List, Mapping, NamedTuple, Optional, Sequence, Set, Tuple

from datadist_sim._status import LLMStatusCode
from datadist_sim._world.errors import SimError

INVALID_ID = 2**64 - 1


class Key(NamedTuple):
    """A cache key as the engine receives it: what the face's ``pack_*`` helpers make of a ``CacheKey``,
    ``CacheKeyByIdAndIndex`` or ``BlocksCacheKey``. Unused ids are ``INVALID_ID`` (``cache_id`` -1)."""

    cluster_id: int
    cache_id: int
    batch_index: int
    req_id: int
    prefix_id: int
    model_id: int
    is_blocks: bool


PackedKey = Key
EngineKey = Tuple[str, int, int]
Bound = List[Tuple[EngineKey, int]]
"""``(engine key, batch index)`` of every key a call binds."""
Table = Mapping[EngineKey, Tuple[int, int]]
_P = LLMStatusCode.LLM_PARAM_INVALID


def valid_id(ident: int) -> bool:
    return 0 <= ident < INVALID_ID


def engine_key(key: PackedKey) -> Optional[EngineKey]:
    """The table key of a packed ``CacheKey``/``BlocksCacheKey``; ``None`` for a placeholder."""
    _, _, _, req_id, prefix_id, model_id, is_blocks = key
    if is_blocks:
        return blocks_slot(model_id)
    if 0 <= prefix_id < INVALID_ID:  # ``valid_id``, written out: every pull asks
        return ("prefix", prefix_id, model_id)
    if 0 <= req_id < INVALID_ID:
        return ("req", req_id, model_id)
    return None


def key_ident(key: PackedKey) -> Tuple[int, int]:
    """The engine's ``DataCacheKey`` of a packed key: ``(prefix_id if valid else req_id, model_id)``
    (hixl ``cache_manager.cc:317-321``); a placeholder or a blocks key has ``UINT64_MAX`` as its id."""
    _, _, _, req_id, prefix_id, model_id, _ = key
    return (prefix_id if valid_id(prefix_id) else req_id, model_id)


def blocks_slot(model_id: int) -> EngineKey:
    """The table slot of a blocks key of ``model_id``: ``(UINT64_MAX, model_id)`` in the request table,
    which is also what a placeholder of that model names (hixl ``cache_manager.cc:264-265``)."""
    return ("blocks", 0, model_id)


def _bound_code(ek: EngineKey, default: LLMStatusCode, legacy_codes: bool) -> LLMStatusCode:
    """A key already bound: ``default``, or ``LLM_PREFIX_ALREADY_EXIST`` for a prefix under legacy codes."""
    return LLMStatusCode.LLM_PREFIX_ALREADY_EXIST if legacy_codes and ek[0] == "prefix" else default


def bind_v2(table: Table, keys: Sequence[PackedKey], batch_size: int, *, legacy_codes: bool) -> Bound:
    """``CacheManager::CheckCacheKeys`` (hixl ``cache_manager.cc:240-257``): no more keys than batches;
    a key already bound is ``LLM_PARAM_INVALID``; one set of ``(prefix_id or req_id, model_id)`` per call,
    shared by request and prefix keys and placeholders, so any repeat is ``LLM_PARAM_INVALID``."""
    if len(keys) > batch_size:
        raise SimError(_P, f"{len(keys)} cache keys exceed batch size {batch_size}")
    seen: Set[Tuple[int, int]] = set()
    bound: Bound = []
    for index, key in enumerate(keys):
        ident = key_ident(key)
        ek = engine_key(key)
        held = ek if ek is not None else blocks_slot(ident[1])
        if held in table:
            code = _bound_code(held, _P, legacy_codes)
            raise SimError(code, f"cache key {ident} is already bound to cache {table[held][0]}")
        if ident in seen:
            raise SimError(
                _P,
                f"identical cache_keys {ident} (id, model_id) occurred in one call "
                "(the cluster id is no part of the key)",
            )
        seen.add(ident)
        if ek is not None:
            bound.append((ek, index))
    return bound


def bind_v1(table: Table, keys: Sequence[PackedKey], batch_size: int, *, legacy_codes: bool) -> Bound:
    """The v1 engine (GE ``llm_flow_service.cc:568-577``, flow function ``cache_manager.cpp:90-113,
    497-515``): every key takes the *first* key's model id, the *last* key decides whether all go to the
    prefix or the request table, repeats are not refused (a repeated id is bound once, at the last batch
    index naming it), and a key already bound is ``LLM_CACHE_KEY_ALREADY_EXIST``, which leaves the engine
    as ``LLM_FAILED`` (``llm_common.cc:18-49``). More keys than batches stays ``LLM_PARAM_INVALID`` (a
    deliberate difference: the flow function would bind a batch past the tensor)."""
    if len(keys) > batch_size:
        raise SimError(_P, f"{len(keys)} cache keys exceed batch size {batch_size}")
    if not keys:
        return []
    model_id = keys[0][5]
    kind = "prefix" if valid_id(keys[-1][4]) else "req"
    chosen: Dict[EngineKey, int] = {}
    for index, key in enumerate(keys):
        ident = key_ident(key)[0]
        ek: EngineKey = (kind, ident, model_id)
        held = blocks_slot(model_id) if (kind == "req" and not valid_id(ident)) else ek
        if held in table:
            code = _bound_code(held, LLMStatusCode.LLM_FAILED, legacy_codes)
            raise SimError(code, f"cache key {(ident, model_id)} is already mapped to cache {table[held][0]}")
        if valid_id(ident):
            chosen.pop(ek, None)
            chosen[ek] = index
    return list(chosen.items())


def bind_blocks(table: Table, keys: Sequence[PackedKey], *, v2: bool) -> Bound:
    """A blocks key: ``(UINT64_MAX, model_id)`` in the request table; bound already is
    ``LLM_PARAM_INVALID`` in v2 and ``LLM_FAILED`` in v1 (as for the other keys)."""
    code = _P if v2 else LLMStatusCode.LLM_FAILED
    bound: Bound = []
    for key in keys:
        ek = engine_key(key)
        if ek is not None:
            if ek in table:
                raise SimError(code, f"blocks cache key {ek} is already bound")
            bound.append((ek, 0))
    return bound
