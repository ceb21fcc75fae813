"""Semantically bad calls on a live CacheManager-mode pair: empty and oversized lists, mismatched
descriptions and indices, stale caches after deallocate, a finalized instance and its old handles. Each
raises (or returns) what the reference documents, the message names the argument, the world is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Type

import pytest
from tests.reliability._bad_env import D_ID, P_ID, PAD, Env, cache_desc_of, names_arg
from tests.reliability._bad_methods import v2_manager
from tests.reliability._common import STATS, link_info

from datadist_sim._status_v1 import LLM_ERRORS, as_code
from datadist_sim.llm_datadist.configs import LLMClusterInfo, LLMRole
from datadist_sim.llm_datadist.status import LLMException, LLMStatusCode
from datadist_sim.llm_datadist.v2.llm_types import (
    BlocksCacheKey,
    CacheKey,
    CacheKeyByIdAndIndex,
)

S = LLMStatusCode


@dataclass
class Case:
    """One semantically bad call: what it must raise (or return), and a word its message must contain."""

    label: str
    call: Callable[[Env], Any]
    want: Optional[Type[BaseException]]
    code: Optional[LLMStatusCode] = None
    names: str = ""
    returns: Any = None


def _keys(n: int, cid: int = D_ID, first: int = 10) -> List[CacheKey]:
    return [CacheKey(cid, first + i) for i in range(n)]


def _many_infos(n: int) -> List[LLMClusterInfo]:
    return [link_info(100 + i) for i in range(n)]


_E, _PI, _NE = LLM_ERRORS, S.LLM_PARAM_INVALID, S.LLM_KV_CACHE_NOT_EXIST  # either package's class
CASES = [
    # empty and oversized lists
    Case(
        "pull_blocks: empty dst_blocks",
        lambda e: v2_manager(e).pull_blocks(BlocksCacheKey(P_ID, 0), e.caches["bdst"], [0], []),
        _E,
        _PI,
        "dst_blocks",
    ),
    Case(
        "pull_blocks: BlocksCacheKey, empty src_blocks",
        lambda e: v2_manager(e).pull_blocks(BlocksCacheKey(P_ID, 0), e.caches["bdst"], [], [0]),
        _E,
        _PI,
        "src_blocks",
    ),
    Case(
        "pull_blocks: src/dst block lists differ in length",
        lambda e: v2_manager(e).pull_blocks(BlocksCacheKey(P_ID, 0), e.caches["bdst"], [0], [0, 1]),
        _E,
        _PI,
        "src blocks",
    ),
    Case(
        "allocate_cache: more keys than batches",
        lambda e: v2_manager(e).allocate_cache(cache_desc_of(2), _keys(3)),
        _E,
        _PI,
        "cache keys",
    ),
    Case(
        "allocate_cache: duplicate keys",
        lambda e: v2_manager(e).allocate_cache(cache_desc_of(2), [CacheKey(D_ID, 1), CacheKey(D_ID, 1)]),
        _E,
        _PI,
        "cache_keys",
    ),
    Case(
        "allocate_cache: repeated placeholders",
        lambda e: v2_manager(e).allocate_cache(cache_desc_of(2), [CacheKey(D_ID, PAD), CacheKey(D_ID, PAD)]),
        _E,
        _PI,
        "cache_keys",
    ),
    Case(
        "allocate_cache: key bound to a live cache",
        lambda e: e.p.cache_manager.allocate_cache(cache_desc_of(2), [CacheKey(P_ID, 1)]),
        _E,
        _PI,
        "cache key",
    ),
    Case(
        "allocate_cache: larger than the pool",
        lambda e: v2_manager(e).allocate_cache(cache_desc_of(4096)),
        _E,
        S.LLM_OUT_OF_MEMORY,
        "allocate",
    ),
    Case(
        "allocate_blocks_cache: blocks key bound",
        lambda e: e.p.cache_manager.allocate_blocks_cache(cache_desc_of(2), BlocksCacheKey(P_ID, 0)),
        _E,
        _PI,
        "key",
    ),
    Case(
        "register_cache: empty addrs",
        lambda e: v2_manager(e).register_cache(cache_desc_of(1), []),
        _E,
        _PI,
        "addrs",
    ),
    Case(
        "register_cache: addrs shorter than num_tensors",
        lambda e: v2_manager(e).register_cache(cache_desc_of(1), [int(e.buffers[0].ctypes.data)]),
        _E,
        _PI,
        "addrs",
    ),
    Case(
        "register_cache: a zero address",
        lambda e: v2_manager(e).register_cache(cache_desc_of(1), [0, 1]),
        _E,
        _PI,
        "addr",
    ),
    Case("link_clusters: empty list", lambda e: e.d.link_clusters([]), None, returns=(_PI, [])),
    Case(
        "link_clusters: 17 clusters (limit on)",
        lambda e: e.d.link_clusters(_many_infos(17)),
        None,
        returns=(S.LLM_CLUSTER_NUM_EXCEED_LIMIT, []),
    ),
    Case(
        "unlink_clusters: 17 clusters (limit on)",
        lambda e: e.d.unlink_clusters(_many_infos(17)),
        None,
        returns=(S.LLM_CLUSTER_NUM_EXCEED_LIMIT, []),
    ),
    Case("link_clusters: timeout 0", lambda e: e.d.link_clusters([link_info(P_ID)], 0), _E, _PI, "timeout"),
    Case("link: one member", lambda e: e.d.link("c", {D_ID: 0}, "{}"), _E, _PI, "cluster num"),
    Case(
        "link: five members",
        lambda e: e.d.link("c", {i: i for i in range(5)}, "{}"),
        _E,
        _PI,
        "cluster_rank_info",
    ),
    Case("link: empty comm_name", lambda e: e.d.link("", {P_ID: 0, D_ID: 1}, "{}"), _E, _PI, "comm_name"),
    Case(
        "link: 128-char comm_name",
        lambda e: e.d.link("c" * 128, {P_ID: 0, D_ID: 1}, "{}"),
        _E,
        _PI,
        "comm_name",
    ),
    Case("link: ranks out of order", lambda e: e.d.link("c", {P_ID: 1, D_ID: 0}, "{}"), _E, _PI, "rank"),
    # mismatched descriptions and indices
    Case(
        "pull_cache: num_tensors differ",
        lambda e: v2_manager(e).pull_cache(CacheKey(P_ID, 1), e.caches["wide"]),
        _E,
        _PI,
        "num_tensors",
    ),
    Case(
        "pull_cache: batch_index past the destination",
        lambda e: v2_manager(e).pull_cache(CacheKey(P_ID, 1), e.caches["dst"], 5),
        _E,
        _PI,
        "batch_index",
    ),
    Case(
        "pull_cache: blocks destination",
        lambda e: v2_manager(e).pull_cache(CacheKey(P_ID, 1), e.caches["bdst"]),
        _E,
        _PI,
        "cache",
    ),
    Case(
        "pull_cache: size 0",
        lambda e: v2_manager(e).pull_cache(CacheKey(P_ID, 1), e.caches["dst"], 0, 0),
        _E,
        _PI,
        "size",
    ),
    Case(
        "pull_cache: size past the batch",
        lambda e: v2_manager(e).pull_cache(CacheKey(P_ID, 1), e.caches["dst"], 0, 1 << 20),
        _E,
        _PI,
        "size",
    ),
    Case(
        "pull_cache: both req_id and prefix_id",
        lambda e: v2_manager(e).pull_cache(CacheKey(P_ID, 1, 0, 3), e.caches["dst"]),
        _E,
        _PI,
        "req id",
    ),
    Case(
        "pull_cache: from own cluster",
        lambda e: v2_manager(e).pull_cache(CacheKey(D_ID, 1), e.caches["dst"]),
        _E,
        _PI,
        "own cluster",
    ),
    Case(
        "pull_cache: by id, batch past the source",
        lambda e: v2_manager(e).pull_cache(
            CacheKeyByIdAndIndex(P_ID, e.caches["src"].cache_id, 7), e.caches["dst"]
        ),
        _E,
        _NE,
        "batch_index",
    ),
    Case(
        "pull_blocks: block index past the destination",
        lambda e: v2_manager(e).pull_blocks(BlocksCacheKey(P_ID, 0), e.caches["bdst"], [0], [9]),
        _E,
        _PI,
        "block",
    ),
    Case(
        "pull_blocks: block index past the source",
        lambda e: v2_manager(e).pull_blocks(BlocksCacheKey(P_ID, 0), e.caches["bdst"], [9], [0]),
        _E,
        _PI,
        "block",
    ),
    Case(
        "copy_cache: num_tensors differ",
        lambda e: v2_manager(e).copy_cache(e.caches["wide"], e.caches["dst"]),
        _E,
        _PI,
        "num_tensors",
    ),
    Case(
        "copy_cache: batch index out of range",
        lambda e: v2_manager(e).copy_cache(e.caches["dst"], e.caches["dst2"], 5),
        _E,
        _PI,
        "batch",
    ),
    Case(
        "copy_cache: size past the batch",
        lambda e: v2_manager(e).copy_cache(e.caches["dst"], e.caches["dst2"], 0, 0, 0, 1 << 20),
        _E,
        _PI,
        "size",
    ),
    Case(
        "copy_blocks: block out of range",
        lambda e: v2_manager(e).copy_blocks(e.caches["bdst"], {0: [9]}),
        _E,
        _PI,
        "block",
    ),
    Case(
        "swap_blocks: block sizes differ",
        lambda e: v2_manager(e).swap_blocks(e.caches["bwide"], e.caches["bdst"], {0: 1}),
        _E,
        _PI,
        "block size",
    ),
    Case(
        "swap_blocks: device to device",
        lambda e: v2_manager(e).swap_blocks(e.caches["bdst"], e.caches["bdst"], {0: 1}),
        _E,
        _PI,
        "placement",
    ),
    Case(
        "swap_blocks: index out of range",
        lambda e: v2_manager(e).swap_blocks(e.caches["host"], e.caches["bdst"], {0: 9}),
        _E,
        _PI,
        "dst_block_index",
    ),
    # stale caches
    Case(
        "pull_cache into a deallocated cache",
        lambda e: v2_manager(e).pull_cache(CacheKey(P_ID, 1), e.caches["stale"]),
        _E,
        _NE,
        "cache",
    ),
    Case(
        "pull_blocks into a deallocated blocks cache",
        lambda e: v2_manager(e).pull_blocks(BlocksCacheKey(P_ID, 0), e.caches["stale_blocks"], [0], [0]),
        _E,
        _NE,
        "cache",
    ),
    Case(
        "copy_cache from a deallocated cache",
        lambda e: v2_manager(e).copy_cache(e.caches["dst"], e.caches["stale"]),
        _E,
        _NE,
        "cache",
    ),
    Case(
        "copy_blocks in a deallocated blocks cache",
        lambda e: v2_manager(e).copy_blocks(e.caches["stale_blocks"], {0: [1]}),
        _E,
        _NE,
        "cache",
    ),
    Case(
        "deallocate_cache twice (a no-op, §7.1)",
        lambda e: v2_manager(e).deallocate_cache(e.caches["stale"]),
        None,
    ),
    Case(
        "deallocate_blocks_cache twice (a no-op)",
        lambda e: v2_manager(e).deallocate_blocks_cache(e.caches["stale_blocks"]),
        None,
    ),
    Case(
        "pull_cache by id of a freed cache",
        lambda e: v2_manager(e).pull_cache(CacheKeyByIdAndIndex(D_ID - 1, 99), e.caches["dst"]),
        _E,
        _NE,
        "cache",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.label)
def test_semantic_bad_input(env: Env, case: Case) -> None:
    before = env.state()
    STATS["bad inputs tried"] += 1
    if case.want is None:
        assert case.call(env) == case.returns
    else:
        with pytest.raises(case.want) as info:
            case.call(env)
        if case.code is not None:  # a KvCacheManager's code is the v1 package's: compared by name
            assert as_code(info.value.status_code) is case.code  # type: ignore[attr-defined]
        assert names_arg(info.value, case.names), str(info.value)
    assert env.state() == before, "the world changed"


def test_a_finalized_instance_and_its_stale_handles(env: Env) -> None:
    """After ``finalize``: the instance raises the real RuntimeError, its old manager is refused with
    ``LLM_ENGINE_FINALIZED`` (hixl ``cache_manager.py`` at 3f38f679), and nothing changes."""
    old = env.d.cache_manager
    env.d.finalize()
    before = env.state()
    with pytest.raises(RuntimeError, match="llm datadist is not initialized"):
        env.d.link_clusters([link_info(P_ID)])
    with pytest.raises(RuntimeError, match="llm datadist is not initialized"):
        env.d.cache_manager  # noqa: B018
    with pytest.raises(RuntimeError, match="llm datadist is not initialized"):
        env.d.switch_role(LLMRole.PROMPT)
    for call in (
        lambda: old.allocate_cache(cache_desc_of(1)),
        lambda: old.pull_cache(CacheKey(P_ID, 1), env.caches["dst"]),
        lambda: old.copy_cache(env.caches["dst"], env.caches["dst2"]),
        lambda: old.deallocate_cache(env.caches["dst"]),
    ):
        with pytest.raises(LLMException) as info:
            call()
        assert info.value.status_code is S.LLM_ENGINE_FINALIZED
        STATS["bad inputs tried"] += 1
    env.d.finalize()  # a second finalize is a no-op
    assert env.state() == before
    with pytest.raises(LLMException) as info:
        env.p.cache_manager.pull_cache(CacheKey(D_ID, 1), env.caches["src"])
    assert info.value.status_code is S.LLM_NOT_YET_LINK, "a finalized peer's link is gone"
