"""Cache keys; re-exported by ``llm_types`` (where the real package defines them).

None of the real key classes defines ``__eq__``/``__hash__``, so two keys with equal fields are different
dict/set entries there. We keep that identity semantics on purpose: a client that dedups keys by value would
behave differently against the real package, and the simulator should expose that, not hide it. Engine-side
bookkeeping keys by field tuples instead (see ``llm_utils.pack_cache_key`` and friends).
"""

from __future__ import annotations

from typing import Any, Dict

from datadist_sim.llm_datadist.status import raise_if_false
from datadist_sim.llm_datadist.utils.utils import (
    UINT64_MAX,
    check_int64,
    check_isinstance,
    check_uint32,
    check_uint64,
)

_INVALID_ID = UINT64_MAX


def _bind(
    args: tuple[Any, ...], kwargs: Dict[str, Any], positional: tuple[str, ...], required: tuple[str, ...]
) -> Dict[str, Any]:
    """Fold positionals into ``kwargs`` and run the real checks in the real order.

    A positional silently wins over a keyword of the same name, as in the real constructors.
    """
    raise_if_false(len(args) + len(kwargs) <= len(positional), "Param num is over limit")
    for name, value in zip(positional, args):
        kwargs[name] = value
    raise_if_false(
        "prompt_cluster_id" in kwargs or "cluster_id" in kwargs,
        "Param prompt_cluster_id or cluster_id is required",
    )
    for name in required:
        raise_if_false(name in kwargs, f"Param {name} is required")
    valid = ("prompt_cluster_id", *positional)
    for key in kwargs:
        raise_if_false(key in valid, "Unsupported param:{}", key)
    return kwargs


class CacheKey:
    """Indexes one batch of a cache: ``(cluster_id, req_id, model_id=0, prefix_id=UINT64_MAX)``.

    ``req_id == UINT64_MAX`` marks a placeholder batch. ``cluster_id`` (alias ``prompt_cluster_id``) is
    ignored when allocating and selects the peer when pulling.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kw = _bind(args, kwargs, ("cluster_id", "req_id", "model_id", "prefix_id"), ("req_id",))
        self._cluster_id: int = kw["cluster_id"] if "cluster_id" in kw else kw["prompt_cluster_id"]
        self._req_id: int = kw["req_id"]
        self._model_id: int = kw.get("model_id", 0)
        self._prefix_id: int = kw.get("prefix_id", _INVALID_ID)
        check_uint64("cluster_id", self._cluster_id)
        check_uint64("req_id", self._req_id)
        check_uint64("model_id", self._model_id)
        check_uint64("prefix_id", self._prefix_id)

    @property
    def prompt_cluster_id(self) -> int:
        return self._cluster_id

    @property
    def cluster_id(self) -> int:
        return self._cluster_id

    @property
    def req_id(self) -> int:
        return self._req_id

    @property
    def prefix_id(self) -> int:
        return self._prefix_id

    @property
    def model_id(self) -> int:
        return self._model_id

    def __repr__(self) -> str:
        return (
            f"CacheKey(cluster_id={self._cluster_id}, req_id={self._req_id}, "
            f"prefix_id={self._prefix_id}, model_id={self._model_id})"
        )


class CacheKeyByIdAndIndex:
    """Addresses a remote cache by the ``cache_id`` its owner reported out of band, plus a batch index."""

    def __init__(self, cluster_id: int, cache_id: int, batch_index: int = 0) -> None:
        check_uint64("cluster_id", cluster_id)
        check_int64("cache_id", cache_id)
        check_uint32("batch_index", batch_index)
        self._prompt_cluster_id = cluster_id
        self._prompt_cache_id = cache_id
        self._prompt_batch_index = batch_index
        self._req_id = _INVALID_ID  # the engine packs this key with an invalid req id

    @property
    def cluster_id(self) -> int:
        return self._prompt_cluster_id

    @property
    def cache_id(self) -> int:
        return self._prompt_cache_id

    @property
    def batch_index(self) -> int:
        return self._prompt_batch_index

    def __repr__(self) -> str:
        return (
            f"CacheKeyByIdAndIndex(cluster_id={self._prompt_cluster_id}, "
            f"cache_id={self._prompt_cache_id}, batch_index={self._prompt_batch_index})"
        )


class BlocksCacheKey:
    """Indexes a blocks cache by ``model_id``; ``cluster_id`` selects the peer when pulling or pushing.

    Only the Python type is checked (no range check), and ``None`` passes, as in the real class. The repr
    echoes whichever keyword spelling the caller used.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kw = _bind(args, kwargs, ("cluster_id", "model_id"), ())
        self._cluster_id_key = "cluster_id" if "cluster_id" in kw else "prompt_cluster_id"
        self._cluster_id: int = kw[self._cluster_id_key]
        self._model_id: int = kw.get("model_id", 0)
        check_isinstance("cluster_id", self._cluster_id, int, extra_fmt="The first param ")
        check_isinstance("model_id", self._model_id, int, extra_fmt="The second param ")

    @property
    def prompt_cluster_id(self) -> int:
        return self._cluster_id

    @property
    def cluster_id(self) -> int:
        return self._cluster_id

    @property
    def model_id(self) -> int:
        return self._model_id

    def __repr__(self) -> str:
        return f"BlocksCacheKey({self._cluster_id_key}={self._cluster_id}, model_id={self._model_id})"
