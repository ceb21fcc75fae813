"""The rows of ``engine_codes`` for the ``hixl`` engine API: its operations (``hixl.<method>``, as the
face traces them) have rows in the ``hixl-engine`` mode only, with hixl's own codes (``HixlCode``); the
comm and hixl_cs engines are one mode, each row citing both where they differ (file:line of hicann/hixl
at 9ed283b; docs/hixl_engine_facts.md, section 11, explains them). Only data."""

from __future__ import annotations

from typing import Dict

from datadist_sim._status_hixl import HixlCode
from datadist_sim.faults.code_rows import Spec, _r

_H = HixlCode
_NOT_INIT = (
    "hixl_py.cc:79-214: an object not initialised answers FAILED before the engine (a misuse, not a fault)"
)
HIXL_SPECS: Dict[str, Spec] = {
    "hixl.initialize": _r(
        (_H.FAILED, _H.PARAM_INVALID),
        (_H.PARAM_INVALID,),
        source="hixl_options.cc:212-369 and engine_factory.cc:41-65 (options: PARAM_INVALID); "
        "ctrl_msg_plugin.cc:176-177 (the listen port is taken: FAILED)",
    ),
    "hixl.finalize": _r((), (), None, "hixl_py.cc:67-71: returns None, the engine's status is not read"),
    "hixl.register_mem": _r(
        (_H.FAILED, _H.PARAM_INVALID),
        (_H.PARAM_INVALID,),
        source="hixl_impl.cc:115 (addr 0); comm channel_msg_handler.cc:222-242 (HCCL register errors -> "
        "FAILED, adxl_utils.cc:24-35); hixl_cs hixl_server.cc:106-119 (overflow, overlap PARAM_INVALID)",
    ),
    "hixl.deregister_mem": _r(
        (_H.FAILED, _H.PARAM_INVALID),
        (_H.PARAM_INVALID,),
        source="hixl_impl.cc:123 (handle 0); hixl_cs hixl_engine.cc:129-133 (a client connection held: "
        "FAILED); comm channel_msg_handler.cc:244-250",
    ),
    "hixl.connect": _r(
        (_H.FAILED, _H.TIMEOUT, _H.ALREADY_CONNECTED, _H.PARAM_INVALID),
        (_H.PARAM_INVALID, _H.ALREADY_CONNECTED),
        _H.TIMEOUT,
        source="ctrl_msg_plugin.cc:71-85 (refused FAILED; past the timeout TIMEOUT :79), :102-122 "
        "(handshake receive timeout); comm msg_handler_plugin.cc:46-78, channel_msg_handler.cc:492-516 "
        "(ALREADY_CONNECTED first), adxl_utils.cc:50-63; hixl_cs client_manager.cc:49-72",
    ),
    "hixl.disconnect": _r(
        (_H.NOT_CONNECTED, _H.PARAM_INVALID),
        source="comm channel_msg_handler.cc:576-583 (PARAM_INVALID, NOT_CONNECTED), :652-673 (a peer "
        "that is down does not fail it); hixl_cs client_manager.cc:181-204, hixl_engine.cc:170-180 "
        "(the timeout is only logged)",
    ),
    "hixl.connect_async": _r(
        (_H.RESOURCE_EXHAUSTED, _H.FAILED, _H.PARAM_INVALID),
        (_H.PARAM_INVALID, _H.FAILED),
        source="hixl_impl.cc:314-318 (PARAM_INVALID, RESOURCE_EXHAUSTED); connect_pool_executor.cc:83-102 "
        "(a full queue RESOURCE_EXHAUSTED; a pool shut down by finalize FAILED :86-89); the connect's own "
        "outcome is the status, not the code",
    ),
    "hixl.disconnect_async": _r(
        (_H.RESOURCE_EXHAUSTED, _H.FAILED, _H.PARAM_INVALID),
        (_H.PARAM_INVALID, _H.FAILED),
        source="hixl_impl.cc:329-334; connect_pool_executor.cc:83-102 as connect_async",
    ),
    "hixl.get_async_connect_status": _r(
        (_H.FAILED,), (_H.FAILED,), source="connect_pool_executor.cc:128-133 (always SUCCESS); " + _NOT_INIT
    ),
    "hixl.get_all_async_connect_status": _r(
        (_H.FAILED,), (_H.FAILED,), source="connect_pool_executor.cc:135-140 (always SUCCESS); " + _NOT_INIT
    ),
    "hixl.transfer_sync": _r(
        (_H.TIMEOUT, _H.FAILED, _H.NOT_CONNECTED, _H.RESOURCE_EXHAUSTED, _H.PARAM_INVALID),
        (_H.PARAM_INVALID,),
        _H.TIMEOUT,
        source="comm comm_channel.cc:514-531 (stream sync past the timeout: ACL_ERROR_RT_STREAM_SYNC_TIMEOUT "
        "-> TIMEOUT, adxl_utils.cc:38-48; a failure marks the channel unusable, later transfers FAILED "
        ":221-228, fail-fast on by default adxl_inner_engine.cc:191), adxl_inner_engine.cc:486-491 "
        "(NOT_CONNECTED); hixl_cs hixl_cs_client.cc:964-970 (TIMEOUT), :988-991 (FAILED once a transfer "
        "failed), transfer_pool.cc:169-171 (no free slot RESOURCE_EXHAUSTED), hixl_engine.cc:383-391",
    ),
    "hixl.transfer_async": _r(
        (_H.FAILED, _H.NOT_CONNECTED, _H.RESOURCE_EXHAUSTED, _H.PARAM_INVALID),
        (_H.PARAM_INVALID,),
        source="comm adxl_inner_engine.cc:517-546 (NOT_CONNECTED; submit errors), comm_channel.cc:344-390 "
        "(channel unusable FAILED); hixl_cs hixl_cs_client.cc:1028 (FAILED once a transfer failed), "
        "transfer_pool.cc:169-171 (RESOURCE_EXHAUSTED); no timeout argument (hixl_py.cc:348-349): a "
        "transfer that never ends shows in its status",
    ),
    "hixl.get_transfer_status": _r(
        (_H.NOT_CONNECTED, _H.FAILED, _H.PARAM_INVALID),
        (_H.PARAM_INVALID,),
        source="comm adxl_inner_engine.cc:557-584 (unknown req PARAM_INVALID; the connection gone "
        "NOT_CONNECTED), comm_channel.cc:417-431 (channel unusable FAILED); hixl_cs hixl_engine.cc:241-259, "
        "hixl_cs_client.cc:1102-1115 (a latched failure reports TransferStatus.FAILED with SUCCESS)",
        silent="TransferStatus.TIMEOUT has no producer: client_handler.h:39-40 maps a completion status "
        "nothing sets",
    ),
    "hixl.get_all_transfer_status": _r(
        (_H.UNSUPPORTED, _H.FAILED),
        (_H.UNSUPPORTED, _H.FAILED),
        source="comm_engine.cc:90-94 (comm: UNSUPPORTED); hixl_engine.cc:263-309 (SUCCESS whatever the "
        "requests' statuses); " + _NOT_INIT,
    ),
    "hixl.send_notify": _r(
        (_H.TIMEOUT, _H.NOT_CONNECTED, _H.RESOURCE_EXHAUSTED, _H.FAILED, _H.PARAM_INVALID),
        (_H.PARAM_INVALID,),
        _H.TIMEOUT,
        source="hixl_impl.cc:399-415 (PARAM_INVALID); comm adxl_inner_engine.cc:602-623 (NOT_CONNECTED; "
        "no acknowledgement in time TIMEOUT; the socket send FAILED comm_channel.cc:572-578); hixl_cs "
        "hixl_engine.cc:329-332, hixl_server.cc:193-239 (a full queue RESOURCE_EXHAUSTED)",
        silent="NOTIFY_FAILED has no producer in src/ (only the binding names it)",
    ),
    "hixl.get_notifies": _r((_H.FAILED,), (_H.FAILED,), source="hixl_server.cc:177-182; " + _NOT_INIT),
}
"""The ``hixl`` engine API, ``hixl-engine`` mode only (hicann/hixl at 9ed283b)."""
