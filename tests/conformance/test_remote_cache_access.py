"""Remote cache access (``llm.EnableRemoteCacheAccessible``): which caches a one-sided transfer may touch,
and which table of the peer's caches it reads.

Each test names the engine's condition and where it is (hicann/hixl at 9ed283b, ``src/llm_datadist/``):

- a pull (``PullCacheByGet``) finds the remote cache, then refuses with ``LLM_PARAM_INVALID`` a local or
  remote cache registered with ``remote_accessible=False`` (``data_transfer_client.cc:231-235``);
- a push or layer-wise transfer refuses a local one before it looks for the remote cache, and a remote
  one after (``layer_wise_transfer_job.cc:248-251``, ``:198``, ``:217``);
- the peer's cache table is read once per link, at the first lookup (``cache_access_table.cc:290-294``):
  a cache the peer makes later is ``LLM_KV_CACHE_NOT_EXIST`` (``:296-308``) until the link is made again;
  the copy keeps the addresses of caches freed since (``:67-81``).

Both transfer backends: HCCL (``link_clusters``) and hixl (``llm.TransferBackend``), which reads the
table the same way (``link_mgr/hixl_entity.cc:24-25``).
"""

from __future__ import annotations

from typing import Iterator, List, Tuple

import numpy as np
import pytest
from tests.data.conftest import D_ID, P_ID, make, v2_options
from tests.fabric.conftest import DECODE_IP, PROMPT_IP, info
from tests.fabric.test_comm_link import RANK_TABLE

import datadist_sim
from datadist_sim import SimWorld
from datadist_sim.llm_datadist import (
    BlocksCacheKey,
    CacheDesc,
    CacheKey,
    CacheKeyByIdAndIndex,
    DataType,
    LayerSynchronizer,
    LLMDataDist,
    LLMException,
    LLMRole,
    LLMStatusCode,
    Placement,
    RegisterMemStatus,
    TransferConfig,
    TransferWithCacheKeyConfig,
)

from .conftest import fresh

S = LLMStatusCode
PORT = 26600
REMOTE = {"llm.EnableRemoteCacheAccessible": "1"}
BACKENDS = ["hccl", "hixl"]


@pytest.fixture
def world() -> Iterator[SimWorld]:
    with fresh() as w:
        yield w


class Sync(LayerSynchronizer):
    def synchronize_layer(self, layer_index: int, timeout_in_millis: object) -> bool:
        return True


def desc(batch: int = 2, num_tensors: int = 2) -> CacheDesc:
    return CacheDesc(num_tensors, [batch, 4, 16], DataType.DT_FLOAT16)


def start(backend: str, *, remote: bool = True, link: bool = True) -> Tuple[LLMDataDist, LLMDataDist]:
    """A Prompt and a Decode with remote cache access (the hixl backend turns it on by itself)."""
    extra = dict(REMOTE) if remote and backend == "hccl" else {}
    if backend == "hixl":
        extra["llm.TransferBackend"] = "hixl"
    p = make(LLMRole.PROMPT, P_ID, v2_options(f"{PROMPT_IP}:{PORT}", **extra))
    # the hixl backend wants every instance listening
    d = make(
        LLMRole.DECODER, D_ID, v2_options(f"{DECODE_IP}:{PORT + 1}" if backend == "hixl" else "", **extra)
    )
    if link:
        relink(d, unlink=False)
    return p, d


def relink(d: LLMDataDist, *, unlink: bool = True) -> None:
    target = info(P_ID, PORT, remote_ip=PROMPT_IP, local_ip=DECODE_IP)
    if unlink:
        assert d.unlink_clusters([target], 5000)[0] is S.LLM_SUCCESS
    ret, rets = d.link_clusters([target], 5000)
    assert ret is S.LLM_SUCCESS, (ret, rets)


def code_of(call: object) -> LLMStatusCode:
    with pytest.raises(LLMException) as exc:
        call()  # type: ignore[operator]
    return exc.value.status_code


def filled(cache: object, seed: int) -> List[np.ndarray]:
    out = []
    rng = np.random.default_rng(seed)
    for v in datadist_sim.tensor_views(cache):
        v[...] = rng.standard_normal(v.shape).astype(v.dtype)
        out.append(v.copy())
    return out


def arrays(d: CacheDesc, seed: int) -> List[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(d.shape).astype(np.float16) for _ in range(d.num_tensors)]


def by_id(cache: object, batch: int = 0) -> CacheKeyByIdAndIndex:
    return CacheKeyByIdAndIndex(P_ID, cache.cache_id, batch)  # type: ignore[attr-defined]


@pytest.mark.parametrize("value", ["2", "true", ""])
def test_option_other_than_0_or_1_fails_init_with_param_invalid(world: SimWorld, value: str) -> None:
    """``llm_datadist_v2.cc:65-67`` with ``llm_utils.cc:65-80``: the engine takes ``"0"`` or ``"1"``; any
    other value fails ``init`` (``LLM_ASSERT_TRUE``, ``llm_checker.h:17-23``: ``LLM_PARAM_INVALID``)."""
    dd = LLMDataDist(LLMRole.PROMPT, P_ID)
    with pytest.raises(LLMException) as exc:
        dd.init(v2_options(**{"llm.EnableRemoteCacheAccessible": value}))
    assert exc.value.status_code is S.LLM_PARAM_INVALID
    assert not world.nodes
    make(LLMRole.PROMPT, P_ID, v2_options(**{"llm.EnableRemoteCacheAccessible": "0"}))


# -- remote_accessible ----------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_pull_into_local_cache_not_remote_accessible_is_param_invalid(world: SimWorld, backend: str) -> None:
    """``data_transfer_client.cc:232-233``: the local cache of a one-sided pull must be remote accessible."""
    p, d = start(backend, link=False)
    src = p.cache_manager.allocate_cache(desc())
    filled(src, 1)
    mine = arrays(desc(), 2)
    before = [a.copy() for a in mine]
    dst = d.cache_manager.register_cache(desc(), [a.ctypes.data for a in mine], remote_accessible=False)
    relink(d, unlink=False)
    assert code_of(lambda: d.cache_manager.pull_cache(by_id(src), dst)) is S.LLM_PARAM_INVALID
    assert all(np.array_equal(a, b) for a, b in zip(mine, before))  # nothing written
    d.cache_manager.unregister_cache(dst.cache_id)


@pytest.mark.parametrize("backend", BACKENDS)
def test_pull_of_remote_cache_not_remote_accessible_is_param_invalid(world: SimWorld, backend: str) -> None:
    """``data_transfer_client.cc:234-235``: so is the remote cache, as the peer's table records it."""
    p, d = start(backend, link=False)
    theirs = arrays(desc(), 3)
    src = p.cache_manager.register_cache(desc(), [a.ctypes.data for a in theirs], remote_accessible=False)
    dst = d.cache_manager.allocate_cache(desc())
    relink(d, unlink=False)
    assert code_of(lambda: d.cache_manager.pull_cache(by_id(src), dst)) is S.LLM_PARAM_INVALID
    assert not any(v.any() for v in datadist_sim.tensor_views(dst))
    p.cache_manager.unregister_cache(src.cache_id)


def test_host_registration_defaults_to_not_remote_accessible(world: SimWorld) -> None:
    """``cache_manager.py:625-635`` (the default follows the placement) with ``:232-233`` above: a host
    cache registered without ``remote_accessible`` cannot take a one-sided pull."""
    p, d = start("hccl", link=False)
    src = p.cache_manager.allocate_cache(desc())
    host = CacheDesc(2, [2, 4, 16], DataType.DT_FLOAT16, Placement.HOST)
    mine = arrays(host, 4)
    dst = d.cache_manager.register_cache(host, [a.ctypes.data for a in mine])
    relink(d, unlink=False)
    assert code_of(lambda: d.cache_manager.pull_cache(by_id(src), dst)) is S.LLM_PARAM_INVALID
    d.cache_manager.unregister_cache(dst.cache_id)


def test_missing_remote_cache_is_found_missing_before_access_is_checked(world: SimWorld) -> None:
    """``data_transfer_client.cc:231`` comes before ``:232``: no such remote cache is
    ``LLM_KV_CACHE_NOT_EXIST`` even into a local cache that could not take the pull."""
    _, d = start("hccl", link=False)
    mine = arrays(desc(), 5)
    dst = d.cache_manager.register_cache(desc(), [a.ctypes.data for a in mine], remote_accessible=False)
    relink(d, unlink=False)
    assert code_of(lambda: d.cache_manager.pull_cache(CacheKeyByIdAndIndex(P_ID, 77, 0), dst)) is (
        S.LLM_KV_CACHE_NOT_EXIST
    )
    d.cache_manager.unregister_cache(dst.cache_id)


@pytest.mark.parametrize("backend", BACKENDS)
def test_push_from_local_cache_not_remote_accessible_is_param_invalid_before_remote_lookup(
    world: SimWorld, backend: str
) -> None:
    """``layer_wise_transfer_job.cc:248-251``: a push checks its local cache before it looks for the
    remote one, so even a push to a cache the peer does not have is ``LLM_PARAM_INVALID``."""
    p, d = start(backend, link=False)
    dst = p.cache_manager.allocate_cache(desc())
    mine = arrays(desc(), 6)
    src = d.cache_manager.register_cache(desc(), [a.ctypes.data for a in mine], remote_accessible=False)
    relink(d, unlink=False)
    assert code_of(lambda: d.cache_manager.push_cache(by_id(dst), src)) is S.LLM_PARAM_INVALID
    assert code_of(lambda: d.cache_manager.push_cache(CacheKeyByIdAndIndex(P_ID, 77, 0), src)) is (
        S.LLM_PARAM_INVALID
    )
    assert not any(v.any() for v in datadist_sim.tensor_views(dst))
    d.cache_manager.unregister_cache(src.cache_id)


@pytest.mark.parametrize("backend", BACKENDS)
def test_push_into_remote_cache_not_remote_accessible_is_param_invalid(world: SimWorld, backend: str) -> None:
    """``layer_wise_transfer_job.cc:217``: the remote cache a push or a layer-wise transfer writes must be
    remote accessible; ``push_blocks``, ``push_cache`` and ``transfer_cache_async`` all go through it."""
    p, d = start(backend, link=False)
    bdesc = CacheDesc(2, [8, 4, 16], DataType.DT_FLOAT16)
    theirs = arrays(bdesc, 7)
    before = [a.copy() for a in theirs]
    dst = p.cache_manager.register_blocks_cache(
        bdesc, [a.ctypes.data for a in theirs], BlocksCacheKey(P_ID, 0), remote_accessible=False
    )
    src = d.cache_manager.allocate_blocks_cache(bdesc)
    filled(src, 8)
    relink(d, unlink=False)
    cm = d.cache_manager
    assert code_of(lambda: cm.push_blocks(BlocksCacheKey(P_ID, 0), src, [0], [1])) is S.LLM_PARAM_INVALID
    assert code_of(lambda: cm.push_cache(by_id(dst), src)) is S.LLM_PARAM_INVALID
    config = TransferWithCacheKeyConfig(BlocksCacheKey(P_ID, 0), range(0, 1), range(0, 1))
    task = cm.transfer_cache_async(src, Sync(), [config], [0], [1])
    assert task.synchronize() is S.LLM_PARAM_INVALID
    assert all(np.array_equal(a, b) for a, b in zip(theirs, before))
    p.cache_manager.unregister_cache(dst.cache_id)


def test_transfer_config_into_memory_not_registered_with_the_transport_is_param_invalid(
    world: SimWorld,
) -> None:
    """``comm_mem_manager.cc:75-78``: a cache registered with ``remote_accessible=False`` is not
    registered with the transport, so the one-sided put a ``TransferConfig`` makes into it
    (``layer_wise_transfer_job.cc:36-41``) cannot land (inferred code: ``LLM_PARAM_INVALID``, the
    simulator's for any destination the peer's transport does not hold); nothing is written."""
    p, d = start("hccl", remote=False, link=False)
    src = p.cache_manager.allocate_cache(desc(batch=1))
    filled(src, 17)
    closed, opened = arrays(desc(batch=1), 18), arrays(desc(batch=1), 19)
    before = [a.copy() for a in closed]
    shut = d.cache_manager.register_cache(
        desc(batch=1), [a.ctypes.data for a in closed], remote_accessible=False
    )
    open_ = d.cache_manager.register_cache(desc(batch=1), [a.ctypes.data for a in opened])
    relink(d, unlink=False)
    task = p.cache_manager.transfer_cache_async(src, Sync(), [TransferConfig(D_ID, shut.tensor_addrs)])
    assert task.synchronize() is S.LLM_PARAM_INVALID
    assert all(np.array_equal(a, b) for a, b in zip(closed, before))
    task = p.cache_manager.transfer_cache_async(src, Sync(), [TransferConfig(D_ID, open_.tensor_addrs)])
    assert task.synchronize() is S.LLM_SUCCESS
    assert np.array_equal(opened[0], datadist_sim.tensor_views(src)[0])
    d.cache_manager.unregister_cache(shut.cache_id)
    d.cache_manager.unregister_cache(open_.cache_id)


def test_without_remote_cache_access_registrations_are_pulled_as_before(world: SimWorld) -> None:
    """The check belongs to the one-sided path only (``data_cache_engine.cc:153-155``): without remote
    cache access the peer's engine serves the pull and looks at no such flag."""
    p, d = start("hccl", remote=False, link=False)
    theirs = arrays(desc(), 9)
    src = p.cache_manager.register_cache(
        desc(), [a.ctypes.data for a in theirs], [CacheKey(P_ID, 1)], remote_accessible=False
    )
    dst = d.cache_manager.allocate_cache(desc())
    relink(d, unlink=False)
    d.cache_manager.pull_cache(CacheKey(P_ID, 1), dst)
    assert np.array_equal(datadist_sim.tensor_views(dst)[0][0], theirs[0][0])
    p.cache_manager.unregister_cache(src.cache_id)


# -- the table a link reads -----------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_cache_made_after_the_first_pull_is_not_found_until_the_link_is_made_again(
    world: SimWorld, backend: str
) -> None:
    """``cache_access_table.cc:290-294``: the peer's table is read at the first pull of a link and kept;
    a cache the Prompt allocates later is ``LLM_KV_CACHE_NOT_EXIST`` (``:296-299``) until a new link."""
    p, d = start(backend)
    early = p.cache_manager.allocate_cache(desc())  # after the link, before the first pull: in the table
    dst = d.cache_manager.allocate_cache(desc())
    d.cache_manager.pull_cache(by_id(early), dst)
    late = p.cache_manager.allocate_cache(desc())
    want = filled(late, 10)
    assert code_of(lambda: d.cache_manager.pull_cache(by_id(late), dst)) is S.LLM_KV_CACHE_NOT_EXIST
    d.cache_manager.pull_cache(by_id(early), dst)  # the table still serves what it holds
    relink(d)
    d.cache_manager.pull_cache(by_id(late, 1), dst, 1)
    assert np.array_equal(datadist_sim.tensor_views(dst)[0][1], want[0][1])


def test_rank_table_link_reads_the_table_once_per_link_too(world: SimWorld) -> None:
    """A rank-table link is a comm entity like any other (``comm_entity.cc:275``): the same copy, read at
    the first pull (``cache_access_table.cc:290-294``), until the comm is made again."""
    p, d = start("hccl", link=False)
    ranks = {P_ID: 0, D_ID: 1}

    def comm() -> Tuple[int, int]:
        ids = p.link("pd", ranks, RANK_TABLE), d.link("pd", ranks, RANK_TABLE)
        for _ in range(100):
            if d.query_register_mem_status(ids[1]) is not RegisterMemStatus.PREPARING:
                break
        assert d.query_register_mem_status(ids[1]) is RegisterMemStatus.OK
        return ids

    p_comm, d_comm = comm()
    first = p.cache_manager.allocate_cache(desc())
    dst = d.cache_manager.allocate_cache(desc())
    d.cache_manager.pull_cache(by_id(first), dst)
    late = p.cache_manager.allocate_cache(desc())
    assert code_of(lambda: d.cache_manager.pull_cache(by_id(late), dst)) is S.LLM_KV_CACHE_NOT_EXIST
    d.unlink(d_comm)
    p.unlink(p_comm)
    comm()
    d.cache_manager.pull_cache(by_id(late), dst)


@pytest.mark.parametrize("backend", BACKENDS)
def test_push_reads_the_table_once_per_link_too(world: SimWorld, backend: str) -> None:
    """``layer_wise_transfer_job.cc:198`` looks in the same copy (``cache_access_table.cc:290-294``)."""
    p, d = start(backend)
    first = p.cache_manager.allocate_cache(desc())
    src = d.cache_manager.allocate_cache(desc())
    filled(src, 11)
    d.cache_manager.push_cache(by_id(first), src)
    late = p.cache_manager.allocate_cache(desc())
    assert code_of(lambda: d.cache_manager.push_cache(by_id(late), src)) is S.LLM_KV_CACHE_NOT_EXIST
    assert not any(v.any() for v in datadist_sim.tensor_views(late))
    relink(d)
    d.cache_manager.push_cache(by_id(late), src)
    assert np.array_equal(datadist_sim.tensor_views(late)[1][0], datadist_sim.tensor_views(src)[1][0])


def test_without_remote_cache_access_the_live_table_is_read(world: SimWorld) -> None:
    """Without the option the peer's engine looks up each pull itself (``data_cache_engine.cc:163-178``)."""
    p, d = start("hccl", remote=False)
    dst = d.cache_manager.allocate_cache(desc())
    d.cache_manager.pull_cache(by_id(p.cache_manager.allocate_cache(desc())), dst)
    d.cache_manager.pull_cache(by_id(p.cache_manager.allocate_cache(desc())), dst)


def test_a_table_read_before_the_peer_published_one_is_read_again(world: SimWorld) -> None:
    """``cache_access_table.cc:291``: the copy is read again while its version is 0, which a Prompt that
    has made no cache has published (versions start at 1, ``:152``; inferred: the table's device memory
    reads 0 before its first write)."""
    p, d = start("hccl")
    dst = d.cache_manager.allocate_cache(desc())
    assert code_of(lambda: d.cache_manager.pull_cache(CacheKeyByIdAndIndex(P_ID, 1, 0), dst)) is (
        S.LLM_KV_CACHE_NOT_EXIST
    )
    src = p.cache_manager.allocate_cache(desc())
    d.cache_manager.pull_cache(by_id(src), dst)


def test_one_sided_pull_consumes_no_key_of_the_peer(world: SimWorld) -> None:
    """``data_transfer_client.cc:226-245``: a one-sided read sends the peer's engine nothing, so the
    request key bound at the pulled batch stays, and with it a cache deallocated meanwhile."""
    p, d = start("hccl")
    src = p.cache_manager.allocate_cache(desc(), [CacheKey(P_ID, 5)])
    want = filled(src, 12)
    dst = d.cache_manager.allocate_cache(desc())
    p.cache_manager.deallocate_cache(src)  # held by its key
    d.cache_manager.pull_cache(by_id(src), dst)
    d.cache_manager.pull_cache(by_id(src), dst)
    assert np.array_equal(datadist_sim.tensor_views(dst)[1][0], want[1][0])
    p.cache_manager.remove_cache_key(CacheKey(P_ID, 5))


def test_pool_cache_freed_after_the_table_was_read_reads_what_the_pool_holds_there(world: SimWorld) -> None:
    """``cache_access_table.cc:67-81``: the copy keeps a freed cache's addresses, and pool memory stays
    registered with the transport (``data_cache_engine.cc:295-296``): a pull reads what is there now,
    the bytes of the cache the pool gave that memory to."""
    p, d = start("hccl")
    src = p.cache_manager.allocate_cache(desc())
    filled(src, 13)
    dst = d.cache_manager.allocate_cache(desc())
    d.cache_manager.pull_cache(by_id(src), dst)
    addrs = list(src.tensor_addrs)
    p.cache_manager.deallocate_cache(src)
    again = p.cache_manager.allocate_cache(desc())
    assert list(again.tensor_addrs) == addrs  # the pool gave the same memory out again
    want = filled(again, 14)
    d.cache_manager.pull_cache(by_id(src), dst)  # the old id: the table read at link still has it
    assert np.array_equal(datadist_sim.tensor_views(dst)[0][0], want[0][0])


def test_pool_cache_freed_and_not_reused_is_refused_where_hardware_reads_stale_bytes(world: SimWorld) -> None:
    """The same copy and freed pool memory no cache holds: the hardware reads whatever bytes remain; the
    simulator has none to give and refuses with ``LLM_PARAM_INVALID`` (a deliberate difference), writing
    nothing."""
    p, d = start("hccl")
    src = p.cache_manager.allocate_cache(desc())
    filled(src, 15)
    dst = d.cache_manager.allocate_cache(desc())
    d.cache_manager.pull_cache(by_id(src), dst)
    kept = [v.copy() for v in datadist_sim.tensor_views(dst)]
    p.cache_manager.deallocate_cache(src)
    assert code_of(lambda: d.cache_manager.pull_cache(by_id(src), dst)) is S.LLM_PARAM_INVALID
    assert all(np.array_equal(a, b) for a, b in zip(datadist_sim.tensor_views(dst), kept))


def test_registered_cache_unregistered_after_the_table_was_read_is_param_invalid(world: SimWorld) -> None:
    """Unregistering takes the memory out of the transport (``data_cache_engine.cc:123``,
    ``comm_mem_manager.cc:106-123``) but not out of the copy: the pull finds the cache and the transport
    refuses it (inferred code: ``LLM_PARAM_INVALID``)."""
    p, d = start("hccl", link=False)
    theirs = arrays(desc(), 16)
    src = p.cache_manager.register_cache(desc(), [a.ctypes.data for a in theirs])
    dst = d.cache_manager.allocate_cache(desc())
    relink(d, unlink=False)
    d.cache_manager.pull_cache(by_id(src), dst)
    p.cache_manager.unregister_cache(src.cache_id)
    assert code_of(lambda: d.cache_manager.pull_cache(by_id(src), dst)) is S.LLM_PARAM_INVALID
    relink(d)
    assert code_of(lambda: d.cache_manager.pull_cache(by_id(src), dst)) is S.LLM_KV_CACHE_NOT_EXIST


# -- pull_blocks reads the same copy ---------------------------------------------------------------------


def blocks_desc(blocks: int = 4) -> CacheDesc:
    return CacheDesc(2, [blocks, 4, 16], DataType.DT_FLOAT16)


@pytest.mark.parametrize("backend", BACKENDS)
def test_pull_blocks_of_a_blocks_key_made_after_the_first_pull_is_not_found_until_relink(
    world: SimWorld, backend: str
) -> None:
    """``PullBlocks`` is ``PullCache`` with block lists (``llm_datadist_v2.cc:237-247``), so with remote
    cache access it is a one-sided read too (``data_cache_engine.cc:153-155``) and finds a blocks key in
    the link's copy (``data_transfer_client.cc:231``, ``cache_access_table.cc:305-310``): a key the
    Prompt binds after the first pull is ``LLM_KV_CACHE_NOT_EXIST`` until the link is made again."""
    p, d = start(backend)
    first = p.cache_manager.allocate_cache(desc())
    d.cache_manager.pull_cache(by_id(first), d.cache_manager.allocate_cache(desc()))  # the copy is read
    late = p.cache_manager.allocate_blocks_cache(blocks_desc(), BlocksCacheKey(P_ID, 0))
    want = filled(late, 20)
    dst = d.cache_manager.allocate_blocks_cache(blocks_desc())
    pull = lambda: d.cache_manager.pull_blocks(BlocksCacheKey(P_ID, 0), dst, [2], [1])  # noqa: E731
    assert code_of(pull) is S.LLM_KV_CACHE_NOT_EXIST
    assert not any(v.any() for v in datadist_sim.tensor_views(dst))
    relink(d)
    pull()
    assert np.array_equal(datadist_sim.tensor_views(dst)[1][1], want[1][2])


@pytest.mark.parametrize("backend", BACKENDS)
def test_pull_blocks_of_a_blocks_key_freed_after_the_table_was_read_finds_it_in_the_copy(
    world: SimWorld, backend: str
) -> None:
    """The copy a ``pull_cache`` read holds every key the Prompt had published then, blocks keys too
    (``cache_manager.cc:264-265,578``; ``cache_access_table.cc:198-205,274-281``), and keeps them after
    the cache is freed (``:67-81``): ``pull_blocks`` finds the freed cache and meets freed pool memory,
    which the simulator refuses with ``LLM_PARAM_INVALID`` (module doc), not ``LLM_KV_CACHE_NOT_EXIST``."""
    p, d = start(backend)
    first = p.cache_manager.allocate_cache(desc())
    blocks = p.cache_manager.allocate_blocks_cache(blocks_desc(), BlocksCacheKey(P_ID, 0))
    filled(blocks, 21)
    d.cache_manager.pull_cache(by_id(first), d.cache_manager.allocate_cache(desc()))  # the copy is read
    p.cache_manager.deallocate_blocks_cache(blocks)
    dst = d.cache_manager.allocate_blocks_cache(blocks_desc())
    kept = filled(dst, 22)
    assert code_of(lambda: d.cache_manager.pull_blocks(BlocksCacheKey(P_ID, 0), dst, [0], [0])) is (
        S.LLM_PARAM_INVALID
    )
    assert all(np.array_equal(a, b) for a, b in zip(datadist_sim.tensor_views(dst), kept))
    relink(d)  # a new link reads the table as it is now: the key went with the cache
    assert code_of(lambda: d.cache_manager.pull_blocks(BlocksCacheKey(P_ID, 0), dst, [0], [0])) is (
        S.LLM_KV_CACHE_NOT_EXIST
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_pull_blocks_into_local_blocks_cache_not_remote_accessible_is_param_invalid(
    world: SimWorld, backend: str
) -> None:
    """``data_transfer_client.cc:232-233`` holds for a blocks pull as for any other."""
    p, d = start(backend, link=False)
    src = p.cache_manager.allocate_blocks_cache(blocks_desc(), BlocksCacheKey(P_ID, 0))
    filled(src, 23)
    mine = arrays(blocks_desc(), 24)
    before = [a.copy() for a in mine]
    dst = d.cache_manager.register_blocks_cache(
        blocks_desc(), [a.ctypes.data for a in mine], remote_accessible=False
    )
    relink(d, unlink=False)
    pull = lambda: d.cache_manager.pull_blocks(BlocksCacheKey(P_ID, 0), dst, [0], [0])  # noqa: E731
    assert code_of(pull) is S.LLM_PARAM_INVALID
    assert all(np.array_equal(a, b) for a, b in zip(mine, before))
    d.cache_manager.unregister_cache(dst.cache_id)
