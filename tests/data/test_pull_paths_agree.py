"""The pull fast path (``pull_shortcut.fast_pull`` and the shortcuts inside it) must be invisible: a script of
calls run with it (as shipped) and without it (``fast_pull`` declines, so every pull is planned by
``plan_pull`` and run by ``transfer.run_transfer``) gives the same outcome at every step (success, or the
same exception class, status code and message), the same books (keys consumed or kept, caches, pools, link
ends, the exact simulated time), the same bytes in every cache and the same trace. Both faces, both key
kinds, bad indices and sizes, layer ranges, registered memory, legacy codes, timeouts, links gone.
Each face's own shortcut (a plain happy-path comparison before the vendor-order checks of
``pull_cache``) is held to the same standard: a third run takes the vendor-order checks every time.

``DATADIST_SIM_RELIABILITY=nightly`` runs ten times the examples (``tests/reliability/_common.py``).
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Tuple

import pytest
from hypothesis import HealthCheck, event, given, settings
from tests.reliability._common import NIGHTLY

from ._pull_paths import agree
from ._pull_script import (
    GONE_ID,
    PAD,
    SLOW_BYTES_PER_S,
    Act,
    Alloc,
    BlocksKey,
    Case,
    Dealloc,
    IdKey,
    Layers,
    Pull,
    PullBlocks,
    Register,
    ReqKey,
    Setup,
)
from ._pull_strategies import cases
from .conftest import D_ID, P_ID

EXAMPLES = 1500 if NIGHTLY else 150


def test_pull_cache_and_pull_blocks_give_the_same_everything_with_and_without_the_fast_path() -> None:
    seen: Counter[str] = Counter()

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(case=cases())
    def check(case: Case) -> None:
        fast, _ = agree(case)
        face = "v2" if case.setup.v2 else "v1"
        clock = "other clock" if case.setup.other_clock else "virtual clock"
        seen[f"fast {face}"] += fast.fast
        seen[f"fast {clock}"] += fast.fast
        seen["fast beside a thread" if case.setup.beside_thread else "fast alone"] += fast.fast
        event(f"fast path beside a thread: {fast.fast > 0}" if case.setup.beside_thread else "alone")
        for r in fast.records:
            if isinstance(r.step, (Pull, PullBlocks)) and r.outcome != ("ok", "skipped"):
                seen["pulls ok" if r.outcome == ("ok", None) else "pulls failed"] += 1
        event(f"fast path taken {min(fast.fast, 3)}+ times")

    check()
    # the comparison means something only if the fast path ran, on both faces and both clock branches
    # (beside another thread it takes only the commonest pull, which a random script may never make:
    # the written test below makes it for sure)
    faces, clocks = ("fast v2", "fast v1"), ("fast virtual clock", "fast other clock")
    for what in (*faces, *clocks, "fast alone", "pulls ok", "pulls failed"):
        assert seen[what] > 0, f"no example exercised {what}: {dict(seen)}"


# -- written cases: each condition the fast path must get right, once for sure -------------------------

SRC = Alloc(P_ID, False, 2, 4, 4, (ReqKey(P_ID, 1), ReqKey(P_ID, 2)))
DST = Alloc(D_ID, False, 2, 4, 4)
BSRC = Alloc(P_ID, True, 4, 2, 4, (BlocksKey(P_ID, 0),))
BDST = Alloc(D_ID, True, 4, 2, 4)
V2, V1 = Setup(v2=True), Setup(v2=False)

WRITTEN: Tuple[Tuple[str, Setup, Tuple[Any, ...], str], ...] = (
    ("by request key", V2, (SRC, DST, Pull(ReqKey(P_ID, 2), 0, 1)), "ok"),
    ("by request key v1", V1, (SRC, DST, Pull(ReqKey(P_ID, 2), 0, 1)), "ok"),
    ("by id", V2, (SRC, DST, Pull(IdKey(P_ID, 0, 1), 0, 0)), "ok"),
    ("by id v1", V1, (SRC, DST, Pull(IdKey(P_ID, 0, 1), 0, 0)), "ok"),
    (
        "pulled twice",
        V2,
        (SRC, DST, Pull(ReqKey(P_ID, 1), 0), Pull(ReqKey(P_ID, 1), 0)),
        "LLM_KV_CACHE_NOT_EXIST",
    ),
    (
        "pulled twice, legacy",
        Setup(v2=True, legacy=True),
        (SRC, DST, Pull(ReqKey(P_ID, 1), 0), Pull(ReqKey(P_ID, 1), 0)),
        "LLM_REQUEST_ALREADY_COMPLETED",
    ),
    ("key never bound", V2, (SRC, DST, Pull(ReqKey(P_ID, 7), 0)), "LLM_KV_CACHE_NOT_EXIST"),
    (
        "prefix key kept",
        V2,
        (
            Alloc(P_ID, False, 1, 4, 4, (ReqKey(P_ID, PAD, 3),)),
            DST,
            Pull(ReqKey(P_ID, PAD, 3), 0),
            Pull(ReqKey(P_ID, PAD, 3), 0),
        ),
        "ok",
    ),
    (
        "model id",
        V2,
        (Alloc(P_ID, False, 1, 4, 4, (ReqKey(P_ID, 1, PAD, 1),)), DST, Pull(ReqKey(P_ID, 1, PAD, 0), 0)),
        "LLM_KV_CACHE_NOT_EXIST",
    ),
    (
        "source deallocated, key alive",
        V2,
        (SRC, DST, Dealloc(P_ID, 0), Pull(ReqKey(P_ID, 1), 0), Pull(ReqKey(P_ID, 2), 0, 1)),
        "ok",
    ),
    ("source deallocated, by id", V1, (SRC, DST, Dealloc(P_ID, 0), Pull(IdKey(P_ID, 0, 0), 0)), "ok"),
    ("batch_index past the destination", V2, (SRC, DST, Pull(ReqKey(P_ID, 1), 0, 2)), "LLM_PARAM_INVALID"),
    ("source batch past the source", V2, (SRC, DST, Pull(IdKey(P_ID, 0, 3), 0)), "LLM_KV_CACHE_NOT_EXIST"),
    ("smaller size", V2, (SRC, DST, Pull(ReqKey(P_ID, 1), 0, 0, 64)), "ok"),
    ("size too big", V1, (SRC, DST, Pull(ReqKey(P_ID, 1), 0, 0, 1 << 20)), "LLM_PARAM_INVALID"),
    (
        "size too big, legacy",
        Setup(v2=False, legacy=True),
        (SRC, DST, Pull(ReqKey(P_ID, 1), 0, 0, 1 << 20)),
        "LLM_SEQ_LENOVERLIMIT",
    ),
    ("batch_index past uint32", V2, (SRC, DST, Pull(ReqKey(P_ID, 1), 0, 1 << 32)), "ValueError"),
    ("batch_index past uint32 v1", V1, (SRC, DST, Pull(ReqKey(P_ID, 1), 0, 1 << 32)), "ValueError"),
    ("size past int64", V2, (SRC, DST, Pull(ReqKey(P_ID, 1), 0, 0, 1 << 63)), "ValueError"),
    ("size -2", V2, (SRC, DST, Pull(ReqKey(P_ID, 1), 0, 0, -2)), "LLM_PARAM_INVALID"),
    ("size 0 v1", V1, (SRC, DST, Pull(ReqKey(P_ID, 1), 0, 0, 0)), "LLM_PARAM_INVALID"),
    ("size 0", V2, (SRC, DST, Pull(ReqKey(P_ID, 1), 0, 0, 0)), "LLM_PARAM_INVALID"),
    ("bigger destination batches", V2, (SRC, Alloc(D_ID, False, 3, 4, 8), Pull(ReqKey(P_ID, 1), 0, 2)), "ok"),
    (
        "smaller destination batches",
        V2,
        (SRC, Alloc(D_ID, False, 1, 4, 2), Pull(ReqKey(P_ID, 1), 0)),
        "LLM_PARAM_INVALID",
    ),
    (
        "tensor counts differ",
        V1,
        (SRC, Alloc(D_ID, False, 2, 2, 4), Pull(ReqKey(P_ID, 1), 0)),
        "LLM_PARAM_INVALID",
    ),
    ("blocks destination", V2, (SRC, BDST, Pull(ReqKey(P_ID, 1), 0)), "LLM_PARAM_INVALID"),
    ("blocks source", V2, (BSRC, DST, Pull(IdKey(P_ID, 0, 0), 0)), "LLM_PARAM_INVALID"),
    ("layer range", V2, (SRC, DST, Pull(ReqKey(P_ID, 1), 0, 1, -1, Layers((1, 2), (0, 1)))), "ok"),
    ("layer range of the source only", V2, (SRC, DST, Pull(ReqKey(P_ID, 1), 0, 1, -1, Layers((1, 2)))), "ok"),
    (
        "layer range of the destination only v1",
        V1,
        (SRC, DST, Pull(ReqKey(P_ID, 1), 0, 0, -1, Layers(None, (0, 1)))),
        "LLM_PARAM_INVALID",
    ),
    ("offsets v1", V1, (SRC, DST, Pull(ReqKey(P_ID, 1), 0, 1, 64, Layers(src_offset=32))), "ok"),
    ("destination offset v1", V1, (SRC, DST, Pull(ReqKey(P_ID, 1), 0, 1, 64, Layers(dst_offset=64))), "ok"),
    (
        "layer range v1, offsets",
        V1,
        (SRC, DST, Pull(ReqKey(P_ID, 1), 0, 1, 32, Layers((0, 1), (1, 2), 2, 32, 0))),
        "ok",
    ),
    (
        "tensors per layer not dividing",
        V2,
        (SRC, DST, Pull(ReqKey(P_ID, 1), 0, 0, -1, Layers((0, 1), (0, 1), 3))),
        "LLM_PARAM_INVALID",
    ),
    ("own cluster", V2, (SRC, DST, Pull(ReqKey(D_ID, 1), 0)), "LLM_PARAM_INVALID"),
    ("never linked", Setup(v2=True, linked=False), (SRC, DST, Pull(ReqKey(P_ID, 1), 0)), "LLM_NOT_YET_LINK"),
    ("unlinked", V1, (SRC, DST, Act("unlink"), Pull(ReqKey(P_ID, 1), 0)), "LLM_NOT_YET_LINK"),
    ("relinked", V2, (SRC, DST, Act("unlink"), Act("link"), Pull(ReqKey(P_ID, 1), 0)), "ok"),
    ("unknown cluster", V2, (SRC, DST, Pull(ReqKey(GONE_ID, 1), 0)), "LLM_NOT_YET_LINK"),
    (
        "prompt finalized",
        V2,
        (SRC, DST, Act("finalize_prompt"), Pull(ReqKey(P_ID, 1), 0)),
        "LLM_NOT_YET_LINK",
    ),
    (
        "prompt restarted, hixl",
        Setup(v2=True, hixl=True),
        (SRC, DST, Act("restart_prompt"), Alloc(P_ID, False, 2, 4, 4), Pull(IdKey(P_ID, 1), 0)),
        "LLM_NOT_YET_LINK",
    ),
    (
        "prompt restarted, relinked",
        V2,
        (
            SRC,
            DST,
            Act("restart_prompt"),
            Act("unlink"),
            Act("link"),
            Alloc(P_ID, False, 2, 4, 4),
            Pull(IdKey(P_ID, 1), 0),
        ),
        "ok",
    ),
    ("rank-table link", Setup(v2=True, comm=True), (SRC, DST, Pull(ReqKey(P_ID, 1), 0)), "ok"),
    (
        "rank-table link broken by a timeout",
        Setup(v2=True, comm=True, bandwidth=SLOW_BYTES_PER_S),
        (SRC, DST, Pull(ReqKey(P_ID, 1), 0), Pull(ReqKey(P_ID, 2), 0, 1, 32)),
        "LLM_NOT_YET_LINK",
    ),
    (
        "rank-table link kept after a timeout",
        Setup(v2=True, comm=True, comm_keeps_link=True, bandwidth=SLOW_BYTES_PER_S),
        (SRC, DST, Pull(ReqKey(P_ID, 1), 0), Pull(ReqKey(P_ID, 2), 0, 1, 32)),
        "ok",
    ),
    ("hixl, by id", Setup(v2=True, hixl=True), (SRC, DST, Pull(IdKey(P_ID, 0, 1), 0)), "ok"),
    (
        "prompt restarted, its new cache named by id",
        V1,
        (SRC, DST, Act("restart_prompt"), Alloc(P_ID, False, 2, 4, 4), Pull(IdKey(P_ID, 1), 0)),
        "LLM_NOT_YET_LINK",
    ),
    ("prompt killed", V2, (SRC, DST, Act("kill_prompt"), Pull(ReqKey(P_ID, 1), 0)), "LLM_TIMEOUT"),
    (
        "timeout breaks the link",
        Setup(v2=True, bandwidth=SLOW_BYTES_PER_S),
        (SRC, DST, Pull(ReqKey(P_ID, 1), 0), Pull(ReqKey(P_ID, 2), 0, 0, 32)),
        "LLM_NOT_YET_LINK",
    ),
    (
        "small pull under a slow link",
        Setup(v2=False, bandwidth=SLOW_BYTES_PER_S),
        (SRC, DST, Pull(ReqKey(P_ID, 1), 0, 0, 32)),
        "ok",
    ),
    (
        "small sync_kv_timeout, big pull",
        Setup(v2=True, sync_ms="1", bandwidth=1e6),
        (SRC, DST, Pull(ReqKey(P_ID, 1), 0)),
        "LLM_TIMEOUT",
    ),
    (
        "small sync_kv_timeout, small pull",
        Setup(v2=True, sync_ms="1", bandwidth=1e6),
        (SRC, DST, Pull(ReqKey(P_ID, 1), 0, 0, 32)),
        "ok",
    ),
    (
        "sync_kv_timeout 0 v1",
        Setup(v2=False, sync_ms="0"),
        (SRC, DST, Pull(ReqKey(P_ID, 1), 0)),
        "LLM_WAIT_PROCESS_TIMEOUT",
    ),
    (
        "registered source, key kept",
        V2,
        (
            Register(P_ID, 2, 4, 4, (ReqKey(P_ID, 1),)),
            DST,
            Pull(ReqKey(P_ID, 1), 0),
            Pull(ReqKey(P_ID, 1), 0, 1),
        ),
        "ok",
    ),
    ("registered destination", V2, (SRC, Register(D_ID, 2, 4, 4), Pull(IdKey(P_ID, 0, 1), 0)), "ok"),
    (
        "destination deallocated",
        V2,
        (SRC, DST, Dealloc(D_ID, 0), Pull(ReqKey(P_ID, 1), 0)),
        "LLM_KV_CACHE_NOT_EXIST",
    ),
    (
        "the prompt pulls from the decoder",
        Setup(v2=True, reverse=True),
        (SRC, DST, Pull(ReqKey(P_ID, 1), 0)),
        "ok",
    ),
    (
        "a v1 prompt pulls",
        Setup(v2=False, reverse=True),
        (SRC, DST, Pull(IdKey(P_ID, 0, 1), 0)),
        "LLM_PARAM_INVALID",
    ),
    (
        "the prompt pulls from the decoder, which unlinked",
        Setup(v2=True, reverse=True),
        (SRC, DST, Act("unlink"), Pull(IdKey(P_ID, 0, 1), 0)),
        "LLM_NOT_YET_LINK",
    ),
    (
        "destination deallocated, a key holds it",
        V2,
        (SRC, Alloc(D_ID, False, 2, 4, 4, (ReqKey(D_ID, 5),)), Dealloc(D_ID, 0), Pull(ReqKey(P_ID, 1), 0)),
        "LLM_KV_CACHE_NOT_EXIST",
    ),
    ("other clock", Setup(v2=True, other_clock=True), (SRC, DST, Pull(ReqKey(P_ID, 1), 0)), "ok"),
    (
        "other clock v1, timeout",
        Setup(v2=False, other_clock=True, sync_ms="0"),
        (SRC, DST, Pull(ReqKey(P_ID, 1), 0)),
        "LLM_WAIT_PROCESS_TIMEOUT",
    ),
    ("metadata only", Setup(v2=True, metadata_only=True), (SRC, DST, Pull(ReqKey(P_ID, 1), 0)), "ok"),
    ("beside a thread", Setup(v2=True, beside_thread=True), (SRC, DST, Pull(ReqKey(P_ID, 1), 0)), "ok"),
    (
        "beside a thread v1, by id, then the key again",
        Setup(v2=False, beside_thread=True),
        (SRC, DST, Pull(IdKey(P_ID, 0, 1), 0), Pull(ReqKey(P_ID, 1), 1), Pull(ReqKey(P_ID, 1), 0)),
        "LLM_KV_CACHE_NOT_EXIST",
    ),
    (
        "beside a thread, timeout",
        Setup(v2=True, beside_thread=True, sync_ms="0"),
        (SRC, DST, Pull(ReqKey(P_ID, 1), 0)),
        "LLM_TIMEOUT",
    ),
    ("legacy, by id", Setup(v2=True, legacy=True), (SRC, DST, Pull(IdKey(P_ID, 0, 1), 0, 1)), "ok"),
)


def _last_outcome(case: Case) -> str:
    fast, _ = agree(case)
    outcome = fast.records[-1].outcome
    if outcome[0] == "ok":
        return "ok"
    return str(outcome[2] or outcome[1])  # the status code, or the class of a non-LLM exception


@pytest.mark.parametrize(
    ("setup", "steps", "expected"), [c[1:] for c in WRITTEN], ids=[c[0] for c in WRITTEN]
)
def test_pull_cache_gives_the_same_everything_with_and_without_the_fast_path(
    setup: Setup, steps: Tuple[Any, ...], expected: str
) -> None:
    assert _last_outcome(Case(setup, steps)) == expected


@pytest.mark.parametrize("v2", [True, False], ids=["v2", "v1"])
def test_beside_another_thread_the_commonest_pulls_take_the_fast_path_and_agree(v2: bool) -> None:
    """Beside another thread, a whole batch pulled by request key and one pulled by cache id between
    pool caches are the pulls the fast path takes (``pull_shortcut._beside_others``): both go fast, and give
    the same everything as the general path."""
    steps = (SRC, DST, Pull(ReqKey(P_ID, 1), 0), Pull(IdKey(P_ID, 0, 1), 1))
    fast, _ = agree(Case(Setup(v2=v2, beside_thread=True), steps))
    assert [r.outcome for r in fast.records[-2:]] == [("ok", None), ("ok", None)]
    assert (fast.fast_done, fast.general) == (2, 0)


BLOCKS_WRITTEN: Tuple[Tuple[str, Setup, Tuple[Any, ...], str], ...] = (
    ("blocks to blocks", V2, (BSRC, BDST, PullBlocks(BlocksKey(P_ID, 0), 0, (0, 3), (2, 1))), "ok"),
    ("blocks to blocks v1", V1, (BSRC, BDST, PullBlocks(BlocksKey(P_ID, 0), 0, (0, 3), (2, 1))), "ok"),
    ("a destination block twice", V2, (BSRC, BDST, PullBlocks(BlocksKey(P_ID, 0), 0, (0, 1), (2, 2))), "ok"),
    (
        "a destination block twice v1",
        V1,
        (BSRC, BDST, PullBlocks(BlocksKey(P_ID, 0), 0, (0, 1), (2, 2))),
        "ok",
    ),
    (
        "a block out of range",
        V2,
        (BSRC, BDST, PullBlocks(BlocksKey(P_ID, 0), 0, (0, 9), (2, 1))),
        "LLM_PARAM_INVALID",
    ),
    (
        "a block out of range v1",
        V1,
        (BSRC, BDST, PullBlocks(BlocksKey(P_ID, 0), 0, (0,), (4,))),
        "LLM_PARAM_INVALID",
    ),
    (
        "a contiguous source by request key",
        V2,
        (SRC, Alloc(D_ID, True, 4, 4, 2), PullBlocks(ReqKey(P_ID, 2), 0, (), (3, 0))),
        "ok",
    ),
    (
        "a layer range",
        V2,
        (BSRC, BDST, PullBlocks(BlocksKey(P_ID, 0), 0, (1,), (1,), Layers((0, 1), (1, 2), 1))),
        "ok",
    ),
    (
        "a layer range v1",
        V1,
        (BSRC, BDST, PullBlocks(BlocksKey(P_ID, 0), 0, (1,), (1,), Layers((1, 2), (0, 1), 1))),
        "ok",
    ),
    (
        "block sizes differ",
        V2,
        (BSRC, Alloc(D_ID, True, 4, 2, 2), PullBlocks(BlocksKey(P_ID, 0), 0, (1,), (1,))),
        "LLM_PARAM_INVALID",
    ),
    (
        "registered blocks key absent",
        V1,
        (BSRC, BDST, PullBlocks(BlocksKey(P_ID, 1), 0, (1,), (1,))),
        "LLM_KV_CACHE_NOT_EXIST",
    ),
    (
        "metadata only v1",
        Setup(v2=False, metadata_only=True),
        (BSRC, BDST, PullBlocks(BlocksKey(P_ID, 0), 0, (0, 3), (2, 1))),
        "ok",
    ),
    (
        "timeout",
        Setup(v2=True, sync_ms="0"),
        (BSRC, BDST, PullBlocks(BlocksKey(P_ID, 0), 0, (0,), (1,))),
        "LLM_TIMEOUT",
    ),
)


@pytest.mark.parametrize(
    ("setup", "steps", "expected"), [c[1:] for c in BLOCKS_WRITTEN], ids=[c[0] for c in BLOCKS_WRITTEN]
)
def test_pull_blocks_gives_the_same_everything_with_and_without_the_fast_path(
    setup: Setup, steps: Tuple[Any, ...], expected: str
) -> None:
    assert _last_outcome(Case(setup, steps)) == expected
