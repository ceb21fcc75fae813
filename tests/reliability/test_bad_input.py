"""Bad input to every public method of a live CacheManager-mode pair: wrong types, out-of-range integers,
``None``, empty and oversized lists, mismatched descriptions, stale caches, a finalized instance.

For each call: the error type is the one reference §2.4 documents for that check (``TypeError`` for a
wrong type, ``ValueError`` for an out-of-range integer, ``LLMException`` with the named code for a semantic
or engine check), the message names the argument, and the world's books and bytes are unchanged.

``None`` is its own case: the real checks let ``None`` through wherever ``allow_none`` is left at its
default (§2.4), and the real code then dereferences it; :data:`NONE_LEAKS` lists where that gives a bare
``AttributeError``/``TypeError`` that names nothing, exactly as the real package does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple, Type

import numpy as np
import pytest
from tests.reliability._common import STATS, snapshot

from datadist_sim._current import activate
from datadist_sim._world.world import SimConfig, SimWorld
from datadist_sim.llm_datadist.configs import LLMClusterInfo, LLMRole
from datadist_sim.llm_datadist.data_type import DataType
from datadist_sim.llm_datadist.status import LLMException, LLMStatusCode
from datadist_sim.llm_datadist.v2.llm_datadist import LLMDataDist, finalize_all
from datadist_sim.llm_datadist.v2.llm_types import (
    BlocksCacheKey,
    Cache,
    CacheDesc,
    CacheKey,
    CacheKeyByIdAndIndex,
    KvCache,
    MemInfo,
    Memtype,
    Placement,
)

S = LLMStatusCode
P_ID, D_ID = 1, 2
PAD = 2**64 - 1


def _desc(
    batch: int, num_tensors: int = 2, placement: Placement = Placement.DEVICE, hidden: int = 64
) -> CacheDesc:
    return CacheDesc(num_tensors, [batch, 16, hidden], DataType.DT_FLOAT16, placement)


def _info(remote: int) -> LLMClusterInfo:
    c = LLMClusterInfo()
    c.remote_cluster_id = remote
    c.append_local_ip_info("192.168.2.1", 0)
    c.append_remote_ip_info("192.168.1.1", 26000 + remote)
    return c


@dataclass
class Env:
    """A linked Prompt/Decoder pair with caches of every kind, one stale (deallocated) of each kind."""

    world: SimWorld
    p: LLMDataDist
    d: LLMDataDist
    caches: Dict[str, Any]
    buffers: List[np.ndarray]

    def bytes_(self) -> List[bytes]:
        from datadist_sim._world.address_space import tensor_views

        out = []
        for cache in self.caches.values():
            addrs = _addrs(cache)
            if addrs and self.world.memory.allocation_containing(addrs[0]):
                shape = (cache.cache_desc.size,)
                out += [v.tobytes() for v in tensor_views(self.world.memory, addrs, shape, np.uint8)]
        return out

    def state(self) -> Tuple[Any, ...]:
        return snapshot(self.world), self.bytes_()


def _addrs(cache: Any) -> List[int]:
    if isinstance(cache, Cache):
        return list(cache.tensor_addrs)
    return list(cache.per_device_tensor_addrs[0]) if cache.per_device_tensor_addrs else []


def _fill(world: SimWorld, caches: Dict[str, Any]) -> None:
    from datadist_sim._world.address_space import tensor_views

    rng = np.random.default_rng(0)
    for cache in caches.values():
        addrs = _addrs(cache)
        if addrs and world.memory.allocation_containing(addrs[0]):
            for v in tensor_views(world.memory, addrs, (cache.cache_desc.size,), np.uint8):
                v[...] = rng.integers(0, 256, v.shape, dtype=np.uint8)


def _env(v1: bool = False) -> Env:
    if v1:
        return _env_v1()
    world = SimWorld(seed=2, config=SimConfig(v2_cluster_limit=True))
    pool = json.dumps({"memory_size": 1 << 20, "page_shift": 12})
    opts = {"ge.exec.deviceId": "0", "llm.EnableCacheManager": "1", "llm.MemPoolConfig": pool}
    with activate(world):
        p = LLMDataDist(LLMRole.PROMPT, P_ID)
        p.init({**opts, "llm.listenIpInfo": f"192.168.1.1:{26000 + P_ID}"})
        d = LLMDataDist(LLMRole.DECODER, D_ID)
        d.init({**opts, "llm.HostMemPoolConfig": pool})
    assert d.link_clusters([_info(P_ID)])[0] is S.LLM_SUCCESS
    pcm, dcm = p.cache_manager, d.cache_manager
    caches = {
        "src": pcm.allocate_cache(_desc(2), [CacheKey(P_ID, 1), CacheKey(P_ID, 2)]),
        "bsrc": pcm.allocate_blocks_cache(_desc(4), BlocksCacheKey(P_ID, 0)),
        "dst": dcm.allocate_cache(_desc(2)),
        "dst2": dcm.allocate_cache(_desc(2)),
        "wide": dcm.allocate_cache(_desc(2, num_tensors=4)),
        "bdst": dcm.allocate_blocks_cache(_desc(4)),
        "bwide": dcm.allocate_blocks_cache(_desc(4, hidden=32, placement=Placement.HOST)),
        "host": dcm.allocate_blocks_cache(_desc(4, placement=Placement.HOST)),
    }
    stale = dcm.allocate_cache(_desc(2))
    dcm.deallocate_cache(stale)
    stale_blocks = dcm.allocate_blocks_cache(_desc(4))
    dcm.deallocate_blocks_cache(stale_blocks)
    caches.update(stale=stale, stale_blocks=stale_blocks)
    _fill(world, caches)
    return Env(world, p, d, caches, [np.zeros(8192, np.uint8) for _ in range(2)])


def _env_v1() -> Env:
    """The same in KvCacheManager mode: a Prompt (keys, blocks key) and a linked Decoder."""
    world = SimWorld(seed=2)
    opts = {"ge.exec.deviceId": "0", "ge.flowGraphMemMaxSize": str(1 << 20)}
    with activate(world):
        p = LLMDataDist(LLMRole.PROMPT, P_ID)
        p.init({**opts, "llm.listenIpInfo": f"192.168.1.1:{26000 + P_ID}"})
        d = LLMDataDist(LLMRole.DECODER, D_ID)
        d.init(opts)
    assert d.link_clusters([_info(P_ID)])[0] is S.LLM_SUCCESS
    pkm, dkm = p.kv_cache_manager, d.kv_cache_manager
    buffers = [np.zeros(8192, np.uint8) for _ in range(2)]
    caches = {
        "src": pkm.allocate_cache(_desc(2), [CacheKey(P_ID, 1), CacheKey(P_ID, 2)]),
        "bsrc": pkm.allocate_blocks_cache(_desc(4), BlocksCacheKey(P_ID, 0)),
        "dst": dkm.allocate_cache(_desc(2)),
        "dst2": dkm.allocate_cache(_desc(2)),
        "wide": dkm.allocate_cache(_desc(2, num_tensors=4)),
        "bdst": dkm.allocate_blocks_cache(_desc(4)),
        "host": KvCache.create_cpu_cache(
            _desc(4, placement=Placement.HOST), [int(b.ctypes.data) for b in buffers]
        ),
    }
    stale = dkm.allocate_cache(_desc(2))
    dkm.deallocate_cache(stale)
    caches["stale"] = stale
    _fill(world, caches)
    return Env(world, p, d, caches, buffers)


@pytest.fixture
def env() -> Iterator[Env]:
    e = _env()
    with activate(e.world):
        yield e
    finalize_all(e.world)
    assert e.world.memory.backed_bytes == 0


# -- bad values by kind -------------------------------------------------------------------------------

BadValue = Tuple[str, Any, Type[BaseException]]
_INT_BOUNDS = {
    "uint32": (0, 2**32 - 1),
    "uint64": (0, 2**64 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
}


def bad_values(kind: str) -> List[BadValue]:
    """Wrong values of one kind of parameter and the error type §2.4 documents for each."""
    wrong_types: List[BadValue] = [
        ("a str", "1", TypeError),
        ("a float", 1.5, TypeError),
        ("an object", object(), TypeError),
    ]
    if kind in _INT_BOUNDS:
        low, high = _INT_BOUNDS[kind]
        return [
            *wrong_types,
            ("None", None, TypeError),
            ("below range", low - 1, ValueError),
            ("above range", high + 1, ValueError),
        ]
    if kind == "list[int]":
        return [
            ("a str", "x", TypeError),
            ("a dict", {}, TypeError),
            ("a str item", ["x"], TypeError),
            ("a float item", [1.5], TypeError),
        ]
    if kind == "bool":
        return [("a str", "x", TypeError), ("an int", 1, TypeError)]
    if kind == "dict":
        return [("a list", [], TypeError), ("a str", "x", TypeError)]
    if kind == "str":
        return [("an int", 1, TypeError), ("a list", [], TypeError)]
    if kind == "obj-checked-by-raise_if":  # an isinstance test in raise_if_false: LLMException
        return [(label, value, LLMException) for label, value, _ in wrong_types]
    return wrong_types  # an object kind: any other type


@dataclass
class Method:
    """A public method, how to reach it, valid arguments, and the kind of each checked parameter."""

    name: str
    target: Callable[[Env], Any]
    good: Callable[[Env], Dict[str, Any]]
    kinds: Dict[str, str]
    aliases: Optional[Dict[str, str]] = None
    v1: bool = False
    """The name a message uses for an argument where the real check names it differently."""

    def named(self, exc: BaseException, arg: str) -> bool:
        return _names(exc, (self.aliases or {}).get(arg, arg))


def _dcm(e: Env) -> Any:
    return e.d.cache_manager


def _dd(e: Env) -> Any:
    return e.d


def _dkm(e: Env) -> Any:
    return e.d.kv_cache_manager


def _pkm(e: Env) -> Any:
    return e.p.kv_cache_manager


METHODS = [
    Method(
        "allocate_cache",
        _dcm,
        lambda e: {"cache_desc": _desc(2), "cache_keys": []},
        {"cache_desc": "obj", "cache_keys": "list[CacheKey]"},
    ),
    Method(
        "allocate_blocks_cache",
        _dcm,
        lambda e: {"cache_desc": _desc(2), "blocks_cache_key": None},
        {"cache_desc": "obj", "blocks_cache_key": "obj"},
    ),
    Method("deallocate_cache", _dcm, lambda e: {"cache": e.caches["dst"]}, {"cache": "obj"}),
    Method("deallocate_blocks_cache", _dcm, lambda e: {"cache": e.caches["bdst"]}, {"cache": "obj"}),
    Method("remove_cache_key", _dcm, lambda e: {"cache_key": CacheKey(D_ID, 9)}, {"cache_key": "obj"}),
    Method(
        "register_cache",
        _dcm,
        lambda e: {
            "cache_desc": _desc(1),
            "addrs": [int(b.ctypes.data) for b in e.buffers],
            "cache_keys": [],
            "remote_accessible": None,
        },
        {
            "cache_desc": "obj",
            "addrs": "list[int]",
            "cache_keys": "list[CacheKey]",
            "remote_accessible": "bool",
        },
    ),
    Method(
        "register_blocks_cache",
        _dcm,
        lambda e: {
            "cache_desc": _desc(1),
            "addrs": [int(b.ctypes.data) for b in e.buffers],
            "blocks_cache_key": None,
            "remote_accessible": None,
        },
        {"cache_desc": "obj", "addrs": "list[int]", "blocks_cache_key": "obj", "remote_accessible": "bool"},
    ),
    Method("unregister_cache", _dcm, lambda e: {"cache_id": 99}, {"cache_id": "int64"}),
    Method(
        "pull_cache",
        _dcm,
        lambda e: {
            "cache_key": CacheKey(P_ID, 1),
            "cache": e.caches["dst"],
            "batch_index": 0,
            "size": -1,
            "tensor_num_per_layer": 2,
        },
        {
            "cache_key": "obj",
            "cache": "obj",
            "batch_index": "uint32",
            "size": "int64",
            "tensor_num_per_layer": "uint32",
        },
    ),
    Method(
        "pull_blocks",
        _dcm,
        lambda e: {
            "src_cache_key": BlocksCacheKey(P_ID, 0),
            "dst_cache": e.caches["bdst"],
            "src_blocks": [0],
            "dst_blocks": [1],
            "tensor_num_per_layer": 2,
        },
        {
            "src_cache_key": "obj",
            "dst_cache": "obj",
            "src_blocks": "list[int]",
            "dst_blocks": "list[int]",
            "tensor_num_per_layer": "uint32",
        },
    ),
    Method(
        "copy_cache",
        _dcm,
        lambda e: {
            "dst": e.caches["dst"],
            "src": e.caches["dst2"],
            "dst_batch_index": 0,
            "src_batch_index": 1,
            "offset": 0,
            "size": -1,
            "req_id": None,
        },
        {
            "dst": "obj",
            "src": "obj",
            "dst_batch_index": "uint32",
            "src_batch_index": "uint32",
            "offset": "uint64",
            "size": "int64",
        },
    ),
    Method(
        "copy_blocks",
        _dcm,
        lambda e: {"cache": e.caches["bdst"], "copy_block_info": {0: [1]}},
        {"cache": "obj", "copy_block_info": "dict"},
    ),
    Method(
        "swap_blocks",
        _dcm,
        lambda e: {"src_cache": e.caches["host"], "dst_cache": e.caches["bdst"], "src_to_dst": {0: 1}},
        {"src_cache": "obj", "dst_cache": "obj", "src_to_dst": "dict"},
        aliases={"src_cache": "src", "dst_cache": "dst"},
    ),
    Method(
        "remap_registered_memory",
        _dcm,
        lambda e: {"mem_infos": MemInfo(Memtype.MEM_TYPE_DEVICE, 0x1000, 64)},
        {"mem_infos": "obj-checked-by-raise_if"},
    ),
    Method(
        "link_clusters",
        _dd,
        lambda e: {"clusters": [_info(P_ID)], "timeout": 1000},
        {"clusters": "list[LLMClusterInfo]", "timeout": "int32"},
    ),
    Method(
        "unlink_clusters",
        _dd,
        lambda e: {"clusters": [_info(P_ID)], "timeout": 1000, "force": False},
        {"clusters": "list[LLMClusterInfo]", "timeout": "int32", "force": "bool"},
    ),
    Method(
        "switch_role",
        _dd,
        lambda e: {"role": LLMRole.PROMPT, "switch_options": None},
        {"role": "obj", "switch_options": "dict"},
    ),
    Method(
        "link",
        _dd,
        lambda e: {"comm_name": "c", "cluster_rank_info": {P_ID: 0, D_ID: 1}, "rank_table": "{}"},
        {"comm_name": "str", "cluster_rank_info": "dict", "rank_table": "str"},
    ),
    Method("unlink", _dd, lambda e: {"comm_id": 5}, {"comm_id": "uint64"}),
    Method("query_register_mem_status", _dd, lambda e: {"comm_id": 5}, {"comm_id": "uint64"}),
]

METHODS_V1 = [
    Method(
        "allocate_cache",
        _dkm,
        lambda e: {"cache_desc": _desc(2), "cache_keys": []},
        {"cache_desc": "obj", "cache_keys": "list[CacheKey]"},
        v1=True,
    ),
    Method(
        "allocate_blocks_cache",
        _dkm,
        lambda e: {"cache_desc": _desc(2), "blocks_cache_key": None},
        {"cache_desc": "obj", "blocks_cache_key": "obj"},
        v1=True,
    ),
    Method("deallocate_cache", _dkm, lambda e: {"cache": e.caches["dst"]}, {"cache": "obj"}, v1=True),
    Method(
        "remove_cache_key", _pkm, lambda e: {"cache_key": CacheKey(P_ID, 9)}, {"cache_key": "obj"}, v1=True
    ),
    Method(
        "pull_cache",
        _dkm,
        lambda e: {"cache_key": CacheKey(P_ID, 1), "kv_cache": e.caches["dst"], "batch_index": 0, "size": -1},
        {"cache_key": "obj", "kv_cache": "obj", "batch_index": "uint32", "size": "int64"},
        v1=True,
    ),
    Method(
        "pull_blocks",
        _dkm,
        lambda e: {
            "prompt_cache_key": BlocksCacheKey(P_ID, 0),
            "decoder_kv_cache": e.caches["bdst"],
            "prompt_blocks": [0],
            "decoder_blocks": [1],
            "tensor_num_per_layer": 2,
        },
        {
            "prompt_cache_key": "obj",
            "decoder_kv_cache": "obj",
            "prompt_blocks": "list[int]",
            "decoder_blocks": "list[int]",
            "tensor_num_per_layer": "uint32",
        },
        v1=True,
    ),
    Method(
        "copy_cache",
        _dkm,
        lambda e: {
            "dst": e.caches["dst"],
            "src": e.caches["dst2"],
            "dst_batch_index": 0,
            "src_batch_index": 1,
        },
        {"dst": "obj", "src": "obj", "dst_batch_index": "uint32", "src_batch_index": "uint32"},
        v1=True,
    ),
    Method(
        "copy_blocks",
        _dkm,
        lambda e: {"cache": e.caches["bdst"], "copy_block_info": {0: [1]}},
        {"cache": "obj", "copy_block_info": "dict"},
        v1=True,
    ),
    Method(
        "swap_blocks",
        _dkm,
        lambda e: {"src": e.caches["host"], "dst": e.caches["bdst"], "src_to_dst": {0: 1}},
        {"src": "obj", "dst": "obj", "src_to_dst": "dict"},
        v1=True,
    ),
    Method(
        "get_cache_tensors",
        _dkm,
        lambda e: {"cache": e.caches["dst"], "tensor_index": 0},
        {"cache": "obj", "tensor_index": "int32"},
        v1=True,
    ),
    Method(
        "check_link_status",
        _dd,
        lambda e: {"remote_cluster_id": P_ID},
        {"remote_cluster_id": "uint64"},
        v1=True,
    ),
    Method(
        "link_clusters",
        _dd,
        lambda e: {"clusters": [_info(P_ID)], "timeout": 1000},
        {"clusters": "list[LLMClusterInfo]", "timeout": "int32"},
        v1=True,
    ),
    Method(
        "unlink_clusters",
        _dd,
        lambda e: {"clusters": [_info(P_ID)], "timeout": 1000, "force": False},
        {"clusters": "list[LLMClusterInfo]", "timeout": "int32", "force": "bool"},
        v1=True,
    ),
    Method(
        "switch_role",
        _dd,
        lambda e: {"role": LLMRole.PROMPT, "switch_options": {"llm.listenIpInfo": "192.168.2.1:26009"}},
        {"role": "obj", "switch_options": "dict"},
        v1=True,
    ),
]
ALL_METHODS = METHODS + METHODS_V1

_A, _T = AttributeError, TypeError
NONE_LEAKS: Dict[Tuple[str, str], Type[BaseException]] = {
    ("allocate_cache", "cache_desc"): _A,
    ("allocate_cache", "cache_keys"): _T,
    ("allocate_blocks_cache", "cache_desc"): _A,
    ("deallocate_cache", "cache"): _A,
    ("deallocate_blocks_cache", "cache"): _A,
    ("remove_cache_key", "cache_key"): _A,
    ("register_cache", "cache_desc"): _A,
    ("register_cache", "addrs"): _T,
    ("register_cache", "cache_keys"): _T,
    ("register_blocks_cache", "cache_desc"): _A,
    ("register_blocks_cache", "addrs"): _T,
    ("pull_cache", "cache_key"): _A,
    ("pull_cache", "cache"): _A,
    ("pull_blocks", "dst_cache"): _A,
    ("pull_blocks", "dst_blocks"): _T,
    ("copy_cache", "dst"): _A,
    ("copy_cache", "src"): _A,
    ("copy_blocks", "cache"): _A,
    ("copy_blocks", "copy_block_info"): _A,
    ("swap_blocks", "src_cache"): _A,
    ("swap_blocks", "dst_cache"): _A,
    ("swap_blocks", "src_to_dst"): _A,
    ("link_clusters", "clusters"): _T,
    ("unlink_clusters", "clusters"): _T,
    ("switch_role", "role"): KeyError,
    ("link", "cluster_rank_info"): _A,
    ("link", "rank_table"): _T,
}
NONE_LEAKS_V1: Dict[Tuple[str, str], Type[BaseException]] = {
    ("allocate_cache", "cache_desc"): _A,
    ("allocate_cache", "cache_keys"): _T,
    ("allocate_blocks_cache", "cache_desc"): _A,
    ("deallocate_cache", "cache"): _A,
    ("remove_cache_key", "cache_key"): _A,
    ("pull_cache", "cache_key"): _A,
    ("pull_cache", "kv_cache"): _A,
    ("pull_blocks", "prompt_cache_key"): _A,
    ("pull_blocks", "decoder_kv_cache"): _A,
    ("pull_blocks", "prompt_blocks"): _T,
    ("pull_blocks", "decoder_blocks"): _T,
    ("copy_cache", "dst"): _A,
    ("copy_cache", "src"): _A,
    ("copy_blocks", "cache"): _A,
    ("copy_blocks", "copy_block_info"): _A,
    ("swap_blocks", "src"): _A,
    ("swap_blocks", "dst"): _A,
    ("swap_blocks", "src_to_dst"): _A,
    ("get_cache_tensors", "cache"): _A,
    ("link_clusters", "clusters"): _T,
    ("unlink_clusters", "clusters"): _T,
    ("switch_role", "role"): _A,  # the real v1 formats f"... {role.name}" before the check runs
    ("switch_role", "switch_options"): _T,  # the real v1 tests 'llm.listenIpInfo' in switch_options
}
"""Where ``None`` passes the real type check and the real code then fails on it without naming it."""


def _call(e: Env, method: Method, kwargs: Dict[str, Any]) -> Optional[BaseException]:
    try:
        getattr(method.target(e), method.name)(**kwargs)
    except Exception as exc:  # the type is what is being checked
        return exc
    return None


_GOOD = object()


def _call_fresh(method: Method, arg: str, value: Any) -> Tuple[Optional[BaseException], bool]:
    """Call on a fresh pair with ``arg=value`` (the good value for ``_GOOD``); did the world change?"""
    fresh = _env(method.v1)
    with activate(fresh.world):
        before = fresh.state()
        kwargs = method.good(fresh)
        if value is not _GOOD:
            kwargs[arg] = value
        exc = _call(fresh, method, kwargs)
        changed = fresh.state() != before
        finalize_all(fresh.world)
    return exc, changed


def _names(exc: BaseException, arg: str) -> bool:
    text = str(exc)
    return arg in text or arg.replace("_", " ") in text


def _id(method: Method) -> str:
    return f"{'v1' if method.v1 else 'v2'}-{method.name}"


@pytest.mark.parametrize("method", ALL_METHODS, ids=_id)
def test_wrong_types_and_out_of_range_values(method: Method) -> None:
    env = _env(method.v1)
    with activate(env.world):
        _wrong_types(env, method)
    finalize_all(env.world)
    assert env.world.memory.backed_bytes == 0


def _wrong_types(env: Env, method: Method) -> None:
    problems: List[str] = []
    before = env.state()
    for arg, kind in method.kinds.items():
        for label, value, want in bad_values(kind):
            kwargs = {**method.good(env), arg: value}
            exc = _call(env, method, kwargs)
            STATS["bad inputs tried"] += 1
            where = f"{method.name}({arg}={label})"
            if type(exc) is not want:
                problems.append(f"{where}: {type(exc).__name__}: {exc} (want {want.__name__})")
            elif not method.named(exc, arg):
                problems.append(f"{where}: message does not name {arg!r}: {exc}")
            if env.state() != before:
                problems.append(f"{where}: the world changed")
                before = env.state()
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("method", ALL_METHODS, ids=_id)
def test_none_for_each_argument(method: Method) -> None:
    """``None`` is rejected with a ``TypeError`` naming the argument, accepted where the argument is
    optional, or (``NONE_LEAKS``) fails as the real code does; the world never changes."""
    problems: List[str] = []
    for arg, kind in method.kinds.items():
        if kind in _INT_BOUNDS:
            continue  # covered above: None is a TypeError of the range check
        exc, changed = _call_fresh(method, arg, None)
        good, _ = _call_fresh(method, arg, _GOOD)
        STATS["bad inputs tried"] += 1
        where = f"{method.name}({arg}=None)"
        if type(exc) is type(good) and getattr(exc, "status_code", None) == getattr(
            good, "status_code", None
        ):
            continue  # an optional argument: None is a valid value, and the call did what a good call does
        if changed:
            problems.append(f"{where}: the world changed")
        leaks = NONE_LEAKS_V1 if method.v1 else NONE_LEAKS
        if (method.name, arg) in leaks:
            want = leaks[(method.name, arg)]
            if type(exc) is not want:
                problems.append(f"{where}: {type(exc).__name__}: {exc} (want the real {want.__name__})")
        elif not (isinstance(exc, (TypeError, LLMException)) and method.named(exc, arg)):
            problems.append(f"{where}: {type(exc).__name__}: {exc}")
    assert not problems, "\n".join(problems)


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
    return [_info(100 + i) for i in range(n)]


_E, _PI, _NE = LLMException, S.LLM_PARAM_INVALID, S.LLM_KV_CACHE_NOT_EXIST
CASES = [
    # empty and oversized lists
    Case(
        "pull_blocks: empty dst_blocks",
        lambda e: _dcm(e).pull_blocks(BlocksCacheKey(P_ID, 0), e.caches["bdst"], [0], []),
        _E,
        _PI,
        "dst_blocks",
    ),
    Case(
        "pull_blocks: BlocksCacheKey, empty src_blocks",
        lambda e: _dcm(e).pull_blocks(BlocksCacheKey(P_ID, 0), e.caches["bdst"], [], [0]),
        _E,
        _PI,
        "src_blocks",
    ),
    Case(
        "pull_blocks: src/dst block lists differ in length",
        lambda e: _dcm(e).pull_blocks(BlocksCacheKey(P_ID, 0), e.caches["bdst"], [0], [0, 1]),
        _E,
        _PI,
        "src blocks",
    ),
    Case(
        "allocate_cache: more keys than batches",
        lambda e: _dcm(e).allocate_cache(_desc(2), _keys(3)),
        _E,
        _PI,
        "cache keys",
    ),
    Case(
        "allocate_cache: duplicate keys",
        lambda e: _dcm(e).allocate_cache(_desc(2), [CacheKey(D_ID, 1), CacheKey(D_ID, 1)]),
        _E,
        _PI,
        "cache_keys",
    ),
    Case(
        "allocate_cache: repeated placeholders",
        lambda e: _dcm(e).allocate_cache(_desc(2), [CacheKey(D_ID, PAD), CacheKey(D_ID, PAD)]),
        _E,
        _PI,
        "cache_keys",
    ),
    Case(
        "allocate_cache: key bound to a live cache",
        lambda e: e.p.cache_manager.allocate_cache(_desc(2), [CacheKey(P_ID, 1)]),
        _E,
        _PI,
        "cache key",
    ),
    Case(
        "allocate_cache: larger than the pool",
        lambda e: _dcm(e).allocate_cache(_desc(4096)),
        _E,
        S.LLM_OUT_OF_MEMORY,
        "allocate",
    ),
    Case(
        "allocate_blocks_cache: blocks key bound",
        lambda e: e.p.cache_manager.allocate_blocks_cache(_desc(2), BlocksCacheKey(P_ID, 0)),
        _E,
        _PI,
        "key",
    ),
    Case("register_cache: empty addrs", lambda e: _dcm(e).register_cache(_desc(1), []), _E, _PI, "addrs"),
    Case(
        "register_cache: addrs shorter than num_tensors",
        lambda e: _dcm(e).register_cache(_desc(1), [int(e.buffers[0].ctypes.data)]),
        _E,
        _PI,
        "addrs",
    ),
    Case(
        "register_cache: a zero address", lambda e: _dcm(e).register_cache(_desc(1), [0, 1]), _E, _PI, "addr"
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
    Case("link_clusters: timeout 0", lambda e: e.d.link_clusters([_info(P_ID)], 0), _E, _PI, "timeout"),
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
        lambda e: _dcm(e).pull_cache(CacheKey(P_ID, 1), e.caches["wide"]),
        _E,
        _PI,
        "num_tensors",
    ),
    Case(
        "pull_cache: batch_index past the destination",
        lambda e: _dcm(e).pull_cache(CacheKey(P_ID, 1), e.caches["dst"], 5),
        _E,
        _PI,
        "batch_index",
    ),
    Case(
        "pull_cache: blocks destination",
        lambda e: _dcm(e).pull_cache(CacheKey(P_ID, 1), e.caches["bdst"]),
        _E,
        _PI,
        "cache",
    ),
    Case(
        "pull_cache: size 0",
        lambda e: _dcm(e).pull_cache(CacheKey(P_ID, 1), e.caches["dst"], 0, 0),
        _E,
        _PI,
        "size",
    ),
    Case(
        "pull_cache: size past the batch",
        lambda e: _dcm(e).pull_cache(CacheKey(P_ID, 1), e.caches["dst"], 0, 1 << 20),
        _E,
        _PI,
        "size",
    ),
    Case(
        "pull_cache: both req_id and prefix_id",
        lambda e: _dcm(e).pull_cache(CacheKey(P_ID, 1, 0, 3), e.caches["dst"]),
        _E,
        _PI,
        "req id",
    ),
    Case(
        "pull_cache: from own cluster",
        lambda e: _dcm(e).pull_cache(CacheKey(D_ID, 1), e.caches["dst"]),
        _E,
        _PI,
        "own cluster",
    ),
    Case(
        "pull_cache: by id, batch past the source",
        lambda e: _dcm(e).pull_cache(
            CacheKeyByIdAndIndex(P_ID, e.caches["src"].cache_id, 7), e.caches["dst"]
        ),
        _E,
        _NE,
        "batch_index",
    ),
    Case(
        "pull_blocks: block index past the destination",
        lambda e: _dcm(e).pull_blocks(BlocksCacheKey(P_ID, 0), e.caches["bdst"], [0], [9]),
        _E,
        _PI,
        "block",
    ),
    Case(
        "pull_blocks: block index past the source",
        lambda e: _dcm(e).pull_blocks(BlocksCacheKey(P_ID, 0), e.caches["bdst"], [9], [0]),
        _E,
        _PI,
        "block",
    ),
    Case(
        "copy_cache: num_tensors differ",
        lambda e: _dcm(e).copy_cache(e.caches["wide"], e.caches["dst"]),
        _E,
        _PI,
        "num_tensors",
    ),
    Case(
        "copy_cache: batch index out of range",
        lambda e: _dcm(e).copy_cache(e.caches["dst"], e.caches["dst2"], 5),
        _E,
        _PI,
        "batch",
    ),
    Case(
        "copy_cache: size past the batch",
        lambda e: _dcm(e).copy_cache(e.caches["dst"], e.caches["dst2"], 0, 0, 0, 1 << 20),
        _E,
        _PI,
        "size",
    ),
    Case(
        "copy_blocks: block out of range",
        lambda e: _dcm(e).copy_blocks(e.caches["bdst"], {0: [9]}),
        _E,
        _PI,
        "block",
    ),
    Case(
        "swap_blocks: block sizes differ",
        lambda e: _dcm(e).swap_blocks(e.caches["bwide"], e.caches["bdst"], {0: 1}),
        _E,
        _PI,
        "block size",
    ),
    Case(
        "swap_blocks: device to device",
        lambda e: _dcm(e).swap_blocks(e.caches["bdst"], e.caches["bdst"], {0: 1}),
        _E,
        _PI,
        "placement",
    ),
    Case(
        "swap_blocks: index out of range",
        lambda e: _dcm(e).swap_blocks(e.caches["host"], e.caches["bdst"], {0: 9}),
        _E,
        _PI,
        "dst_block_index",
    ),
    # stale caches
    Case(
        "pull_cache into a deallocated cache",
        lambda e: _dcm(e).pull_cache(CacheKey(P_ID, 1), e.caches["stale"]),
        _E,
        _NE,
        "cache",
    ),
    Case(
        "pull_blocks into a deallocated blocks cache",
        lambda e: _dcm(e).pull_blocks(BlocksCacheKey(P_ID, 0), e.caches["stale_blocks"], [0], [0]),
        _E,
        _NE,
        "cache",
    ),
    Case(
        "copy_cache from a deallocated cache",
        lambda e: _dcm(e).copy_cache(e.caches["dst"], e.caches["stale"]),
        _E,
        _NE,
        "cache",
    ),
    Case(
        "copy_blocks in a deallocated blocks cache",
        lambda e: _dcm(e).copy_blocks(e.caches["stale_blocks"], {0: [1]}),
        _E,
        _NE,
        "cache",
    ),
    Case(
        "deallocate_cache twice (a no-op, §7.1)", lambda e: _dcm(e).deallocate_cache(e.caches["stale"]), None
    ),
    Case(
        "deallocate_blocks_cache twice (a no-op)",
        lambda e: _dcm(e).deallocate_blocks_cache(e.caches["stale_blocks"]),
        None,
    ),
    Case(
        "pull_cache by id of a freed cache",
        lambda e: _dcm(e).pull_cache(CacheKeyByIdAndIndex(D_ID - 1, 99), e.caches["dst"]),
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
        if case.code is not None:
            assert info.value.status_code is case.code  # type: ignore[attr-defined]
        assert _names(info.value, case.names), str(info.value)
    assert env.state() == before, "the world changed"


def test_a_finalized_instance_and_its_stale_handles(env: Env) -> None:
    """After ``finalize``: the instance raises the real RuntimeError, its old manager and caches are
    refused with an LLMException, and nothing changes."""
    old = env.d.cache_manager
    env.d.finalize()
    before = env.state()
    with pytest.raises(RuntimeError, match="llm datadist is not initialized"):
        env.d.link_clusters([_info(P_ID)])
    with pytest.raises(RuntimeError, match="llm datadist is not initialized"):
        env.d.cache_manager  # noqa: B018
    with pytest.raises(RuntimeError, match="llm datadist is not initialized"):
        env.d.switch_role(LLMRole.PROMPT)
    for call in (
        lambda: old.allocate_cache(_desc(1)),
        lambda: old.pull_cache(CacheKey(P_ID, 1), env.caches["dst"]),
        lambda: old.copy_cache(env.caches["dst"], env.caches["dst2"]),
        lambda: old.deallocate_cache(env.caches["dst"]),
    ):
        with pytest.raises(LLMException) as info:
            call()
        assert info.value.status_code is S.LLM_FAILED
        STATS["bad inputs tried"] += 1
    env.d.finalize()  # a second finalize is a no-op
    assert env.state() == before
    with pytest.raises(LLMException) as info:
        env.p.cache_manager.pull_cache(CacheKey(D_ID, 1), env.caches["src"])
    assert info.value.status_code is S.LLM_NOT_YET_LINK, "a finalized peer's link is gone"


_V2 = {"ge.exec.deviceId": "0", "llm.EnableCacheManager": "1"}


@dataclass
class InitCase:
    """``LLMDataDist(role, cluster_id).init(options)`` with one thing wrong."""

    label: str
    cluster_id: Any
    options: Any
    want: Type[BaseException]
    code: Optional[LLMStatusCode] = None
    names: str = ""
    role: Any = LLMRole.DECODER


INIT_CASES = [
    InitCase("cluster_id a str", "3", dict(_V2), TypeError, names="cluster_id"),
    InitCase("cluster_id negative", -1, dict(_V2), ValueError, names="cluster_id"),
    InitCase("cluster_id past uint64", 2**64, dict(_V2), ValueError, names="cluster_id"),
    InitCase("role an int", 3, dict(_V2), TypeError, names="role", role=2),
    InitCase("options a list", 3, [], TypeError, names="options"),
    InitCase(
        "flowGraphMemMaxSize not digits",
        3,
        {"ge.flowGraphMemMaxSize": "1G"},
        LLMException,
        _PI,
        "flowGraphMemMaxSize",
    ),
    InitCase(
        "flowGraphMemMaxSize two pools",
        3,
        {"ge.flowGraphMemMaxSize": "1,2"},
        LLMException,
        _PI,
        "flowGraphMemMaxSize",
    ),
    InitCase(
        "listenIpInfo without a port",
        3,
        {**_V2, "llm.listenIpInfo": "192.168.9.9"},
        LLMException,
        _PI,
        "listenIpInfo",
    ),
    InitCase(
        "MemPoolConfig not JSON",
        3,
        {**_V2, "llm.MemPoolConfig": "{"},
        LLMException,
        _PI,
        "memory pool config",
    ),
    InitCase(
        "MemPoolConfig page_shift 40",
        3,
        {**_V2, "llm.MemPoolConfig": '{"memory_size": 1048576, "page_shift": 40}'},
        LLMException,
        _PI,
        "page_shift",
    ),
    InitCase(
        "MemPoolConfig memory_size 0",
        3,
        {**_V2, "llm.MemPoolConfig": '{"memory_size": 0}'},
        LLMException,
        _PI,
        "memory_size",
    ),
    InitCase("cluster id already in the world", P_ID, dict(_V2), LLMException, _PI, "cluster_id"),
    InitCase(
        "listen endpoint in use",
        3,
        {**_V2, "llm.listenIpInfo": f"192.168.1.1:{26000 + P_ID}"},
        LLMException,
        S.LLM_FAILED,
        "in use",
    ),
    InitCase(
        "TransferBackend without the cache manager",
        3,
        {"ge.exec.deviceId": "0", "llm.TransferBackend": "x"},
        LLMException,
        _PI,
        "TransferBackend",
    ),
]


@pytest.mark.parametrize("case", INIT_CASES, ids=lambda c: c.label)
def test_bad_init(env: Env, case: InitCase) -> None:
    """A failed ``init`` leaves no instance, no listener and no pool behind; the same object can then
    ``init`` properly (where its constructor arguments were good)."""
    before = env.state()
    STATS["bad inputs tried"] += 1
    made: List[LLMDataDist] = []

    def attempt() -> None:
        made.append(LLMDataDist(case.role, case.cluster_id))
        made[0].init(case.options)

    with pytest.raises(case.want) as info:
        attempt()
    if case.code is not None:
        assert info.value.status_code is case.code  # type: ignore[attr-defined]
    assert _names(info.value, case.names), str(info.value)
    assert env.state() == before, "the world changed"
    if made and case.cluster_id == 3:
        made[0].init(dict(_V2))
        assert env.world.node(3) is not None
        made[0].finalize()
        assert env.state() == before
