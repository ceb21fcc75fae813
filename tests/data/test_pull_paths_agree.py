"""The pull fast path (``pulls._fast_pull`` and its ``_quick_plan``, issue 15) must be invisible: a script
of calls run with it (as shipped) and without it (``_fast_pull`` declines, so every pull is planned by
``_plan_pull`` and run by ``transfer._run``) gives the same outcome at every step (success, or the same
exception class, status code and message), the same books (keys consumed or kept, caches, pools, link
ends, the exact simulated time), the same bytes in every cache and the same trace. Both faces, both
key kinds, bad indices and sizes, layer ranges, registered memory, legacy codes, timeouts, links gone.

``DATADIST_SIM_RELIABILITY=nightly`` runs ten times the examples (``tests/reliability/_common.py``).
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Tuple

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from tests.reliability._common import NIGHTLY

from ._pull_paths import (
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
    RemoveKey,
    ReqKey,
    Setup,
    agree,
)
from .conftest import D_ID, P_ID

# -- generated scripts ---------------------------------------------------------------------------------


def mostly(common: Any, *others: Any) -> Any:
    """``common`` four times in five, else one of ``others``."""
    return st.sampled_from([common] * (4 * len(others) or 1) + list(others))


def usually(drawn: Any, choices: Tuple[Any, ...]) -> Any:
    """``drawn`` four times in five, else another of ``choices``."""
    return mostly(drawn, *(c for c in choices if c != drawn))


CLUSTER = mostly(P_ID, D_ID, GONE_ID)
"""Mostly the linked Prompt; sometimes the caller itself or a cluster that never was."""
REQ = st.sampled_from([1, 2, 1, 2, 0, PAD])
PREFIX = mostly(PAD, 3)
MODEL = mostly(0, 1)
TENSORS = (2, 4, 1, 3)
SEQ = (2, 4, 8, 1, 0)
"""A batch of one tensor is ``seq * 32`` bytes: 64, 128, 256, 32, or nothing."""
BATCH = st.integers(1, 3)
NUM_BLOCKS = st.integers(2, 6)
BATCH_INDEX = st.sampled_from([0, 0, 1, 2, 3])
SIZE = st.sampled_from([-1, -1, -1, -1, 64, 32, 128, 256, 0, 512, 1 << 20])
"""Whole batch, smaller sizes that fit some batches, 0 (refused), sizes too big for any."""
CACHE = st.sampled_from([0, 0, 1, 2, -1])
"""Which Prompt cache a key by id names, by allocation order (-1: an id never given)."""
DST_INDEX = st.sampled_from([0, 0, 1, 2, -1, -2])
"""Which Decode cache a pull writes into (``_pull_paths.DstIndex``): mostly one of the kind it takes."""
BLOCKS = st.lists(st.integers(0, 6), min_size=0, max_size=3).map(tuple)
SPAN = st.one_of(st.none(), st.tuples(st.integers(0, 3), st.integers(0, 4)))
LAYERS = st.one_of(
    st.none(),
    st.none(),
    st.none(),
    st.builds(
        Layers,
        src=SPAN,
        dst=SPAN,
        per_layer=st.sampled_from([None, 1, 2, 3, 0]),
        src_offset=st.sampled_from([None, 0, 32]),
        dst_offset=st.sampled_from([None, 0, 32]),
    ),
)
ACTS = st.sampled_from(["unlink", "link", "unlink", "link", "slow_link", "fast_link"])
ENDS = st.sampled_from(["restart_prompt", "finalize_prompt", "kill_prompt", "kill_decode"])
"""Acts after which (but for a restart and a link) no pull can succeed: drawn less often."""
WILD_SETUP = st.builds(
    Setup,
    v2=st.booleans(),
    legacy=st.booleans(),
    other_clock=st.booleans(),
    metadata_only=mostly(False, True),
    hixl=mostly(False, True),
    sync_ms=mostly(None, "1", "0"),
    bandwidth=mostly(None, 1e6, SLOW_BYTES_PER_S),
    linked=mostly(True, False),
    reverse=mostly(False, True),
).map(lambda s: s if s.v2 else s._replace(hixl=False, reverse=False))  # both need the CacheManager
PLAIN_SETUP = st.builds(
    lambda v2, other, reverse: Setup(v2=v2, other_clock=other, reverse=v2 and reverse),
    st.booleans(),
    st.booleans(),
    mostly(False, True),
)
SETUP = st.one_of(PLAIN_SETUP, WILD_SETUP)
"""Half the worlds plain (a linked pair, either face, either clock branch), half anything."""


def req_keys(cluster: Any = CLUSTER) -> Any:
    return st.builds(ReqKey, cluster=cluster, req=REQ, prefix=PREFIX, model=MODEL)


ID_KEYS = st.builds(IdKey, cluster=CLUSTER, cache=CACHE, batch=BATCH_INDEX)
BLOCKS_KEYS = st.builds(BlocksKey, cluster=CLUSTER, model=MODEL)
SOURCE_KEYS = st.one_of(
    st.permutations([ReqKey(P_ID, 1), ReqKey(P_ID, 2), ReqKey(P_ID, 0)]).map(tuple),
    st.lists(req_keys(st.just(P_ID)), max_size=3).map(tuple),
)
"""Keys a Prompt cache is allocated with: distinct request keys (as many as fit), or any."""


@st.composite
def plain_pull_blocks(draw: Any, hixl: bool) -> PullBlocks:
    """Blocks 0 and 1 (which every blocks cache has) of the Prompt's model-0 blocks cache, or of a
    contiguous source batch by request key, into blocks 0 and 1 of a Decode blocks cache."""
    count = draw(st.integers(1, 3))
    dst_blocks = tuple(draw(st.lists(st.integers(0, 1), min_size=count, max_size=count)))
    dst = draw(mostly(0, 1))
    if hixl or draw(st.booleans()):
        src_blocks = tuple(draw(st.lists(st.integers(0, 1), min_size=count, max_size=count)))
        return PullBlocks(BlocksKey(P_ID, 0), dst, src_blocks, dst_blocks, None)
    return PullBlocks(ReqKey(P_ID, draw(st.sampled_from([1, 2, 0]))), dst, (), dst_blocks, None)


@st.composite
def cases(draw: Any) -> Case:
    """A pair, some Prompt caches and Decode destinations (mostly of one shape, so that many pulls
    fit), then a few steps, mostly pulls, and a last pull."""
    setup = draw(SETUP)
    tensors = usually(draw(st.sampled_from(TENSORS)), TENSORS)
    seq = usually(draw(st.sampled_from(SEQ)), SEQ)
    contiguous_p = st.builds(
        lambda batch, n, s, keys: Alloc(P_ID, False, batch, n, s, keys[:batch]),
        BATCH,
        tensors,
        seq,
        SOURCE_KEYS,
    )
    blocks_p = st.builds(
        lambda blocks, n, s, model: Alloc(
            P_ID, True, blocks, n, s, () if model is None else (BlocksKey(P_ID, model),)
        ),
        NUM_BLOCKS,
        tensors,
        seq,
        st.one_of(MODEL, st.none()),
    )
    registered_p = st.builds(
        lambda batch, n, s, keys: Register(P_ID, batch, n, s, keys[:1]), BATCH, tensors, seq, SOURCE_KEYS
    )
    alloc_p = st.one_of(contiguous_p, contiguous_p, contiguous_p, blocks_p, registered_p)
    contiguous_d = st.builds(
        lambda batch, n, s, keys: Alloc(D_ID, False, batch, n, s, keys),
        BATCH,
        tensors,
        seq,
        mostly((), (ReqKey(D_ID, 5),)),  # a key keeps a deallocated cache (released, not freed)
    )
    alloc_d = st.one_of(
        contiguous_d,
        contiguous_d,
        contiguous_d,
        st.builds(lambda blocks, n, s: Alloc(D_ID, True, blocks, n, s), NUM_BLOCKS, tensors, seq),
        st.builds(lambda batch, n, s: Register(D_ID, batch, n, s), BATCH, tensors, seq),
    )
    if setup.hixl:  # only keys by id pass a hixl (remote-cache-accessible) face's type check
        pull_keys = st.one_of(ID_KEYS, ID_KEYS, ID_KEYS, BLOCKS_KEYS)
    else:
        pull_keys = st.one_of(req_keys(), req_keys(), req_keys(), ID_KEYS, ID_KEYS, BLOCKS_KEYS)
    wild_pull = st.builds(
        Pull, key=pull_keys, dst=DST_INDEX, batch_index=BATCH_INDEX, size=SIZE, layers=LAYERS
    )
    plain_keys = st.builds(IdKey, cluster=st.just(P_ID), cache=CACHE, batch=mostly(0, 1))
    if not setup.hixl:
        plain_keys = st.one_of(
            plain_keys, st.sampled_from([ReqKey(P_ID, 1), ReqKey(P_ID, 2), ReqKey(P_ID, 0)])
        )
    plain_pull = st.builds(
        Pull, key=plain_keys, dst=DST_INDEX, batch_index=mostly(0, 1), size=mostly(-1, 32), layers=st.none()
    )
    pull = st.one_of(plain_pull, plain_pull, wild_pull)
    blocks_keys = st.one_of(BLOCKS_KEYS, BLOCKS_KEYS, pull_keys)
    wild_pull_blocks = st.builds(
        PullBlocks, key=blocks_keys, dst=DST_INDEX, src_blocks=BLOCKS, dst_blocks=BLOCKS, layers=LAYERS
    )
    pull_blocks = st.one_of(plain_pull_blocks(setup.hixl), wild_pull_blocks)
    step = st.one_of(
        *([pull] * 6),
        pull_blocks,
        pull_blocks,
        alloc_p,
        alloc_d,
        st.builds(Dealloc, side=st.sampled_from([P_ID, D_ID]), cache=CACHE),
        st.builds(RemoveKey, key=req_keys(st.just(P_ID))),
        st.builds(Act, what=ACTS),
        st.builds(Act, what=st.one_of(ACTS, ENDS)),
    )
    sources = draw(st.lists(alloc_p, min_size=1, max_size=3))
    destinations = draw(st.lists(alloc_d, min_size=1, max_size=2))
    body = draw(st.lists(step, min_size=2, max_size=10))
    return Case(setup, tuple(sources + destinations + body + [draw(pull)]))


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
        ok = sum(1 for r in fast.records if isinstance(r.step, (Pull, PullBlocks)) and r.outcome[0] == "ok")
        failed = sum(
            1 for r in fast.records if isinstance(r.step, (Pull, PullBlocks)) and r.outcome[0] != "ok"
        )
        seen["pulls ok"] += ok
        seen["pulls failed"] += failed
        event(f"fast path taken {min(fast.fast, 3)}+ times")

    check()
    # the comparison means something only if the fast path ran, on both faces and both clock branches
    for what in ("fast v2", "fast v1", "fast virtual clock", "fast other clock", "pulls ok", "pulls failed"):
        assert seen[what] > 0, f"no example exercised {what}: {dict(seen)}"


# -- written cases: each condition the brief names, once for sure ------------------------------------

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
    ("legacy, by id", Setup(v2=True, legacy=True), (SRC, DST, Pull(IdKey(P_ID, 0, 1), 0, 1)), "ok"),
)


def _last_outcome(case: Case) -> str:
    fast, _ = agree(case)
    outcome = fast.records[-1].outcome
    return "ok" if outcome[0] == "ok" else str(outcome[2])


@pytest.mark.parametrize(
    ("setup", "steps", "expected"), [c[1:] for c in WRITTEN], ids=[c[0] for c in WRITTEN]
)
def test_pull_cache_gives_the_same_everything_with_and_without_the_fast_path(
    setup: Setup, steps: Tuple[Any, ...], expected: str
) -> None:
    assert _last_outcome(Case(setup, steps)) == expected


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
