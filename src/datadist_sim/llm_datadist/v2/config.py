"""Engine options -> what the simulated engine acts on (real module: ``llm_datadist.v2.config``)."""

from __future__ import annotations

import socket
from typing import Any, Dict, List, Mapping

from datadist_sim._status import LLMStatusCode
from datadist_sim._world.door import Endpoint, NodeSettings, SimError
from datadist_sim.llm_datadist._engine import short
from datadist_sim.llm_datadist.configs import trans_str_ip
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
    endpoints = [parse_listen_ip_info(entry) for entry in entries]
    for ip, _ in endpoints:
        # The real EngineConfig stores them as LlmConfig.cluster_info, whose setter converts each host
        # with socket.inet_aton: a host that is not an IPv4 address is a plain RuntimeError.
        trans_str_ip(ip)
    return endpoints


def int_to_ip(ip: int) -> str:
    """The engine keeps IPv4 addresses as little-endian ints (``LLMClusterInfo``); back to dotted form."""
    return socket.inet_ntoa(int(ip).to_bytes(4, "little"))


_UINT32 = 1 << 32


def engine_options(func: str, options: Mapping[Any, Any]) -> Dict[str, str]:
    """The options as the engine receives them: pybind converts the dict to ``std::map<std::string,
    std::string>`` (hixl ``llm_datadist_v2_wrapper.cc:22``, GE ``llm_datadist_wrapper.cc:177``), so a key
    or value that is neither ``str`` nor ``bytes`` (which pybind also takes, as UTF-8) is a
    ``TypeError`` before the engine runs (its message shows the pair by ``short``, which never raises:
    a value whose ``__repr__`` raises is still this ``TypeError``)."""
    converted: Dict[str, str] = {}
    for key, value in options.items():
        if not isinstance(key, (str, bytes)) or not isinstance(value, (str, bytes)):
            raise TypeError(
                f"{func}(): incompatible function arguments; options must be Dict[str, str], "
                f"got {short(key)}: {short(value)} ({type(key).__name__}: {type(value).__name__})"
            )
        k = key.decode() if isinstance(key, bytes) else key
        converted[k] = value.decode() if isinstance(value, bytes) else value
    return converted


def _is_ip_literal(ip: str) -> bool:
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(family, ip)
            return True
        except (OSError, ValueError):
            continue
    return False


def engine_listen_endpoint(ip: str, port: str, *, hixl: bool) -> Endpoint:
    """Where the v2 engine listens for ``llm.ListenIp`` / ``llm.ListenPort``.

    The port is read as a ``uint32_t`` with ``std::stringstream`` (``LLMUtils::ToNumber``,
    ``common/llm_utils.h:38-45``): a negative decimal wraps modulo 2**32, one of 2**32 or more fails
    (``LLM_PARAM_INVALID``, ``llm_link_manager.cc:32-35``, ``hixl_transfer_engine.cc:94-96``). The host
    must be an IPv4 or IPv6 literal (``msg_handler_plugin.cc:29-44``; hixl ``CheckIp``,
    ``hixl_utils.cc:132-139``). The default backend then binds ``htons(port)``, the low 16 bits
    (``msg_handler_plugin.cc:239-246``); the hixl engine keeps the number it was given.
    """
    value = int(port)
    if not -_UINT32 < value < _UINT32:
        raise SimError(LLMStatusCode.LLM_PARAM_INVALID, f"Option llm.ListenPort is invalid: [{port}]")
    if not _is_ip_literal(ip):
        raise SimError(LLMStatusCode.LLM_PARAM_INVALID, f"{ip} is not a valid ip address")
    value %= _UINT32
    return ip, value if hixl else value & 0xFFFF


def _sync_kv_timeout_ms(options: Dict[str, str]) -> int:
    """``llm.SyncKvCacheWaitTime`` must be ASCII digits only (``IsPositiveInteger``, hixl
    ``common/llm_utils.cc:27-36, 50-60``; GE ``dflow/llm_datadist/v1/common/llm_utils.cc:28-37, 51-61``);
    "0" passes that check."""
    value = options.get("llm.SyncKvCacheWaitTime")
    if value is None:
        return 1000
    if not (value and value.isascii() and value.isdigit()):
        raise SimError(
            LLMStatusCode.LLM_PARAM_INVALID,
            f"sync kv wait time:{value} is invalid, wait time value should be a positive integer.",
        )
    return int(value)


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
    backend = options.get("llm.TransferBackend")
    if backend is not None and backend != "hixl":
        # hixl transfer_engine.cc:32-41: any other value gives no engine, and init fails with
        # LLM_PARAM_INVALID (LLM_CHECK_NOTNULL, common/llm_log.h:120-125).
        raise SimError(LLMStatusCode.LLM_PARAM_INVALID, f"Transfer backend:{backend} is not supported.")
    remote = options.get("llm.EnableRemoteCacheAccessible")
    if remote is not None and remote not in ("0", "1") and options.get("llm.EnableCacheManager") == "1":
        # the cache-manager engine reads the flag next (hixl llm_datadist_v2.cc:65-67) by ParseFlag
        # (common/llm_utils.cc:65-80): absent is off, and anything but "0"/"1" fails LLM_ASSERT_TRUE,
        # whose result converts to LLM_PARAM_INVALID (common/llm_checker.h:17-23); the device id is
        # read after (:68-69). The other engine does not read the flag.
        raise SimError(
            LLMStatusCode.LLM_PARAM_INVALID,
            f'Option llm.EnableRemoteCacheAccessible value ("{remote}") is invalid, should be "0" or "1"',
        )
    raw_devices = options.get("ge.exec.deviceId", "0")
    try:
        devices = [int(part) for part in raw_devices.split(";")]
    except ValueError:
        raise SimError(
            LLMStatusCode.LLM_PARAM_INVALID, f"ge.exec.deviceId is invalid, value = {raw_devices}"
        ) from None
    retry = _number(options, "llm.LinkRetryCount", 1)
    if not 1 <= retry <= 100:
        raise SimError(LLMStatusCode.LLM_PARAM_INVALID, f"llm.LinkRetryCount {retry} is out of [1, 100]")
    return NodeSettings(
        device_ids=devices,
        sync_kv_timeout_ms=_sync_kv_timeout_ms(options),
        enable_switch_role=options.get("llm.EnableSwitchRole") == "1",
        remote_cache_accessible=remote == "1",
        link_total_time_s=_number(options, "llm.LinkTotalTime", 0),
        link_retry_count=retry,
        transfer_backend=backend or "",
        options=dict(options),
    )
