"""Hypothesis strategies for ``test_pull_paths_agree``: scripts (``_pull_script``) that reach pulls of
every kind, half in a plain world so that many pulls get through and the fast path runs often, half in
any world, with one odd argument or state at a time more often than many."""

from __future__ import annotations

from typing import Any, Tuple

from hypothesis import strategies as st

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
    RemoveKey,
    ReqKey,
    Setup,
)
from .conftest import D_ID, P_ID


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
BATCH_INDEX = st.sampled_from([0, 0, 1, 2, 3, 0, 0, 1, 2, 3, 1 << 32])
"""In range or not for the caches; the last one no uint32 (the face refuses it)."""
SIZE = st.sampled_from([-1, -1, -1, -1, 64, 32, 128, 256, 0, 512, 1 << 20, -1, -1, -1, -2, 1 << 63])
"""Whole batch, smaller sizes that fit some batches, 0 (refused), sizes too big for any, and two no
valid size at all (-2, past int64)."""
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


def _possible(setup: Setup) -> Setup:
    """What a KvCacheManager cannot do (hixl, a rank-table link) and what the hixl backend has not
    (rank-table links) left out. (A KvCacheManager Prompt's pull is refused, by role: a case too.)"""
    if not setup.v2:
        setup = setup._replace(hixl=False, comm=False)
    return setup._replace(comm=setup.comm and not setup.hixl)


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
    comm=mostly(False, True),
    comm_keeps_link=st.booleans(),
    beside_thread=st.booleans(),
).map(_possible)


PLAIN_SETUP = st.builds(
    lambda v2, other, reverse, beside: Setup(
        v2=v2, other_clock=other, reverse=v2 and reverse, beside_thread=beside
    ),
    st.booleans(),
    st.booleans(),
    mostly(False, True),
    st.booleans(),
)
SETUP = st.one_of(PLAIN_SETUP, WILD_SETUP)
"""Half the worlds plain (a linked pair, either face, either clock branch, alone or beside another
thread), half anything."""


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
