"""The codes each public operation of the real library can give, per engine mode: the fault model.

A fault rule may only make a call give a code the real engine could give it in the caller's mode, or a
correct client fails on an outcome that cannot happen (a false alarm) and learns to ignore the tool.
This module is the one table of those codes; ``Fault`` checks its codes against it, and explore, the
hypothesis strategies, the bundled scenarios and the error-path coverage all read it.

Four modes (``EngineMode``):

- ``v2``: ``llm_datadist`` with ``llm.EnableCacheManager`` (hixl's C++ engine, ``LLMDataDistV2``), the
  default (HCCL) transfer backend;
- ``hixl``: the same with ``llm.TransferBackend = "hixl"`` (``HixlTransferEngine``);
- ``v2-kv``: ``llm_datadist``'s ``LLMDataDist`` in KvCacheManager mode, which builds GE's v1 engine
  (hixl ``src/python/llm_datadist/llm_datadist/v2/llm_datadist.py:112-125``);
- ``v1``: the ``llm_datadist_v1`` package, GE's engine itself.

``v2-kv`` and ``v1`` run the same engine (GE's flow functions behind GE's ``llm_wrapper``), so their rows
are the same; only the exception class differs (``_status_v1``). Each row gives its source (file:line of
hicann/hixl at 9ed283b, ``GE`` = hicann/ge at ffdcbc9f7); docs/vendor_facts.md, "Codes each operation can
give, per mode", explains them. Two facts shape every row: the Python layer maps any engine status it
does not know (a raw ACL or HCCL error) to ``LLM_FAILED`` (hixl ``status.py:103-104``, GE
``status.py`` ``code_2_status``), and argument checks raise ``LLM_PARAM_INVALID`` (``raise_if_false``).

Each row orders its codes: the first is the one a systematic fault pass injects. ``args_only`` are the
codes only a bad argument or a call in the wrong mode gets: a correct client never meets them, so the
fault searches (``fault_codes``) leave them out, while a user's own ``Fault.fail`` may still name them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Dict, FrozenSet, Iterable, Optional, Protocol, Tuple, Union

from datadist_sim._status import LLMStatusCode

__all__ = [
    "CodeRow",
    "EngineMode",
    "OPS",
    "check_code",
    "codes_for",
    "describe",
    "fault_codes",
    "mode_of",
    "modes",
    "modes_giving",
    "row",
    "timeout_code",
    "to_mode",
    "trace_modes",
]


class EngineMode(str, Enum):
    """The engine a call runs on; the value is how reports, scenario files and explore name it."""

    V2 = "v2"
    HIXL = "hixl"
    V2_KV = "v2-kv"
    V1 = "v1"

    def __str__(self) -> str:
        return self.value


Mode = EngineMode
"""Short name of ``EngineMode``."""

_C = LLMStatusCode
FAILED = _C.LLM_FAILED
PARAM = _C.LLM_PARAM_INVALID


@dataclass(frozen=True)
class CodeRow:
    """What one operation can give in one mode."""

    op: str
    mode: EngineMode
    codes: Tuple[LLMStatusCode, ...]
    """Every code the real library can return or raise for this call, the systematic pass's first."""
    args_only: FrozenSet[LLMStatusCode]
    """The codes of ``codes`` that only a bad argument or the wrong mode gets."""
    timeout: Optional[LLMStatusCode]
    """The code the call gives when it times out in this mode; None: it has no timeout to run out."""
    source: str
    """Where the codes come from (vendor file:line)."""
    silent: str = ""
    """What the source leaves open, if anything."""

    @property
    def fault_codes(self) -> Tuple[LLMStatusCode, ...]:
        """The codes a correct client can meet here, in order: what fault searches draw from."""
        return tuple(code for code in self.codes if code not in self.args_only)


# -- the rows -------------------------------------------------------------------------------------

_Spec = Tuple[Tuple[LLMStatusCode, ...], Tuple[LLMStatusCode, ...], Optional[LLMStatusCode], str, str]
"""(codes, args_only, timeout code, source, what the source leaves open)."""


def _r(
    codes: Tuple[LLMStatusCode, ...],
    args_only: Tuple[LLMStatusCode, ...] = (PARAM,),
    timeout: Optional[LLMStatusCode] = None,
    source: str = "",
    silent: str = "",
) -> _Spec:
    return codes, tuple(c for c in args_only if c in codes), timeout, source, silent


_NONE = _r((), (), None, "no such method on this mode's manager (AttributeError)")
_CM_ONLY = _r(
    (PARAM,),
    source="llm_datadist.py:129-141: a CacheManager-only call in KvCacheManager mode is LLM_PARAM_INVALID",
)
_KV_ONLY = _r(
    (PARAM,),
    source="llm_datadist.py:136-141 (check_link_status, line 249-252): KvCacheManager-only call in "
    "CacheManager mode is LLM_PARAM_INVALID",
)

_V2_PULL = _r(
    (
        _C.LLM_TIMEOUT,
        _C.LLM_NOT_YET_LINK,
        _C.LLM_KV_CACHE_NOT_EXIST,
        _C.LLM_SUSPECT_REMOTE_ERROR,
        _C.LLM_DEVICE_MEM_ERROR,
        FAILED,
        PARAM,
    ),
    timeout=_C.LLM_TIMEOUT,
    source="data_cache_engine.cc:132-178 (local cache LLM_KV_CACHE_NOT_EXIST :137, no/destroyed/unready "
    "entity LLM_NOT_YET_LINK :142-152); comm_entity.cc:536-556 (stream sync: ACL timeout -> LLM_TIMEOUT, "
    "llm_log.h:154-157; other ACL errors pass through, the UCE ones named by llm_wrapper_v2.cc:58-59); "
    "data_transfer_client.cc:199 LLM_TIMEOUT; fsm/send_state.cc:155-225 the Prompt's key missing "
    "LLM_KV_CACHE_NOT_EXIST; llm_datadist_v2.cc:218-247 and cache_manager.py:215-312 argument checks",
)
_V2_PUSH = _r(
    _V2_PULL[0],
    timeout=_C.LLM_TIMEOUT,
    source="cache_manager.py:509-600 (push needs remote cache access, :530); data_cache_engine.cc "
    "TransferCache :453-470 (LLM_KV_CACHE_NOT_EXIST, LLM_NOT_YET_LINK); layer_wise_transfer_job.cc:161 "
    "LLM_TIMEOUT; comm_entity.cc:536-556 stream sync as for a pull",
)
_V2_TASK = _r(
    (
        _C.LLM_TIMEOUT,
        _C.LLM_NOT_YET_LINK,
        _C.LLM_KV_CACHE_NOT_EXIST,
        _C.LLM_SUSPECT_REMOTE_ERROR,
        _C.LLM_DEVICE_MEM_ERROR,
        FAILED,
        PARAM,
    ),
    timeout=_C.LLM_TIMEOUT,
    source="v2/llm_utils.py:250-273 (a task not done in time is LLM_TIMEOUT, else the first failed "
    "result), :178 a bad config LLM_PARAM_INVALID; data_cache_engine.cc:453-470",
)
_V2_LOCAL = _r(
    (_C.LLM_KV_CACHE_NOT_EXIST, FAILED, PARAM),
    args_only=(PARAM,),
    source="cache_manager.cc:417-419 (copy: an unknown cache LLM_KV_CACHE_NOT_EXIST); "
    "data_cache_engine.cc:84 (swap), :367-370 (copy: ACL errors -> LLM_FAILED); cache_manager.py:127-182, "
    "435-487 argument checks",
)

_KV_TRANSFER = _r(
    (
        _C.LLM_WAIT_PROCESS_TIMEOUT,
        _C.LLM_KV_CACHE_NOT_EXIST,
        _C.LLM_NOT_YET_LINK,
        _C.LLM_LINK_BUSY,
        _C.LLM_SUSPECT_REMOTE_ERROR,
        _C.LLM_DEVICE_MEM_ERROR,
        FAILED,
        PARAM,
    ),
    timeout=_C.LLM_WAIT_PROCESS_TIMEOUT,
    source="GE llm_flow_service.cc:135-187, 937-970 (feed/fetch past the timeout LLM_WAIT_PROC_TIMEOUT); "
    "GE udf fsm/send_state.cpp:183-273 (the Prompt's key missing kFsmKvNotExist = LLM_KV_CACHE_NOT_EXIST); "
    "GE udf cluster_manager.cpp:162-184 (no link kFsmNotLink = LLM_NOT_YET_LINK); GE udf "
    "llm_comm_entity.cpp:737-755 (unlink running or link occupied kFsmLinkBusy = LLM_LINK_BUSY); "
    "GE fsm/state_define.h:25-66 (FsmStatus n is code 0x5010B000 + n)",
    silent="no v1 path is seen to produce the UCE codes; GE's wrapper names them as the runtime's raw "
    "errors (api/python/llm_wrapper/llm_wrapper.cc:74-75, status.py:94-95), so a UCE the runtime reports "
    "reaches the client as them, and they are kept",
)
_KV_TASK = _r(
    (
        _C.LLM_WAIT_PROCESS_TIMEOUT,
        _C.LLM_KV_CACHE_NOT_EXIST,
        _C.LLM_NOT_YET_LINK,
        _C.LLM_SUSPECT_REMOTE_ERROR,
        _C.LLM_DEVICE_MEM_ERROR,
        FAILED,
        PARAM,
    ),
    timeout=_C.LLM_WAIT_PROCESS_TIMEOUT,
    source="GE kv_cache_manager.py:633-657 (the task's wait gives LLM_WAIT_PROCESS_TIMEOUT while the "
    "transfer runs; llm_utils.py:403-439 else the first failed result); the transfer's own codes as for "
    "pull_cache",
)
_KV_ALLOC = _r(
    (_C.LLM_DEVICE_OUT_OF_MEMORY, _C.LLM_WAIT_PROCESS_TIMEOUT, FAILED, PARAM),
    timeout=_C.LLM_WAIT_PROCESS_TIMEOUT,
    source="GE udf llm_common/cache_manager.cpp:60-69 (no tensor memory kFsmOutOfMemory = "
    "LLM_DEVICE_OUT_OF_MEMORY); GE llm_flow_service.cc:135-187 (flow call past the timeout); "
    "GE kv_cache_manager.py argument checks",
)
_KV_LOCAL = _r(
    (_C.LLM_KV_CACHE_NOT_EXIST, _C.LLM_WAIT_PROCESS_TIMEOUT, FAILED, PARAM),
    timeout=_C.LLM_WAIT_PROCESS_TIMEOUT,
    source="GE common/cache_engine.cc:50-182 (an unknown cache id LLM_KV_CACHE_NOT_EXIST); GE "
    "llm_flow_service.cc:135-187 (flow call past the timeout)",
)
_KV_SWAP = _r(
    (_C.LLM_DEVICE_OUT_OF_MEMORY, _C.LLM_KV_CACHE_NOT_EXIST, FAILED, PARAM),
    source="GE common/swap_impl.cc:216 (no staging buffer LLM_DEVICE_OUT_OF_MEMORY); GE "
    "common/cache_engine.cc:182",
)

_SPECS: Dict[str, Dict[str, _Spec]] = {
    # -- LLMDataDist ------------------------------------------------------------------------------
    "init": {
        "v2": _r(
            (FAILED, PARAM),
            source="llm_datadist.py:82-127 (a second instance LLM_FAILED :91-95, option checks); "
            "llm_datadist_v2.cc:22-95 engine start (ACL errors -> LLM_FAILED)",
        ),
        "hixl": _r(
            (FAILED, PARAM),
            source="as v2; transfer_engine.cc:30-42 (an unknown backend LLM_PARAM_INVALID)",
        ),
        "kv": _r((FAILED, PARAM), source="llm_datadist.py:112-125 -> GE llm_wrapper.initialize"),
    },
    "finalize": {
        "v2": _r((), (), None, "llm_datadist.py:225-240: the engine's status is not checked"),
        "kv": _r((), (), None, "llm_datadist.py:225-240: the engine's status is not checked"),
    },
    "link_clusters": {
        "v2": _r(
            (_C.LLM_LINK_FAILED, _C.LLM_TIMEOUT, _C.LLM_ALREADY_LINK, FAILED, PARAM),
            timeout=_C.LLM_TIMEOUT,
            source="link_msg_handler.cc:306 (LLM_ALREADY_LINK), :372 (connect fails LLM_LINK_FAILED); "
            "msg_handler_plugin.cc:71-72 (connect past the timeout LLM_TIMEOUT); llm_link_manager.cc:44-70 "
            "(LLM_PARAM_INVALID); llm_datadist.py:259-299 returns codes, never raises them",
            silent="no CacheManager code path gives LLM_CLUSTER_NUM_EXCEED_LIMIT (the docs say 16 per "
            "call; SimConfig(v2_cluster_limit=True))",
        ),
        "hixl": _r(
            (FAILED, _C.LLM_TIMEOUT, _C.LLM_ALREADY_LINK, _C.LLM_NOT_YET_LINK, PARAM),
            timeout=_C.LLM_TIMEOUT,
            source="hixl_transfer_engine.cc:132-157 (entity set-up; hixl codes through llm_log.h:164-176: "
            "TIMEOUT, NOT_CONNECTED, ALREADY_CONNECTED, FAILED, PARAM_INVALID)",
            silent="no hixl path gives LLM_LINK_FAILED; an unreachable peer is a hixl FAILED or TIMEOUT",
        ),
        "kv": _r(
            (
                _C.LLM_LINK_FAILED,
                _C.LLM_WAIT_PROCESS_TIMEOUT,
                _C.LLM_ALREADY_LINK,
                _C.LLM_PROCESSING_LINK,
                _C.LLM_NOTIFY_PROMPT_UNLINK_FAILED,
                _C.LLM_REPEAT_REQUEST,
                _C.LLM_CLUSTER_NUM_EXCEED_LIMIT,
                FAILED,
                PARAM,
            ),
            args_only=(PARAM, _C.LLM_CLUSTER_NUM_EXCEED_LIMIT, _C.LLM_REPEAT_REQUEST),
            timeout=_C.LLM_WAIT_PROCESS_TIMEOUT,
            source="GE link_manager.cc:103 (LLM_CLUSTER_NUM_EXCEED_LIMIT), :222-226, 238, 260 "
            "(LLM_PROCESSING_LINK), :278 (LLM_WAIT_PROC_TIMEOUT), :300 (LLM_LINK_FAILED); GE udf "
            "link_req_handler.cpp:162 (a cluster named twice kFsmRepeatRequest), :205-215 (LLM_ALREADY_LINK)",
        ),
    },
    "unlink_clusters": {
        "v2": _r(
            (_C.LLM_UNLINK_FAILED, _C.LLM_TIMEOUT, FAILED, PARAM),
            timeout=_C.LLM_TIMEOUT,
            source="link_msg_handler.cc:430 (the peer cannot be told LLM_UNLINK_FAILED); "
            "msg_handler_plugin.cc:71-72 (LLM_TIMEOUT); llm_link_manager.cc:75-97",
            silent="the docs' LLM_LINK_BUSY for an unlink during a transfer has no code path "
            "(SimConfig(link_busy='reject') gives it)",
        ),
        "hixl": _r(
            (FAILED, PARAM),
            source="hixl_transfer_engine.cc:186-195 (by id alone; no entity is a success, "
            "comm_entity_manager.cc:33-62; a peer that is down does not fail it, "
            "adxl/channel_msg_handler.cc:574-623)",
        ),
        "kv": _r(
            (
                _C.LLM_UNLINK_FAILED,
                _C.LLM_NOTIFY_PROMPT_UNLINK_FAILED,
                _C.LLM_NOT_YET_LINK,
                _C.LLM_WAIT_PROCESS_TIMEOUT,
                _C.LLM_LINK_BUSY,
                _C.LLM_PROCESSING_LINK,
                _C.LLM_CLUSTER_NUM_EXCEED_LIMIT,
                FAILED,
                PARAM,
            ),
            args_only=(PARAM, _C.LLM_CLUSTER_NUM_EXCEED_LIMIT),
            timeout=_C.LLM_WAIT_PROCESS_TIMEOUT,
            source="GE link_manager.cc:103, 308 (LLM_PROCESSING_LINK), :327 (LLM_WAIT_PROC_TIMEOUT), "
            ":337-339 (LLM_UNLINK_FAILED); GE udf link_req_handler.cpp:86, 485 (kFsmLinkBusy), :413-454 "
            "(LLM_NOTIFY_PROMPT_UNLINK_FAILED), :478-496 (kFsmNotLink)",
        ),
    },
    "check_link_status": {
        "v2": _KV_ONLY,
        "kv": _r(
            (_C.LLM_WAIT_PROCESS_TIMEOUT, _C.LLM_NOT_YET_LINK, _C.LLM_LINK_BUSY, FAILED, PARAM),
            timeout=_C.LLM_WAIT_PROCESS_TIMEOUT,
            source="GE udf llm_comm_entity.cpp:737-760 (the check runs on the link: kFsmLinkBusy), "
            "cluster_manager.cpp:169, 212 (kFsmNotLink); GE llm_flow_service.cc:135-187 (no answer in "
            "time LLM_WAIT_PROC_TIMEOUT)",
        ),
    },
    "switch_role": {
        "v2": _r(
            (_C.LLM_EXIST_LINK, _C.LLM_FEATURE_NOT_ENABLED, FAILED, PARAM),
            args_only=(PARAM, _C.LLM_FEATURE_NOT_ENABLED),
            source="llm_link_manager.cc:103 (links still up LLM_EXIST_LINK), :108-132 (listen options); "
            "llm_datadist_v2.cc:366-370",
        ),
        "hixl": _r(
            (_C.LLM_FEATURE_NOT_ENABLED, FAILED, PARAM),
            args_only=(PARAM, _C.LLM_FEATURE_NOT_ENABLED),
            source="hixl_transfer_engine.cc:249-264 (no link check; a new listen address "
            "LLM_FEATURE_NOT_ENABLED)",
        ),
        "kv": _r(
            (_C.LLM_EXIST_LINK, _C.LLM_FEATURE_NOT_ENABLED, _C.LLM_WAIT_PROCESS_TIMEOUT, FAILED, PARAM),
            args_only=(PARAM, _C.LLM_FEATURE_NOT_ENABLED),
            timeout=_C.LLM_WAIT_PROCESS_TIMEOUT,
            source="GE llm_datadist.cc:259-261 (switch role not enabled LLM_FEATURE_NOT_ENABLED); GE udf "
            "fsm/state_define.h:58 (kFsmExistLink = LLM_EXIST_LINK); GE llm_flow_service.cc:135-187",
        ),
    },
    "link": {
        "v2": _r(
            (_C.LLM_LINK_FAILED, FAILED, PARAM),
            source="comm_link_manager.cc:90-94 (descriptor exchange fails), :332-383 (HCCL comm init "
            "fails :364-367): LLM_LINK_FAILED; llm_datadist.py:143-182 argument checks",
        ),
        "hixl": _r(
            (_C.LLM_FEATURE_NOT_ENABLED, PARAM),
            args_only=(PARAM, _C.LLM_FEATURE_NOT_ENABLED),
            source="hixl_transfer_engine.cc:226-247 (rank-table calls LLM_FEATURE_NOT_ENABLED)",
        ),
        "kv": _CM_ONLY,
    },
    "unlink": {
        "v2": _r(
            (_C.LLM_UNLINK_FAILED, _C.LLM_NOT_YET_LINK, PARAM),
            source="comm_link_manager.cc:140-160, 347 (LLM_UNLINK_FAILED), :392 (an unknown comm id "
            "LLM_NOT_YET_LINK)",
        ),
        "hixl": _r(
            (_C.LLM_FEATURE_NOT_ENABLED, PARAM),
            args_only=(PARAM, _C.LLM_FEATURE_NOT_ENABLED),
            source="hixl_transfer_engine.cc:226-247",
        ),
        "kv": _CM_ONLY,
    },
    "query_register_mem_status": {
        "v2": _r(
            (_C.LLM_NOT_YET_LINK, PARAM),
            source="comm_link_manager.cc:428-443 (only an unknown comm id fails: LLM_NOT_YET_LINK); a set-up "
            "that failed is the FAILED status, not a code",
        ),
        "hixl": _r(
            (_C.LLM_FEATURE_NOT_ENABLED, PARAM),
            args_only=(PARAM, _C.LLM_FEATURE_NOT_ENABLED),
            source="hixl_transfer_engine.cc:226-247",
        ),
        "kv": _CM_ONLY,
    },
    "remap_registered_memory": {
        "v2": _r(
            (FAILED, PARAM),
            source="cache_manager.py:401-428; comm_entity_manager RemapRegisteredMemory via "
            "llm_datadist_v2.cc:271-276",
            silent="which engine errors a remap can meet besides its argument checks",
        ),
        "kv": _NONE,
    },
    # -- CacheManager (v2) and KvCacheManager (v1) ---------------------------------------------------
    "allocate_cache": {
        "v2": _r(
            (_C.LLM_OUT_OF_MEMORY, _C.LLM_FEATURE_NOT_ENABLED, FAILED, PARAM),
            args_only=(PARAM, _C.LLM_FEATURE_NOT_ENABLED),
            source="cache_manager.cc:171-212 (no pool LLM_FEATURE_NOT_ENABLED :175, pool exhausted "
            "LLM_OUT_OF_MEMORY :184-189, keys/cache id LLM_PARAM_INVALID :199-201, the remote-access "
            "table's ACL update :204 -> LLM_FAILED); data_cache_engine.cc:336-353",
        ),
        "kv": _KV_ALLOC,
    },
    "allocate_blocks_cache": {
        "v2": _r(
            (_C.LLM_OUT_OF_MEMORY, _C.LLM_FEATURE_NOT_ENABLED, FAILED, PARAM),
            args_only=(PARAM, _C.LLM_FEATURE_NOT_ENABLED),
            source="cache_manager.py:64-91 -> cache_manager.cc:171-212 as allocate_cache",
        ),
        "kv": _KV_ALLOC,
    },
    "deallocate_cache": {
        "v2": _r(
            (_C.LLM_FEATURE_NOT_ENABLED, FAILED, PARAM),
            args_only=(PARAM, _C.LLM_FEATURE_NOT_ENABLED),
            source="data_cache_engine.cc:355-359; cache_manager.py:195-212",
        ),
        "kv": _KV_LOCAL,
    },
    "deallocate_blocks_cache": {
        "v2": _r(
            (_C.LLM_FEATURE_NOT_ENABLED, FAILED, PARAM),
            args_only=(PARAM, _C.LLM_FEATURE_NOT_ENABLED),
            source="data_cache_engine.cc:355-359; cache_manager.py:185-192",
        ),
        "kv": _NONE,
    },
    "register_cache": {
        "v2": _r(
            (FAILED, PARAM),
            source="data_cache_engine.cc:91-118 (LLM_PARAM_INVALID; memory registration errors -> "
            "LLM_FAILED); cache_manager.py:315-342",
        ),
        "kv": _NONE,
    },
    "register_blocks_cache": {
        "v2": _r((FAILED, PARAM), source="cache_manager.py:345-369 -> data_cache_engine.cc:91-118"),
        "kv": _NONE,
    },
    "unregister_cache": {
        "v2": _r((FAILED, PARAM), source="data_cache_engine.cc:120-130; cache_manager.py:372-383"),
        "kv": _NONE,
    },
    "get_cache_tensors": {
        "v2": _NONE,
        "kv": _KV_LOCAL,
    },
    "remove_cache_key": {
        "v2": _r(
            (_C.LLM_FEATURE_NOT_ENABLED, FAILED, PARAM),
            args_only=(PARAM, _C.LLM_FEATURE_NOT_ENABLED),
            source="data_cache_engine.cc:361-365; cache_manager.py:385-399",
        ),
        "kv": _KV_LOCAL,
    },
    "pull_cache": {"v2": _V2_PULL, "kv": _KV_TRANSFER},
    "pull_blocks": {"v2": _V2_PULL, "kv": _KV_TRANSFER},
    "push_cache": {"v2": _V2_PUSH, "kv": _NONE},
    "push_blocks": {"v2": _V2_PUSH, "kv": _NONE},
    "copy_cache": {"v2": _V2_LOCAL, "kv": _KV_LOCAL},
    "copy_blocks": {"v2": _V2_LOCAL, "kv": _KV_LOCAL},
    "swap_blocks": {"v2": _V2_LOCAL, "kv": _KV_SWAP},
    "transfer_cache_async": {"v2": _V2_TASK, "kv": _KV_TASK},
    # -- CacheTask ----------------------------------------------------------------------------------
    "synchronize": {"v2": _V2_TASK, "kv": _KV_TASK},
    "get_results": {"v2": _V2_TASK, "kv": _KV_TASK},
}
"""Per operation: ``v2`` (also ``hixl`` unless it has its own), ``kv`` (``v2-kv`` and ``v1``)."""


def _build() -> Dict[Tuple[str, EngineMode], CodeRow]:
    table: Dict[Tuple[str, EngineMode], CodeRow] = {}
    for op, specs in _SPECS.items():
        for mode in EngineMode:
            key = "kv" if mode in (EngineMode.V2_KV, EngineMode.V1) else mode.value
            spec = specs.get(key) or specs["v2"]
            codes, args_only, timeout, source, silent = spec
            table[op, mode] = CodeRow(op, mode, codes, frozenset(args_only), timeout, source, silent)
    return table


_TABLE = _build()
OPS: FrozenSet[str] = frozenset(_SPECS)
"""Every operation the table has rows for (the face's traced operations, ``faults.checks.API_OPS``)."""


# -- the API --------------------------------------------------------------------------------------


def modes() -> Tuple[EngineMode, ...]:
    """The four modes, in table order."""
    return tuple(EngineMode)


def to_mode(mode: Union[EngineMode, str]) -> EngineMode:
    """A mode from itself or its name (``"v2"``, ``"hixl"``, ``"v2-kv"``, ``"v1"``); ValueError else."""
    if isinstance(mode, EngineMode):
        return mode
    try:
        return EngineMode(mode)
    except ValueError:
        names = ", ".join(m.value for m in EngineMode)
        raise ValueError(f"unknown engine mode {mode!r}; modes: {names}") from None


def mode_of(cache_manager: bool, hixl: bool = False) -> EngineMode:
    """The mode of an instance: CacheManager or not, and its transfer backend. A KvCacheManager-mode
    instance is ``v2-kv``: ``llm_datadist_v1.LLMDataDist`` is the same combined class here, and the two
    run the same engine, so their rows agree."""
    if not cache_manager:
        return EngineMode.V2_KV
    return EngineMode.HIXL if hixl else EngineMode.V2


class _Event(Protocol):
    """What ``trace_modes`` reads of a trace event."""

    cluster_id: Optional[int]
    op: str
    detail: str


def trace_modes(events: Iterable[_Event]) -> Dict[int, EngineMode]:
    """The mode of each instance a trace shows coming up: the world records ``node.init`` with the
    detail ``"<role> v1|v2[ hixl]"`` (the engine, KvCacheManager or CacheManager, and the backend)."""
    found: Dict[int, EngineMode] = {}
    for event in events:
        if event.op != "node.init" or event.cluster_id is None:
            continue
        words = event.detail.split()
        if "v1" in words or "v2" in words:
            found[event.cluster_id] = mode_of(cache_manager="v2" in words, hixl="hixl" in words)
    return found


def row(op: str, mode: Union[EngineMode, str]) -> CodeRow:
    """The row of ``op`` in ``mode``; KeyError for an operation the table does not know."""
    return _TABLE[op, to_mode(mode)]


def codes_for(op: str, mode: Union[EngineMode, str]) -> FrozenSet[LLMStatusCode]:
    """Every code the real library can give ``op`` in ``mode`` (empty for an unknown operation)."""
    found = _TABLE.get((op, to_mode(mode)))
    return frozenset(found.codes) if found is not None else frozenset()


def fault_codes(op: str, mode: Union[EngineMode, str]) -> Tuple[LLMStatusCode, ...]:
    """The codes a correct client can meet from ``op`` in ``mode``, the systematic pass's first."""
    found = _TABLE.get((op, to_mode(mode)))
    return found.fault_codes if found is not None else ()


def timeout_code(op: str, mode: Union[EngineMode, str]) -> Optional[LLMStatusCode]:
    """The code ``op`` gives when it times out in ``mode``, or None when it cannot time out there."""
    found = _TABLE.get((op, to_mode(mode)))
    return found.timeout if found is not None else None


def modes_giving(op: str, code: LLMStatusCode) -> Tuple[EngineMode, ...]:
    """The modes in which ``op`` can give ``code``."""
    return tuple(mode for mode in EngineMode if code in codes_for(op, mode))


def _listing(op: str, mode: EngineMode) -> str:
    found = _TABLE.get((op, mode))
    return ", ".join(code.name for code in found.codes) if found is not None and found.codes else "no code"


def describe(op: str, modes_: Optional[Iterable[Union[EngineMode, str]]] = None) -> str:
    """The codes ``op`` can give, per mode, modes with the same codes together:
    ``LLM_OUT_OF_MEMORY, ... (v2, hixl); LLM_DEVICE_OUT_OF_MEMORY, ... (v2-kv, v1)``."""
    groups: Dict[str, list[str]] = {}
    for mode in modes_ if modes_ is not None else EngineMode:
        m = to_mode(mode)
        groups.setdefault(_listing(op, m), []).append(m.value)
    return "; ".join(f"{codes} ({', '.join(names)})" for codes, names in groups.items())


OUTSIDE = "any_code=True injects it anyway, outside the engine's behaviour"


def impossible(op: str, code: LLMStatusCode, mode: Union[EngineMode, str]) -> Optional[str]:
    """None when ``op`` can give ``code`` in ``mode``; else the reason, naming the codes it can give."""
    m = to_mode(mode)
    if code in codes_for(op, m):
        return None
    return f"{op} cannot give {code.name} in {m.value} mode; it gives {_listing(op, m)}"


def check_code(op: str, code: LLMStatusCode, mode: Optional[Union[EngineMode, str]] = None) -> None:
    """ValueError unless ``op`` can give ``code`` in ``mode`` (in some mode, when ``mode`` is None); the
    message names the codes the operation can give."""
    if mode is not None:
        reason = impossible(op, code, mode)
        if reason is not None:
            raise ValueError(f"{reason} ({OUTSIDE})")
        return
    if op not in OPS or modes_giving(op, code):
        return
    raise ValueError(f"{op} cannot give {code.name} in any mode; it gives {describe(op)} ({OUTSIDE})")


def union(ops: Iterable[str], modes_: Iterable[Union[EngineMode, str]]) -> FrozenSet[LLMStatusCode]:
    """Every code any of ``ops`` can give in any of ``modes_`` (what a client of those modes can meet)."""
    out: set[LLMStatusCode] = set()
    for op in ops:
        for mode in modes_:
            out |= codes_for(op, mode)
    return frozenset(out)
