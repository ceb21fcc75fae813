"""``transfer_cache_async`` of both managers: the real argument checks, then a worker thread that sends
layer by layer after ``LayerSynchronizer.synchronize_layer`` (real ``llm_utils.TransferCacheJob``).

As in real, results are keyed by destination cluster (two configs to one cluster share a result), a
failed ``synchronize_layer`` marks every config of that layer ``LLM_PARAM_INVALID`` and stops, and the
first failed layer of a config stops the whole job.

The two packages' jobs differ where the v2 package moved on (hixl ``llm_utils.py`` at ``49b96c60``,
``TransferCacheJob.transfer_layers`` and ``TransferAsyncThread.run``; pinned by its
``tests/python/test_transfer_layer_range.py``):

- v2 (``CacheManager``): a config's destination layer is relative to its source range: source layer
  ``s`` goes to ``dst_layer_range[s - src_layer_range.start]``; and a worker that fails with an
  exception reports the task's default code (``LLM_TIMEOUT``) for every config, from both
  ``synchronize`` and ``get_results``.
- v1 (``KvCacheManager``, hicann/ge ``api/python/llm_datadist_v1/llm_utils.py:274-288,402-410``, older):
  the destination range is indexed by the absolute source layer, and a failed worker dies quietly, its
  configs left ``None`` (which ``synchronize`` passes over). A v1 ``TransferConfig`` has no destination
  range of its own, so only a range set on it by hand meets that indexing.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Dict, List, Optional, Sequence, Union

from datadist_sim._status import LLMStatusCode
from datadist_sim._world import door
from datadist_sim._world.door import ClusterNode, SimError, SimWorld
from datadist_sim.llm_datadist.status import raise_if_false
from datadist_sim.llm_datadist.utils.utils import check_isinstance, check_uint64
from datadist_sim.llm_datadist.v2.llm_types import (
    BlocksCacheKey,
    CacheKeyByIdAndIndex,
    CacheTask,
    LayerSynchronizer,
    TransferConfig,
    TransferWithCacheKeyConfig,
)
from datadist_sim.llm_datadist.v2.llm_utils import (
    check_block_indices,
    pack_block_cache_key,
    pack_cache_key_by_id,
)

_PER_LAYER = 2
_log = logging.getLogger("datadist_sim.llm_datadist")
AnyConfig = Union[TransferConfig, TransferWithCacheKeyConfig]


def start_transfer(
    world: SimWorld,
    node: ClusterNode,
    src_cache: Any,
    layer_synchronizer: LayerSynchronizer,
    transfer_configs: Sequence[AnyConfig],
    src_block_indices: Optional[Sequence[int]],
    dst_block_indices: Optional[Sequence[int]],
    dst_block_memory_size: Optional[int],
    *,
    default_error_code: LLMStatusCode,
    enable_remote_cache: bool = False,
    v2_job: bool = False,
) -> CacheTask:
    """Check the arguments as the package does and start the job; ``v2_job`` picks the v2 package's
    rules for layer indices and a failed worker (see the module's docstring)."""
    check_block_indices("dst_block_indices", dst_block_indices)
    check_block_indices("src_block_indices", src_block_indices)
    if dst_block_memory_size is not None:
        check_uint64("dst_block_memory_size", dst_block_memory_size)
    if src_block_indices:
        raise_if_false(dst_block_indices, "transfer from blocks to cache is not supported")
        assert dst_block_indices is not None
        raise_if_false(
            len(src_block_indices) == len(dst_block_indices),
            "num_block_indices mismatches, src_num = {0}, dst_num = {1}",
            len(src_block_indices),
            len(dst_block_indices),
        )
    elif dst_block_indices:
        raise_if_false(
            dst_block_memory_size is not None,
            "dst_block_memory_size must be set when transfer from cache to blocks",
        )
    check_isinstance("layer_synchronizer", layer_synchronizer, LayerSynchronizer, allow_none=False)
    if not enable_remote_cache:
        check_isinstance(
            "transfer_configs", transfer_configs, [list, tuple], TransferConfig, allow_none=False
        )
    else:
        check_isinstance(
            "transfer_configs",
            transfer_configs,
            [list, tuple],
            TransferWithCacheKeyConfig,
            "While enable_remote_cache_accessible is True, ",
            allow_none=False,
        )
    raise_if_false(
        dst_block_indices or dst_block_memory_size in (None, 0),
        "dst_block_memory_size ({0}) is neither None nor 0 while dst is not blocks",
        dst_block_memory_size,
    )
    desc = src_cache.cache_desc
    raise_if_false(desc.num_tensors % 2 == 0, "cache_desc.num_tensors ({0}) is not even", desc.num_tensors)
    num_layers = desc.num_tensors // 2
    for config in transfer_configs:
        if config.src_layer_range is None:
            config.src_layer_range = range(0, num_layers)
        layers = config.src_layer_range
        if src_block_indices:
            raise_if_false(
                config.src_batch_index == 0,
                "Invalid TransferConfig, src_batch_index ({0}) != 0 while src is blocks",
                config.src_batch_index,
            )
        raise_if_false(
            0 <= layers.start < layers.stop <= num_layers,
            "src_layer_range: {0} out of range, src_layer_num = {1}",
            layers,
            num_layers,
        )
        if isinstance(config, TransferConfig):
            expected = (layers.stop - layers.start) * _PER_LAYER
            raise_if_false(
                len(config.dst_addrs) == expected,
                "expect {0} dst_addrs, but len(dst_addrs) = {1}, range = {2}",
                expected,
                len(config.dst_addrs),
                layers,
            )
    job = _Job(
        world,
        node,
        src_cache.cache_id,
        num_layers,
        layer_synchronizer,
        list(transfer_configs),
        list(src_block_indices or []),
        list(dst_block_indices or []),
        dst_block_memory_size or 0,
        default_error_code if v2_job else None,
    )
    results: List[Optional[LLMStatusCode]] = [None] * len(transfer_configs)
    worker = threading.Thread(target=job.run, args=(results,), name="datadist-sim-transfer", daemon=True)
    worker.start()
    task = CacheTask(worker, results, default_error_code)
    task._world, task._node = world, node  # traced like every public call
    return task


class _Job:
    def __init__(
        self,
        world: SimWorld,
        node: ClusterNode,
        cache_id: int,
        num_layers: int,
        synchronizer: LayerSynchronizer,
        configs: List[AnyConfig],
        src_blocks: List[int],
        dst_blocks: List[int],
        dst_block_size: int,
        failure_code: Optional[LLMStatusCode],
    ) -> None:
        self.world = world
        self.node = node
        self.cache_id = cache_id
        self.num_layers = num_layers
        self.synchronizer = synchronizer
        self.configs = configs
        self.src_blocks = src_blocks
        self.dst_blocks = dst_blocks
        self.dst_block_size = dst_block_size
        self.failure_code = failure_code
        """v2: what every config reports when the worker fails with an exception; v1: None (the
        configs keep what they had, unfinished ones ``None``)."""
        self.rets: Dict[int, LLMStatusCode] = {}

    def run(self, results: List[Optional[LLMStatusCode]]) -> None:
        failed = False
        try:
            self._layers()
        except Exception:
            failed = True
            _log.exception("[transfer_cache_async] transfer thread failed")
        finally:
            for i, config in enumerate(self.configs):
                results[i] = (
                    self.failure_code
                    if failed and self.failure_code is not None
                    else self.rets.get(config.dst_cluster_id)
                )

    def _layers(self) -> None:
        relative = self.failure_code is not None  # the v2 job (module docstring)
        for layer in range(self.num_layers):
            todo = [c for c in self.configs if c.src_layer_range is not None and layer in c.src_layer_range]
            if not todo:
                continue
            if not self.synchronizer.synchronize_layer(layer, None):
                for config in todo:
                    self.rets[config.dst_cluster_id] = LLMStatusCode.LLM_PARAM_INVALID
                return
            for config in todo:
                dst_layer = self._dst_layer(layer, config, relative)
                ret = self._layer(layer, dst_layer, config)
                if ret is not LLMStatusCode.LLM_SUCCESS:
                    self.rets[config.dst_cluster_id] = ret
                    return
                assert config.src_layer_range is not None
                if layer == config.src_layer_range.stop - 1:
                    self.rets[config.dst_cluster_id] = LLMStatusCode.LLM_SUCCESS

    @staticmethod
    def _dst_layer(layer: int, config: AnyConfig, relative: bool) -> int:
        """The destination layer of source layer ``layer`` (an ``IndexError`` past the range's end fails
        the worker, as in real)."""
        dst_range = config.dst_layer_range
        if dst_range is None:
            return layer
        if relative:
            assert config.src_layer_range is not None
            return dst_range[layer - config.src_layer_range.start]
        return list(dst_range)[layer]

    def _layer(self, layer: int, dst_layer: int, config: AnyConfig) -> LLMStatusCode:
        src_idx = [layer * _PER_LAYER + i for i in range(_PER_LAYER)]
        try:
            if isinstance(config, TransferConfig):
                assert config.src_layer_range is not None
                k = layer - config.src_layer_range.start
                addrs = list(config.dst_addrs)[k * _PER_LAYER : (k + 1) * _PER_LAYER]
                request = door.AddrPushRequest(
                    config.dst_cluster_id,
                    self.cache_id,
                    config.src_batch_index,
                    src_idx,
                    addrs,
                    self.src_blocks,
                    self.dst_blocks,
                    self.dst_block_size,
                )
                door.push_to_addrs(self.world, self.node, request)
            else:
                key = config.cache_key
                dst_idx = [dst_layer * _PER_LAYER + i for i in range(_PER_LAYER)]
                params = door.PullParams(
                    -1, 0, self.src_blocks, self.dst_blocks, src_idx, dst_idx, -1, -1, _PER_LAYER
                )
                if isinstance(key, BlocksCacheKey):
                    push = door.PushRequest(self.cache_id, 0, pack_block_cache_key(key), params, "transfer")
                elif isinstance(key, CacheKeyByIdAndIndex):
                    packed = pack_cache_key_by_id(key)
                    push = door.PushRequest(self.cache_id, config.src_batch_index, packed, params, "transfer")
                else:
                    return LLMStatusCode.LLM_PARAM_INVALID
                door.push(self.world, self.node, push)
        except SimError as exc:
            return exc.code
        return LLMStatusCode.LLM_SUCCESS
