"""Every public method of both managers and of ``LLMDataDist``: how to reach it, valid arguments, the kind
of each checked parameter, the wrong values of each kind with the error type reference §2.4 documents,
and where ``None`` passes the real check and then fails unnamed (``NONE_LEAKS``), as in the real code."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple, Type

from tests.reliability._bad_env import D_ID, P_ID, Env, cache_desc_of, names_arg
from tests.reliability._common import link_info

from datadist_sim.llm_datadist.configs import LLMRole
from datadist_sim.llm_datadist.status import LLMException, LLMStatusCode
from datadist_sim.llm_datadist.v2.llm_types import (
    BlocksCacheKey,
    CacheKey,
    MemInfo,
    Memtype,
)

S = LLMStatusCode

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
        return names_arg(exc, (self.aliases or {}).get(arg, arg))


def v2_manager(e: Env) -> Any:
    return e.d.cache_manager


def decoder(e: Env) -> Any:
    return e.d


def v1_manager(e: Env) -> Any:
    return e.d.kv_cache_manager


def v1_prompt_manager(e: Env) -> Any:
    return e.p.kv_cache_manager


METHODS = [
    Method(
        "allocate_cache",
        v2_manager,
        lambda e: {"cache_desc": cache_desc_of(2), "cache_keys": []},
        {"cache_desc": "obj", "cache_keys": "list[CacheKey]"},
    ),
    Method(
        "allocate_blocks_cache",
        v2_manager,
        lambda e: {"cache_desc": cache_desc_of(2), "blocks_cache_key": None},
        {"cache_desc": "obj", "blocks_cache_key": "obj"},
    ),
    Method("deallocate_cache", v2_manager, lambda e: {"cache": e.caches["dst"]}, {"cache": "obj"}),
    Method("deallocate_blocks_cache", v2_manager, lambda e: {"cache": e.caches["bdst"]}, {"cache": "obj"}),
    Method("remove_cache_key", v2_manager, lambda e: {"cache_key": CacheKey(D_ID, 9)}, {"cache_key": "obj"}),
    Method(
        "register_cache",
        v2_manager,
        lambda e: {
            "cache_desc": cache_desc_of(1),
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
        v2_manager,
        lambda e: {
            "cache_desc": cache_desc_of(1),
            "addrs": [int(b.ctypes.data) for b in e.buffers],
            "blocks_cache_key": None,
            "remote_accessible": None,
        },
        {"cache_desc": "obj", "addrs": "list[int]", "blocks_cache_key": "obj", "remote_accessible": "bool"},
    ),
    Method("unregister_cache", v2_manager, lambda e: {"cache_id": 99}, {"cache_id": "int64"}),
    Method(
        "pull_cache",
        v2_manager,
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
        v2_manager,
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
        v2_manager,
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
        v2_manager,
        lambda e: {"cache": e.caches["bdst"], "copy_block_info": {0: [1]}},
        {"cache": "obj", "copy_block_info": "dict"},
    ),
    Method(
        "swap_blocks",
        v2_manager,
        lambda e: {"src_cache": e.caches["host"], "dst_cache": e.caches["bdst"], "src_to_dst": {0: 1}},
        {"src_cache": "obj", "dst_cache": "obj", "src_to_dst": "dict"},
        aliases={"src_cache": "src", "dst_cache": "dst"},
    ),
    Method(
        "remap_registered_memory",
        v2_manager,
        lambda e: {"mem_infos": MemInfo(Memtype.MEM_TYPE_DEVICE, 0x1000, 64)},
        {"mem_infos": "obj-checked-by-raise_if"},
    ),
    Method(
        "link_clusters",
        decoder,
        lambda e: {"clusters": [link_info(P_ID)], "timeout": 1000},
        {"clusters": "list[LLMClusterInfo]", "timeout": "int32"},
    ),
    Method(
        "unlink_clusters",
        decoder,
        lambda e: {"clusters": [link_info(P_ID)], "timeout": 1000, "force": False},
        {"clusters": "list[LLMClusterInfo]", "timeout": "int32", "force": "bool"},
    ),
    Method(
        "switch_role",
        decoder,
        lambda e: {"role": LLMRole.PROMPT, "switch_options": None},
        {"role": "obj", "switch_options": "dict"},
    ),
    Method(
        "link",
        decoder,
        lambda e: {"comm_name": "c", "cluster_rank_info": {P_ID: 0, D_ID: 1}, "rank_table": "{}"},
        {"comm_name": "str", "cluster_rank_info": "dict", "rank_table": "str"},
    ),
    Method("unlink", decoder, lambda e: {"comm_id": 5}, {"comm_id": "uint64"}),
    Method("query_register_mem_status", decoder, lambda e: {"comm_id": 5}, {"comm_id": "uint64"}),
]

METHODS_V1 = [
    Method(
        "allocate_cache",
        v1_manager,
        lambda e: {"cache_desc": cache_desc_of(2), "cache_keys": []},
        {"cache_desc": "obj", "cache_keys": "list[CacheKey]"},
        v1=True,
    ),
    Method(
        "allocate_blocks_cache",
        v1_manager,
        lambda e: {"cache_desc": cache_desc_of(2), "blocks_cache_key": None},
        {"cache_desc": "obj", "blocks_cache_key": "obj"},
        v1=True,
    ),
    Method("deallocate_cache", v1_manager, lambda e: {"cache": e.caches["dst"]}, {"cache": "obj"}, v1=True),
    Method(
        "remove_cache_key",
        v1_prompt_manager,
        lambda e: {"cache_key": CacheKey(P_ID, 9)},
        {"cache_key": "obj"},
        v1=True,
    ),
    Method(
        "pull_cache",
        v1_manager,
        lambda e: {"cache_key": CacheKey(P_ID, 1), "kv_cache": e.caches["dst"], "batch_index": 0, "size": -1},
        {"cache_key": "obj", "kv_cache": "obj", "batch_index": "uint32", "size": "int64"},
        v1=True,
    ),
    Method(
        "pull_blocks",
        v1_manager,
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
        v1_manager,
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
        v1_manager,
        lambda e: {"cache": e.caches["bdst"], "copy_block_info": {0: [1]}},
        {"cache": "obj", "copy_block_info": "dict"},
        v1=True,
    ),
    Method(
        "swap_blocks",
        v1_manager,
        lambda e: {"src": e.caches["host"], "dst": e.caches["bdst"], "src_to_dst": {0: 1}},
        {"src": "obj", "dst": "obj", "src_to_dst": "dict"},
        v1=True,
    ),
    Method(
        "get_cache_tensors",
        v1_manager,
        lambda e: {"cache": e.caches["dst"], "tensor_index": 0},
        {"cache": "obj", "tensor_index": "int32"},
        v1=True,
    ),
    Method(
        "check_link_status",
        decoder,
        lambda e: {"remote_cluster_id": P_ID},
        {"remote_cluster_id": "uint64"},
        v1=True,
    ),
    Method(
        "link_clusters",
        decoder,
        lambda e: {"clusters": [link_info(P_ID)], "timeout": 1000},
        {"clusters": "list[LLMClusterInfo]", "timeout": "int32"},
        v1=True,
    ),
    Method(
        "unlink_clusters",
        decoder,
        lambda e: {"clusters": [link_info(P_ID)], "timeout": 1000, "force": False},
        {"clusters": "list[LLMClusterInfo]", "timeout": "int32", "force": "bool"},
        v1=True,
    ),
    Method(
        "switch_role",
        decoder,
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
