"""A manager does not outlive its engine (hixl ``cache_manager.py`` at 3f38f679, ``_check_is_inited``), and
an instance put to sleep (``finalize``) and woken (``init`` with the same cluster id) starts afresh.

What a serving connector does around sleep mode: it keeps its own KV buffers, registers them again after
``init``, and links again; a manager reference it kept from before must be refused, not reach the new
engine. The v1 ``KvCacheManager`` (hicann/ge) has no such check: its calls go to the engine as before.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Tuple

import numpy as np
import pytest
from tests.fabric.conftest import DECODE_IP, PROMPT_IP, info

from datadist_sim._world.world import SimWorld
from datadist_sim.llm_datadist.configs import LLMRole
from datadist_sim.llm_datadist.data_type import DataType
from datadist_sim.llm_datadist.status import LLMException, LLMStatusCode
from datadist_sim.llm_datadist.v2.cache_manager import CacheManager
from datadist_sim.llm_datadist.v2.llm_datadist import LLMDataDist
from datadist_sim.llm_datadist.v2.llm_types import (
    BlocksCacheKey,
    Cache,
    CacheDesc,
    CacheKey,
    CacheKeyByIdAndIndex,
    LayerSynchronizer,
    MemInfo,
    Memtype,
    TransferConfig,
)

from ._books import books
from .conftest import D_ID, P_ID, make, pair, v2_options

S = LLMStatusCode
REMOTE = {"llm.EnableRemoteCacheAccessible": "1"}


class Sync(LayerSynchronizer):
    def synchronize_layer(self, layer_index: int, timeout_in_millis: Optional[int]) -> bool:
        return True


def desc(batch: int = 2) -> CacheDesc:
    return CacheDesc(2, [batch, 4, 8], DataType.DT_FLOAT16)


def operations(manager: CacheManager, peer_cache_id: int) -> Dict[str, Callable[[], object]]:
    """Every public operation of a manager, with arguments that would act on a live engine: caches it
    made (and so the ids the engine knew), keys that name them, a linked peer's cache."""
    regular = manager.allocate_cache(desc(), [CacheKey(P_ID, 1)])
    blocks = manager.allocate_blocks_cache(desc(8), BlocksCacheKey(P_ID))
    addrs = [a + 0x100000 for a in regular.tensor_addrs]
    return {
        "allocate_cache": lambda: manager.allocate_cache(desc()),
        "allocate_blocks_cache": lambda: manager.allocate_blocks_cache(desc(8)),
        "register_cache": lambda: manager.register_cache(desc(), addrs),
        "register_blocks_cache": lambda: manager.register_blocks_cache(desc(8), addrs),
        "deallocate_cache": lambda: manager.deallocate_cache(regular),
        "deallocate_blocks_cache": lambda: manager.deallocate_blocks_cache(blocks),
        "copy_cache": lambda: manager.copy_cache(regular, regular, 1, 0),
        "copy_blocks": lambda: manager.copy_blocks(blocks, {0: [1]}),
        "pull_cache": lambda: manager.pull_cache(CacheKeyByIdAndIndex(D_ID, peer_cache_id, 0), regular),
        "pull_blocks": lambda: manager.pull_blocks(BlocksCacheKey(D_ID), blocks, [0], [1]),
        "push_cache": lambda: manager.push_cache(CacheKeyByIdAndIndex(D_ID, peer_cache_id, 0), regular),
        "push_blocks": lambda: manager.push_blocks(BlocksCacheKey(D_ID), blocks, [0], [1]),
        "unregister_cache": lambda: manager.unregister_cache(regular.cache_id),
        "remove_cache_key": lambda: manager.remove_cache_key(CacheKey(P_ID, 1)),
        "remap_registered_memory": lambda: manager.remap_registered_memory(
            MemInfo(Memtype.MEM_TYPE_DEVICE, regular.tensor_addrs[0], 8)
        ),
        "swap_blocks": lambda: manager.swap_blocks(blocks, blocks, {0: 1}),
        "transfer_cache_async": lambda: manager.transfer_cache_async(
            regular, Sync(), [TransferConfig(D_ID, [0x1000, 0x2000, 0x3000, 0x4000])]
        ),
    }


def refused(call: Callable[[], object]) -> LLMException:
    with pytest.raises(LLMException) as caught:
        call()
    return caught.value


def assert_all_refused(world: SimWorld, ops: Dict[str, Callable[[], object]]) -> None:
    before = books(world)
    for name, call in ops.items():
        exc = refused(call)
        assert exc.status_code is S.LLM_ENGINE_FINALIZED, name
        assert "obtain a new instance after LLMDataDist.init" in str(exc), name
        assert books(world) == before, name


def _linked_pair() -> Tuple[LLMDataDist, LLMDataDist, int]:
    p, d = pair(v2=True, **REMOTE)
    peer = d.cache_manager.allocate_cache(desc())
    return p, d, peer.cache_id


def test_every_operation_of_a_finalized_manager_is_engine_finalized_and_changes_nothing(
    world: SimWorld,
) -> None:
    p, _, peer = _linked_pair()
    ops = operations(p.cache_manager, peer)
    manager = p.cache_manager
    p.finalize()
    assert_all_refused(world, ops)
    # the manager checks before it looks at its arguments
    assert refused(lambda: manager.allocate_cache(1)).status_code is S.LLM_ENGINE_FINALIZED  # type: ignore[arg-type]
    assert refused(lambda: manager.pull_cache("no key", None)).status_code is S.LLM_ENGINE_FINALIZED  # type: ignore[arg-type]


def test_a_refused_call_is_in_the_trace_with_its_code(world: SimWorld) -> None:
    p, _, _ = _linked_pair()
    manager = p.cache_manager
    p.finalize()
    refused(lambda: manager.allocate_cache(desc()))
    last = world.trace.calls()[-1]
    assert (last.op, last.outcome) == ("allocate_cache", "LLM_ENGINE_FINALIZED")


def test_after_finalize_and_init_the_engine_has_a_new_manager_and_the_old_stays_refused(
    world: SimWorld,
) -> None:
    p, _, peer = _linked_pair()
    old = p.cache_manager
    ops = operations(old, peer)
    p.finalize()
    p.init(v2_options(f"{PROMPT_IP}:26000", **REMOTE))
    new = p.cache_manager
    assert new is not old
    assert_all_refused(world, ops)
    made = new.allocate_cache(desc(), [CacheKey(P_ID, 1)])
    assert made.cache_id == 1  # the new engine's first cache, whatever the old one had
    before = books(world)
    refused(lambda: old.remove_cache_key(CacheKey(P_ID, 1)))  # the old key names a new cache now
    refused(lambda: old.unregister_cache(made.cache_id))
    assert books(world) == before


def test_an_old_manager_cannot_reach_a_replacement_engine(world: SimWorld) -> None:
    p, _, peer = _linked_pair()
    old = p.cache_manager
    ops = operations(old, peer)
    p.finalize()
    replacement = make(LLMRole.PROMPT, P_ID, v2_options(f"{PROMPT_IP}:26000", **REMOTE))
    target = replacement.cache_manager.allocate_cache(desc(), [CacheKey(P_ID, 1)])
    assert_all_refused(world, ops)
    store = world.caches[P_ID]
    assert not store.live(target.cache_id).released
    assert len(store.key_table) == 1


def test_a_second_finalize_is_harmless(world: SimWorld) -> None:
    p, _, peer = _linked_pair()
    ops = operations(p.cache_manager, peer)
    p.finalize()
    before = (books(world), len([e for e in world.trace if e.op == "node.finalize"]))
    p.finalize()
    assert (books(world), len([e for e in world.trace if e.op == "node.finalize"])) == before
    assert_all_refused(world, ops)


# -- sleep and wake -----------------------------------------------------------------------------------

BACKENDS = {"hccl": {}, "hixl": {"llm.TransferBackend": "hixl"}}


class Connector:
    """A serving connector's side of one instance: its own buffers (kept across sleep), the manager it
    holds, and the registration it makes after each ``init``."""

    def __init__(self, role: LLMRole, cluster_id: int, options: Dict[str, str]) -> None:
        self.options = options
        self.buffers = [np.zeros((2, 4, 8), dtype=np.float16) for _ in range(2)]
        self.engine = make(role, cluster_id, options)
        self.manager = self.engine.cache_manager
        self.cache = self.register()

    def register(self) -> Cache:
        return self.manager.register_cache(desc(), [b.ctypes.data for b in self.buffers])

    def sleep(self) -> None:
        self.engine.finalize()

    def wake(self) -> CacheManager:
        """``init`` again, with the same id and options; returns the manager held before."""
        self.engine.init(self.options)
        old, self.manager = self.manager, self.engine.cache_manager
        self.cache = self.register()
        return old


def _pair(backend: str) -> Tuple[Connector, Connector]:
    extra = dict(BACKENDS[backend], **REMOTE)
    prompt = Connector(LLMRole.PROMPT, P_ID, v2_options(f"{PROMPT_IP}:26000", **extra))
    decode_listen = f"{DECODE_IP}:26001" if backend == "hixl" else ""
    decode = Connector(LLMRole.DECODER, D_ID, v2_options(decode_listen, **extra))
    return prompt, decode


def link(decode: Connector) -> LLMStatusCode:
    return decode.engine.link_clusters([info(P_ID, 26000, remote_ip=PROMPT_IP, local_ip=DECODE_IP)], 5000)[0]


def relink(decode: Connector) -> None:
    """The connector's remedy for a peer that came back: drop its own end, link again."""
    ret, _ = decode.engine.unlink_clusters(
        [info(P_ID, 26000, remote_ip=PROMPT_IP, local_ip=DECODE_IP)], 5000, force=True
    )
    assert ret is S.LLM_SUCCESS
    assert link(decode) is S.LLM_SUCCESS


def pull(prompt: Connector, decode: Connector) -> Optional[LLMStatusCode]:
    key = CacheKeyByIdAndIndex(P_ID, prompt.cache.cache_id, 1)
    try:
        decode.manager.pull_cache(key, decode.cache, 0)
    except LLMException as exc:
        return exc.status_code
    return None


def fresh_books(world: SimWorld, cluster_id: int) -> List[object]:
    return [entry for entry in books(world) if entry[0] == cluster_id]


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_a_prompt_put_to_sleep_and_woken_serves_its_buffers_again(world: SimWorld, backend: str) -> None:
    prompt, decode = _pair(backend)
    assert link(decode) is S.LLM_SUCCESS
    prompt.buffers[0][1] = 3.0
    assert pull(prompt, decode) is None
    assert np.array_equal(decode.buffers[0][0], prompt.buffers[0][1])

    prompt.sleep()
    assert P_ID not in world.caches
    # asleep, the Prompt is unknown: nothing to pull from, nobody listening to link to
    assert pull(prompt, decode) is S.LLM_NOT_YET_LINK
    # a refused connect: hixl's engine gives FAILED (hixl/common/ctrl_msg_plugin.cc:119-122)
    assert link(decode) is (S.LLM_FAILED if backend == "hixl" else S.LLM_LINK_FAILED)

    prompt.engine.init(prompt.options)
    # nothing of the sleeping instance is in the woken one
    assert fresh_books(world, P_ID) == [(P_ID, [], [], (0, None), (0, 0, 0))]
    old = prompt.manager
    prompt.manager = prompt.engine.cache_manager
    prompt.cache = prompt.register()  # the same buffers, registered again
    addrs = [b.ctypes.data for b in prompt.buffers]
    assert refused(lambda: old.register_cache(desc(), addrs)).status_code is S.LLM_ENGINE_FINALIZED
    # the Decode's link was to the instance that slept: it reaches nothing, and its end still answers
    # link_clusters, until the Decode drops it and links again
    before = decode.buffers[0].copy()
    assert pull(prompt, decode) is S.LLM_NOT_YET_LINK
    assert np.array_equal(decode.buffers[0], before)
    assert link(decode) is S.LLM_ALREADY_LINK
    relink(decode)
    prompt.buffers[0][1] = 5.0
    assert pull(prompt, decode) is None
    assert np.array_equal(decode.buffers[0][0], prompt.buffers[0][1])


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_a_decode_put_to_sleep_and_woken_links_and_pulls_again(world: SimWorld, backend: str) -> None:
    prompt, decode = _pair(backend)
    assert link(decode) is S.LLM_SUCCESS
    decode.sleep()
    old = decode.wake()
    key = CacheKeyByIdAndIndex(P_ID, prompt.cache.cache_id, 1)
    assert refused(lambda: old.pull_cache(key, decode.cache)).status_code is S.LLM_ENGINE_FINALIZED
    # the woken Decode holds no link: the Prompt's end of the old one does not count
    assert pull(prompt, decode) is S.LLM_NOT_YET_LINK
    assert link(decode) is S.LLM_SUCCESS
    prompt.buffers[1][1] = 7.0
    assert pull(prompt, decode) is None
    assert np.array_equal(decode.buffers[1][0], prompt.buffers[1][1])


def test_sleep_and_wake_many_times_leaves_the_books_as_one_wake_does(world: SimWorld) -> None:
    prompt, decode = _pair("hccl")
    assert link(decode) is S.LLM_SUCCESS
    for round_ in range(5):
        prompt.sleep()
        prompt.wake()
        relink(decode)
        prompt.buffers[0][1] = float(round_)
        assert pull(prompt, decode) is None
        assert np.array_equal(decode.buffers[0][0], prompt.buffers[0][1])
        assert fresh_books(world, P_ID) == [(P_ID, [], [(1, False)], (0, None), (2, 2 * 2 * 4 * 8 * 2, 0))]


def test_v1_kv_cache_manager_has_no_manager_side_check(world: SimWorld) -> None:
    """hicann/ge ``llm_datadist_v1/kv_cache_manager.py:71-77``: the v1 manager keeps ``_initialized`` only
    for ``KvCache.__del__``; its operations check their arguments and go to the engine as before."""
    _, d = pair(v2=False)
    manager = d.kv_cache_manager
    d.finalize()
    with pytest.raises(TypeError, match="cache_desc"):
        manager.allocate_cache(1)
    from datadist_sim.llm_datadist_v1.status import LLMException as V1Exception

    with pytest.raises(V1Exception) as caught:
        manager.allocate_cache(desc())
    # the engine's own answer for a finalized instance (``_world/world.py`` ``store_of``)
    assert caught.value.status_code.name == "LLM_FAILED"
