"""The engine's layer-wise transfer rules: layers must divide a cache, a push with no destination blocks is
cache-to-cache on the engine's geometry (a blocks cache is one batch of one block), and a key by id with
``cache_id`` 0 resolves through the request's default key. See ``docs/vendor_facts.md``."""

from __future__ import annotations

from typing import Callable, Optional

import pytest

import datadist_sim
from datadist_sim._world.world import SimWorld
from datadist_sim.llm_datadist.data_type import DataType
from datadist_sim.llm_datadist.status import LLMException, LLMStatusCode
from datadist_sim.llm_datadist.v2.llm_types import (
    BlocksCacheKey,
    CacheDesc,
    CacheKey,
    CacheKeyByIdAndIndex,
    LayerSynchronizer,
    TransferConfig,
    TransferWithCacheKeyConfig,
)

from ._books import books, contents, fill
from .conftest import D_ID, P_ID, pair

S = LLMStatusCode
REMOTE = {"llm.EnableRemoteCacheAccessible": "1"}


class Ready(LayerSynchronizer):
    def synchronize_layer(self, layer_index: int, timeout_in_millis: Optional[int]) -> bool:
        return True


def desc(num_tensors: int = 4, batch: int = 2) -> CacheDesc:
    return CacheDesc(num_tensors, [batch, 4, 8], DataType.DT_FLOAT16)


def code_of(call: Callable[[], object]) -> LLMStatusCode:
    with pytest.raises(LLMException) as info:
        call()
    return info.value.status_code


def rows(cache: object, tensor: int, index: int) -> bytes:
    return bytes(datadist_sim.tensor_views(cache)[tensor][index].tobytes())  # type: ignore[arg-type]


# -- tensor_num_per_layer must divide ---------------------------------------------------------------


def test_push_cache_with_tensor_num_per_layer_not_dividing_the_source_is_param_invalid(
    world: SimWorld,
) -> None:
    p, d = pair(v2=True, **REMOTE)
    dst = p.cache_manager.allocate_cache(desc(num_tensors=4))
    src = d.cache_manager.allocate_cache(desc(num_tensors=3))
    fill(src, 1)
    before, data = books(world), contents(dst)
    key = CacheKeyByIdAndIndex(P_ID, dst.cache_id)
    assert (
        code_of(lambda: d.cache_manager.push_cache(key, src, tensor_num_per_layer=2)) is S.LLM_PARAM_INVALID
    )
    assert (books(world), contents(dst)) == (before, data)
    d.cache_manager.push_cache(key, src, tensor_num_per_layer=3)  # 3 divides 3: one layer of 3 tensors


def test_push_blocks_with_tensor_num_per_layer_not_dividing_the_source_is_param_invalid(
    world: SimWorld,
) -> None:
    p, d = pair(v2=True, **REMOTE)
    dst = p.cache_manager.allocate_blocks_cache(desc(num_tensors=4, batch=4), BlocksCacheKey(P_ID, 0))
    src = d.cache_manager.allocate_blocks_cache(desc(num_tensors=3, batch=4))
    fill(src, 2)
    before, data = books(world), contents(dst)
    call = lambda: d.cache_manager.push_blocks(BlocksCacheKey(P_ID, 0), src, [0], [1])  # noqa: E731
    assert code_of(call) is S.LLM_PARAM_INVALID
    assert (books(world), contents(dst)) == (before, data)


def test_pull_with_layer_range_and_tensor_num_per_layer_not_dividing_the_local_cache_is_param_invalid(
    world: SimWorld,
) -> None:
    p, d = pair(v2=True)
    src = p.cache_manager.allocate_cache(desc(num_tensors=4), [CacheKey(P_ID, 1)])
    fill(src, 3)
    dst = d.cache_manager.allocate_cache(desc(num_tensors=3))
    before, data = books(world), contents(dst)
    layers = {"src_layer_range": range(0, 1), "dst_layer_range": range(0, 1), "tensor_num_per_layer": 2}
    assert (
        code_of(lambda: d.cache_manager.pull_cache(CacheKey(P_ID, 1), dst, **layers)) is S.LLM_PARAM_INVALID
    )
    assert (books(world), contents(dst)) == (before, data)  # the key is not consumed either


def test_pull_without_layer_range_does_not_need_tensor_num_per_layer_to_divide(world: SimWorld) -> None:
    p, d = pair(v2=True)
    src = p.cache_manager.allocate_cache(desc(num_tensors=3), [CacheKey(P_ID, 1)])
    fill(src, 4)
    dst = d.cache_manager.allocate_cache(desc(num_tensors=3))
    d.cache_manager.pull_cache(CacheKey(P_ID, 1), dst, tensor_num_per_layer=2)
    assert [rows(dst, t, 0) for t in range(3)] == [rows(src, t, 0) for t in range(3)]


# -- a push with no destination blocks is cache-to-cache -------------------------------------------


def test_transfer_with_cache_key_from_blocks_without_blocks_lands_the_first_block_of_each_layer(
    world: SimWorld,
) -> None:
    """The vendor's ``transfer_cache_async_sample.py``: blocks caches on both sides, no block lists."""
    p, d = pair(v2=True, **REMOTE)
    src = p.cache_manager.allocate_blocks_cache(desc(batch=4), BlocksCacheKey(P_ID, 0))
    dst = d.cache_manager.allocate_blocks_cache(desc(batch=4), BlocksCacheKey(D_ID, 0))
    fill(src, 5)
    fill(dst, 6)
    before = {(t, b): rows(dst, t, b) for t in range(4) for b in range(4)}
    config = TransferWithCacheKeyConfig(BlocksCacheKey(D_ID, 0), range(0, 1), range(0, 1))
    task = p.cache_manager.transfer_cache_async(src, Ready(), [config])
    assert task.get_results() == [S.LLM_SUCCESS]
    for (t, b), old in before.items():
        landed = t < 2 and b == 0  # layer 0 is tensors 0 and 1; one block is one batch
        assert rows(dst, t, b) == (rows(src, t, 0) if landed else old), (t, b)


def test_transfer_config_from_blocks_cache_is_one_batch_of_one_block(world: SimWorld) -> None:
    p, d = pair(v2=True)
    src = p.cache_manager.allocate_blocks_cache(desc(batch=4))
    fill(src, 7)
    landing = d.cache_manager.allocate_cache(desc(batch=1))
    addrs = list(landing.tensor_addrs)
    ok = p.cache_manager.transfer_cache_async(src, Ready(), [TransferConfig(D_ID, addrs)])
    assert ok.get_results() == [S.LLM_SUCCESS]
    assert [rows(landing, t, 0) for t in range(4)] == [rows(src, t, 0) for t in range(4)]
    before = contents(landing)
    second = TransferConfig(D_ID, addrs, src_batch_index=1)  # block 1 is not a batch of the engine's
    bad = p.cache_manager.transfer_cache_async(src, Ready(), [second])
    assert bad.get_results() == [S.LLM_PARAM_INVALID]
    assert contents(landing) == before


def test_push_cache_into_remote_blocks_cache_lands_in_its_first_block(world: SimWorld) -> None:
    p, d = pair(v2=True, **REMOTE)
    dst = p.cache_manager.allocate_blocks_cache(desc(batch=4))
    fill(dst, 8)
    src = d.cache_manager.allocate_cache(desc(batch=2))
    fill(src, 9)
    kept = [rows(dst, t, b) for t in range(4) for b in range(1, 4)]
    d.cache_manager.push_cache(CacheKeyByIdAndIndex(P_ID, dst.cache_id, 0), src, src_batch_index=1)
    assert [rows(dst, t, 0) for t in range(4)] == [rows(src, t, 1) for t in range(4)]
    assert [rows(dst, t, b) for t in range(4) for b in range(1, 4)] == kept
    before, data = books(world), contents(dst)
    beyond = CacheKeyByIdAndIndex(P_ID, dst.cache_id, 1)  # a blocks cache has one batch
    assert code_of(lambda: d.cache_manager.push_cache(beyond, src)) is S.LLM_PARAM_INVALID
    assert (books(world), contents(dst)) == (before, data)


# -- cache_id 0 -----------------------------------------------------------------------------------


def test_push_to_cache_id_0_resolves_through_request_key_0(world: SimWorld) -> None:
    p, d = pair(v2=True, **REMOTE)
    other = p.cache_manager.allocate_cache(desc())
    keyed = p.cache_manager.allocate_cache(desc(), [CacheKey(P_ID, 5), CacheKey(P_ID, 0)])
    src = d.cache_manager.allocate_cache(desc(batch=1))
    fill(src, 10)
    untouched = contents(other)
    d.cache_manager.push_cache(CacheKeyByIdAndIndex(P_ID, 0, 1), src)
    # the key's own batch index, not the batch request key 0 is bound to, names the batch
    assert [rows(keyed, t, 1) for t in range(4)] == [rows(src, t, 0) for t in range(4)]
    assert contents(other) == untouched
    key = CacheKeyByIdAndIndex(P_ID, 0, 0)
    config = TransferWithCacheKeyConfig(key, range(0, 2), range(0, 2))
    assert d.cache_manager.transfer_cache_async(src, Ready(), [config]).get_results() == [S.LLM_SUCCESS]
    assert [rows(keyed, t, 0) for t in range(4)] == [rows(src, t, 0) for t in range(4)]


def test_push_to_cache_id_0_without_request_key_0_is_kv_cache_not_exist(world: SimWorld) -> None:
    p, d = pair(v2=True, **REMOTE)
    target = p.cache_manager.allocate_cache(desc(), [CacheKey(P_ID, 1)])
    src = d.cache_manager.allocate_cache(desc(batch=1))
    before, data = books(world), contents(target)
    key = CacheKeyByIdAndIndex(P_ID, 0)
    assert code_of(lambda: d.cache_manager.push_cache(key, src)) is S.LLM_KV_CACHE_NOT_EXIST
    assert (books(world), contents(target)) == (before, data)


def test_v1_pull_with_layer_range_does_not_need_tensor_num_per_layer_to_divide(world: SimWorld) -> None:
    """GE's v1 pull checks only ``tensor_num_per_layer >= 1`` (``cache_engine.cc:83-85``)."""
    p, d = pair(v2=False)
    src = p.kv_cache_manager.allocate_cache(desc(num_tensors=3), [CacheKey(P_ID, 1)])
    fill(src, 11)
    dst = d.kv_cache_manager.allocate_cache(desc(num_tensors=3))
    layers = {"src_layer_range": range(0, 1), "dst_layer_range": range(0, 1), "tensor_num_per_layer": 2}
    d.kv_cache_manager.pull_cache(CacheKey(P_ID, 1), dst, **layers)
    assert [rows(dst, t, 0) for t in range(2)] == [rows(src, t, 0) for t in range(2)]
