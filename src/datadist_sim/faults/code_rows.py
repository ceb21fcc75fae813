"""The rows of ``engine_codes``: per public operation, the codes the real library can give in CacheManager
mode (``v2``, also ``hixl`` unless it has its own row) and in KvCacheManager mode (``kv``: ``v2-kv`` and
``v1``, one engine), each with its vendor source (file:line of hicann/hixl at 9ed283b; ``GE`` =
hicann/ge at ffdcbc9f7). docs/vendor_facts.md, "Codes each operation can give, per mode", explains them.
The ``hixl`` engine API's rows are in ``hixl_code_rows``. Only data; ``engine_codes`` builds the table
and answers questions about it."""

from __future__ import annotations

from typing import Dict, Optional, Tuple

from datadist_sim._status import LLMStatusCode
from datadist_sim._status_hixl import Code

_C = LLMStatusCode
FAILED = _C.LLM_FAILED
PARAM = _C.LLM_PARAM_INVALID

Spec = Tuple[Tuple[Code, ...], Tuple[Code, ...], Optional[Code], str, str]
"""(codes, args_only, timeout code, source, what the source leaves open)."""


def _r(
    codes: Tuple[Code, ...],
    args_only: Tuple[Code, ...] = (PARAM,),
    timeout: Optional[Code] = None,
    source: str = "",
    silent: str = "",
) -> Spec:
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

SPECS: Dict[str, Dict[str, Spec]] = {
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
            silent="no hixl path gives LLM_LINK_FAILED; an unreachable peer is a hixl FAILED (refused, "
            "hixl/common/ctrl_msg_plugin.cc:119-122) or TIMEOUT (connect past the timeout, :77-80)",
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
            "comm_entity_manager.cc:33-62); hixl_entity.cc:19, 76-82 (a fixed 30 s disconnect); "
            "adxl/channel_msg_handler.cc:585-586, 608-611 (a peer down or cut off: no error), :614 + "
            "msg_handler_plugin.cc:155-161, 165-167, 333-334 (a hung peer is waited out; one that dies "
            "then is FAILED); no LLM_TIMEOUT: msg_handler_plugin.cc:71-72 follows only a failed DoConnect",
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


FORCE_SPECS: Dict[str, Dict[str, Spec]] = {
    "unlink_clusters": {
        "v2": _r(
            (_C.LLM_UNLINK_FAILED, FAILED, PARAM),
            source="link_msg_handler.cc:417-418, 426-439 (force skips the endpoint check, the connect and "
            "the message), :444 -> :350-351 DestroyEntity; comm_entity_manager.cc:33-62 (the entity's "
            "Finalize error is returned, the entity goes anyway :48-56); comm_entity.cc:282-303 (stream "
            "abort or destroy fails: LLM_UNLINK_FAILED); llm_link_manager.cc:81-82",
        ),
        "hixl": _r(
            (FAILED, PARAM),
            source="hixl_transfer_engine.cc:193-195 (force is ignored), :186-191; comm_entity_manager.cc:48 "
            "calls Finalize() with force false (comm_entity.h:143), so hixl_entity.cc:76-82 disconnects as "
            "for a plain unlink (the same codes, no LLM_TIMEOUT: adxl/channel_msg_handler.cc:638-683)",
        ),
        "kv": _r(
            (
                _C.LLM_UNLINK_FAILED,
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
            source="GE udf link_req_handler.cpp:456-471 (force skips NotifyPromptUnlink, the only source of "
            "LLM_NOTIFY_PROMPT_UNLINK_FAILED :413-454, 540-546), :501-526 (closing the conn fails "
            "kFsmUnlinkFailed), :72-87 (kFsmLinkBusy), :211-215 (kFsmNotLink); GE link_manager.cc:303-342 "
            "runs whatever force is (:306-309 LLM_PROCESSING_LINK, :327 and :235-238 the host's feed and "
            "fetch past the timeout LLM_WAIT_PROC_TIMEOUT, :336-339 LLM_UNLINK_FAILED)",
        ),
    },
}
"""The rows of the ``force=True`` form of an operation, where it gives fewer codes than the plain form:
per mode as ``SPECS`` (``hixl`` falls back to ``v2``). Each row's codes are a subset of the plain row's,
so a rule drawn from the plain row may fire on either form."""
