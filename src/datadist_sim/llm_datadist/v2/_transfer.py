"""Layer-wise transfer descriptions and the async task handle; re-exported by ``llm_types``."""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, List, Optional, Sequence, Union

from datadist_sim.llm_datadist._engine import api_call
from datadist_sim.llm_datadist.status import LLMStatusCode, raise_if_false, raise_if_true
from datadist_sim.llm_datadist.utils.utils import (
    check_isinstance,
    check_list_uint64,
    check_uint32,
    check_uint64,
)
from datadist_sim.llm_datadist.v2._keys import BlocksCacheKey, CacheKeyByIdAndIndex

if TYPE_CHECKING:
    from datadist_sim._world.door import ClusterNode, SimWorld

TransferKey = Union[BlocksCacheKey, CacheKeyByIdAndIndex]


class LayerSynchronizer(ABC):
    """User hook: ``transfer_cache_async`` calls it before sending each layer."""

    @abstractmethod
    def synchronize_layer(self, layer_index: int, timeout_in_millis: Optional[int]) -> bool:
        """Block until ``layer_index`` has been computed; False fails the configs sending that layer."""


def check_layer_range(name: str, layer_range: Optional[range], allow_none: bool = True) -> None:
    """A contiguous, non-empty, non-negative ``range`` (``TypeError`` for a non-range, else LLMException)."""
    if allow_none and layer_range is None:
        return
    check_isinstance(name, layer_range, range, allow_none=allow_none)
    assert layer_range is not None  # for the type checker; allow_none=False made None a TypeError above
    raise_if_false(layer_range.step == 1, f"check {name}.step == 1 failed")
    raise_if_false(
        0 <= layer_range.start < layer_range.stop,
        "check 0 <= range.start < range.stop failed, {0} = {1}",
        name,
        layer_range,
    )


class TransferWithCacheKeyConfig:
    """One destination of ``transfer_cache_async`` when remote-cache-accessible mode is on.

    Both layer ranges are required at construction (their setters later accept ``None``).
    """

    def __init__(
        self,
        cache_key: TransferKey,
        src_layer_range: range,
        dst_layer_range: range,
        src_batch_index: int = 0,
    ) -> None:
        check_isinstance("cache_key", cache_key, [BlocksCacheKey, CacheKeyByIdAndIndex], allow_none=False)
        self._cache_key: Optional[TransferKey] = cache_key
        check_layer_range("src_layer_range", src_layer_range, allow_none=False)
        self._src_layer_range: Optional[range] = src_layer_range
        check_layer_range("dst_layer_range", dst_layer_range, allow_none=False)
        self._dst_layer_range: Optional[range] = dst_layer_range
        raise_if_false(
            (src_layer_range.stop - src_layer_range.start) == (dst_layer_range.stop - dst_layer_range.start),
            "src_layer_range size should be equal to dst_layer_range size",
        )
        check_uint32("src_batch_index", src_batch_index)
        raise_if_true(
            isinstance(cache_key, BlocksCacheKey) and src_batch_index != 0,
            "src_batch_index should be 0 when cache_key is BlocksCacheKey.",
        )
        self._src_batch_index = src_batch_index
        self.dst_cluster_id = cache_key.cluster_id  # a plain attribute in real, not refreshed by the setter

    def __repr__(self) -> str:
        return (
            f"TransferWithCacheKeyConfig(cache_key={self._cache_key},"
            f" src_layer_range={self._src_layer_range},"
            f" dst_layer_range={self._dst_layer_range},"
            f" src_batch_index={self._src_batch_index})"
        )

    @property
    def cache_key(self) -> Optional[TransferKey]:
        return self._cache_key

    @cache_key.setter
    def cache_key(self, cache_key: Optional[TransferKey]) -> None:
        check_isinstance("cache_key", cache_key, [BlocksCacheKey, CacheKeyByIdAndIndex])
        self._cache_key = cache_key

    @property
    def src_layer_range(self) -> Optional[range]:
        return self._src_layer_range

    @src_layer_range.setter
    def src_layer_range(self, src_layer_range: Optional[range]) -> None:
        check_layer_range("src_layer_range", src_layer_range)
        self._src_layer_range = src_layer_range

    @property
    def dst_layer_range(self) -> Optional[range]:
        return self._dst_layer_range

    @dst_layer_range.setter
    def dst_layer_range(self, dst_layer_range: Optional[range]) -> None:
        check_layer_range("dst_layer_range", dst_layer_range)
        self._dst_layer_range = dst_layer_range

    @property
    def src_batch_index(self) -> int:
        return self._src_batch_index

    @src_batch_index.setter
    def src_batch_index(self, src_batch_index: int) -> None:
        # The BlocksCacheKey rule runs before the uint32 check here (the constructor does the opposite).
        raise_if_true(
            isinstance(self._cache_key, BlocksCacheKey) and src_batch_index != 0,
            "src_batch_index should be 0 when cache_key is BlocksCacheKey.",
        )
        check_uint32("src_batch_index", src_batch_index)
        self._src_batch_index = src_batch_index


class TransferConfig:
    """One destination of ``transfer_cache_async``: raw addresses, two tensors per layer."""

    def __init__(
        self,
        dst_cluster_id: int,
        dst_addrs: Union[List[int], Sequence[int]],
        src_layer_range: Optional[range] = None,
        src_batch_index: int = 0,
    ) -> None:
        self._check_dst_cluster_id(dst_cluster_id)
        self._check_dst_addrs(dst_addrs)
        check_layer_range("src_layer_range", src_layer_range)
        check_uint32("src_batch_index", src_batch_index)
        self._dst_cluster_id = dst_cluster_id
        self._dst_addrs = dst_addrs
        self._src_layer_range = src_layer_range
        self._src_batch_index = src_batch_index
        self.dst_layer_range: Optional[range] = None

    def __repr__(self) -> str:
        return (
            f"TransferConfig(dst_cluster_id={self._dst_cluster_id}, dst_addrs={self._dst_addrs},"
            f" src_layer_range={self._src_layer_range}, src_batch_index={self._src_batch_index})"
        )

    def __str__(self) -> str:
        return self.__repr__()

    @staticmethod
    def _check_dst_cluster_id(dst_cluster_id: int) -> None:
        check_uint64("dst_cluster_id", dst_cluster_id)

    @staticmethod
    def _check_dst_addrs(dst_addrs: Sequence[int]) -> None:
        check_isinstance("dst_addrs", dst_addrs, [list, tuple], int, allow_none=False)
        check_list_uint64("dst_addrs", dst_addrs)

    @property
    def dst_cluster_id(self) -> int:
        return self._dst_cluster_id

    @dst_cluster_id.setter
    def dst_cluster_id(self, cluster_id: int) -> None:
        self._check_dst_cluster_id(cluster_id)
        self._dst_cluster_id = cluster_id

    @property
    def dst_addrs(self) -> Sequence[int]:
        return self._dst_addrs

    @dst_addrs.setter
    def dst_addrs(self, dst_addrs: Sequence[int]) -> None:
        self._check_dst_addrs(dst_addrs)
        self._dst_addrs = dst_addrs

    @property
    def src_layer_range(self) -> Optional[range]:
        return self._src_layer_range

    @src_layer_range.setter
    def src_layer_range(self, layer_range: Optional[range]) -> None:
        check_layer_range("src_layer_range", layer_range)
        self._src_layer_range = layer_range

    @property
    def src_batch_index(self) -> int:
        return self._src_batch_index

    @src_batch_index.setter
    def src_batch_index(self, batch_index: int) -> None:
        check_uint32("src_batch_index", batch_index)
        self._src_batch_index = batch_index


def _timeout_seconds(timeout_in_millis: Optional[int]) -> Optional[float]:
    if timeout_in_millis is None:
        return None
    check_uint32("timeout_in_millis", timeout_in_millis)
    return timeout_in_millis / 1000


class CacheTask:
    """Handle of an asynchronous transfer running on ``worker``.

    ``results`` holds one entry per transfer config and is filled in by the worker; an entry stays ``None``
    when that config never started. ``worker=None`` means the work already finished. While the worker is
    still running when a wait times out, every answer is ``default_error_code`` (``LLM_TIMEOUT`` in
    CacheManager mode, ``LLM_WAIT_PROCESS_TIMEOUT`` in KvCacheManager mode).

    ``_world``/``_node`` (set by the manager that started the task) put ``synchronize`` and
    ``get_results`` in the trace like every other public call: the codes they return reach the client.
    """

    _world: Optional[SimWorld] = None
    _node: Optional[ClusterNode] = None

    def __init__(
        self,
        worker: Optional[threading.Thread],
        results: List[Optional[LLMStatusCode]],
        default_error_code: LLMStatusCode = LLMStatusCode.LLM_TIMEOUT,
    ) -> None:
        self._worker = worker
        self._results = results
        self._default_error_code = default_error_code

    def _wait(self, timeout_in_millis: Optional[int]) -> bool:
        """Join the worker; True when it has finished."""
        timeout = _timeout_seconds(timeout_in_millis)
        if self._worker is None:
            return True
        self._worker.join(timeout)
        return not self._worker.is_alive()

    @api_call
    def synchronize(self, timeout_in_millis: Optional[int] = None) -> LLMStatusCode:
        """The first failure among the results, else ``LLM_SUCCESS``; unstarted (``None``) entries pass."""
        if not self._wait(timeout_in_millis):
            return self._default_error_code
        for ret in self._results:
            if ret is not None and ret != LLMStatusCode.LLM_SUCCESS:
                return ret
        return LLMStatusCode.LLM_SUCCESS

    @api_call
    def get_results(self, timeout_in_millis: Optional[int] = None) -> List[Optional[LLMStatusCode]]:
        if not self._wait(timeout_in_millis):
            return [self._default_error_code] * len(self._results)
        return list(self._results)
