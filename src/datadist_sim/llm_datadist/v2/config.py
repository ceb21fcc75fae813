"""Engine options -> what the simulated engine acts on (real module: ``llm_datadist.v2.config``)."""

from __future__ import annotations

import socket
from typing import Dict, List

from datadist_sim._status import LLMStatusCode
from datadist_sim._world.cluster import Endpoint, NodeSettings
from datadist_sim._world.errors import SimError
from datadist_sim.llm_datadist.status import raise_if_false
from datadist_sim.llm_datadist.utils.utils import check_isinstance
from datadist_sim.llm_datadist.v2.llm_utils import parse_listen_ip_info


def v1_listen_endpoints(listen_ip_info: str, device_num: int) -> List[Endpoint]:
    """v1 form ``"ip:port;ip:port"``, one entry per device."""
    check_isinstance("listen_ip_info", listen_ip_info, [str])
    entries = listen_ip_info.split(";")
    raise_if_false(
        len(entries) == device_num,
        f"listen ip info num:{len(entries)} in llm.listenIpInfo is not equal to device num:{device_num}.",
    )
    return [parse_listen_ip_info(entry) for entry in entries]


def int_to_ip(ip: int) -> str:
    """The engine keeps IPv4 addresses as little-endian ints (``LLMClusterInfo``); back to dotted form."""
    return socket.inet_ntoa(int(ip).to_bytes(4, "little"))


def _number(options: Dict[str, str], key: str, default: int) -> int:
    value = options.get(key)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise SimError(LLMStatusCode.LLM_PARAM_INVALID, f"Option {key} is invalid: [{value}]") from None


def node_settings(options: Dict[str, str]) -> NodeSettings:
    """Parse the options the simulated engine uses; a non-numeric number is ``LLM_PARAM_INVALID``."""
    raw_devices = options.get("ge.exec.deviceId", "0")
    try:
        devices = [int(part) for part in raw_devices.split(";")]
    except ValueError:
        raise SimError(
            LLMStatusCode.LLM_PARAM_INVALID, f"ge.exec.deviceId is invalid, value = {raw_devices}"
        ) from None
    backend = options.get("llm.TransferBackend")
    if backend is not None and backend != "hixl":
        # hixl transfer_engine.cc:32-41: any other value gives no engine, and init fails with
        # LLM_PARAM_INVALID (LLM_CHECK_NOTNULL, common/llm_log.h:120-125).
        raise SimError(LLMStatusCode.LLM_PARAM_INVALID, f"Transfer backend:{backend} is not supported.")
    retry = _number(options, "llm.LinkRetryCount", 1)
    if not 1 <= retry <= 100:
        raise SimError(LLMStatusCode.LLM_PARAM_INVALID, f"llm.LinkRetryCount {retry} is out of [1, 100]")
    return NodeSettings(
        device_ids=devices,
        sync_kv_timeout_ms=_number(options, "llm.SyncKvCacheWaitTime", 1000),
        enable_switch_role=options.get("llm.EnableSwitchRole") == "1",
        remote_cache_accessible=options.get("llm.EnableRemoteCacheAccessible") == "1",
        link_total_time_s=_number(options, "llm.LinkTotalTime", 0),
        link_retry_count=retry,
        transfer_backend=backend or "",
        options=dict(options),
    )
