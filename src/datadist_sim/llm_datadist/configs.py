"""Roles, link descriptions and the option builder (real module: ``llm_datadist.configs``).

Every setter validates like the real one: a wrong Python type is ``TypeError``, an integer outside its C
type is ``ValueError`` and a semantic violation is ``LLMException(LLM_PARAM_INVALID)``. String and bool
setters accept ``None`` (it resets the value), exactly as the real ``check_isinstance`` lets ``None`` through.
"""

from __future__ import annotations

import json
import socket
from enum import IntEnum
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from datadist_sim.llm_datadist.status import raise_if_false
from datadist_sim.llm_datadist.utils.utils import (
    check_dict,
    check_int32,
    check_isinstance,
    check_uint16,
    check_uint32,
    check_uint64,
)

_UINT32_MAX = 2**32 - 1


class LLMRole(IntEnum):
    """Cluster role; ``str()`` is ``"LLMRole.PROMPT"`` on every Python version, as the real override does."""

    PROMPT = 1
    DECODER = 2
    MIX = 3

    def __str__(self) -> str:
        return f"{self.__class__.__name__}.{self.name}"


def trans_str_ip(ip: Any) -> Any:
    """Dotted IPv4 string -> the little-endian int the engine keeps; ints (and anything else) pass through."""
    if isinstance(ip, str):
        try:
            return int.from_bytes(socket.inet_aton(ip), byteorder="little")
        except OSError as err:
            raise RuntimeError(f"Can not parse ip str:{ip}") from err
    return ip


class LLMClusterInfo:
    """One peer to link with: its cluster id and the (ip, port) pairs on each side."""

    def __init__(self) -> None:
        self._remote_cluster_id: Optional[int] = None
        self._remote_role_type: Optional[Union[LLMRole, int]] = None
        self._local_ip_info_list: List[Tuple[int, int]] = []
        self._remote_ip_info_list: List[Tuple[int, int]] = []

    @property
    def remote_cluster_id(self) -> Optional[int]:
        return self._remote_cluster_id

    @remote_cluster_id.setter
    def remote_cluster_id(self, remote_cluster_id: int) -> None:
        check_uint64("remote_cluster_id", remote_cluster_id)
        self._remote_cluster_id = remote_cluster_id

    @property
    def remote_role_type(self) -> Optional[Union[LLMRole, int]]:
        return self._remote_role_type

    @remote_role_type.setter
    def remote_role_type(self, remote_role_type: Optional[Union[LLMRole, int]]) -> None:
        # Kept for API compatibility; the engine never receives it.
        check_isinstance("remote_role_type", remote_role_type, [LLMRole, int])
        self._remote_role_type = remote_role_type

    @property
    def local_ip_info_list(self) -> List[Tuple[int, int]]:
        return self._local_ip_info_list

    @property
    def remote_ip_info_list(self) -> List[Tuple[int, int]]:
        return self._remote_ip_info_list

    @staticmethod
    def _check_inputs(ip: Union[str, int], port: int) -> int:
        check_isinstance("ip", ip, [str, int])
        check_uint16("port", port)
        converted: int = trans_str_ip(ip)
        return converted

    def append_local_ip_info(self, ip: Union[str, int], port: int) -> None:
        self._local_ip_info_list.append((self._check_inputs(ip, port), port))

    def append_remote_ip_info(self, ip: Union[str, int], port: int) -> None:
        self._remote_ip_info_list.append((self._check_inputs(ip, port), port))


DeviceId = Union[int, List[int], Tuple[int, ...]]


class LlmConfig:
    """Builds the ``Dict[str, str]`` handed to ``LLMDataDist.init``.

    ``generate_options()`` fills and returns one internal dict, the same object on every call; keys are only
    ever added, never removed, so unsetting a property after a call does not take its option back.
    """

    def __init__(self) -> None:
        self._options: Dict[str, str] = {}
        self._ge_options: Dict[str, str] = {}
        self._device_id: Optional[DeviceId] = None
        self._sync_kv_timeout: Optional[Union[int, str]] = None
        self._deploy_res_path: Optional[str] = ""
        self._listen_ip_info: Optional[str] = ""
        self._enable_switch_role: Optional[bool] = False
        self._link_total_time: Optional[int] = None
        self._link_retry_count: Optional[int] = None
        self._cluster_info: str = ""
        self._output_max_size: Optional[int] = None
        self._mem_utilization: float = 0.95
        self._buf_pool_cfg: Optional[str] = ""
        self._mem_pool_cfg: Optional[str] = ""
        self._host_mem_pool_cfg: Optional[str] = ""
        self._enable_cache_manager: Optional[bool] = None
        self._enable_remote_cache_accessible: Optional[bool] = None
        self._rdma_traffic_class: Optional[int] = None
        self._rdma_service_level: Optional[int] = None
        self._local_comm_res: Optional[str] = None
        self._transfer_backend: Optional[str] = None
        self._global_resource_config: Optional[str] = None

    # -- option generation -------------------------------------------------------------------------------

    def generate_options(self) -> Dict[str, str]:
        return self.gen_options()

    def gen_options(self) -> Dict[str, str]:
        """Insertion order follows the real builder, so a fresh config yields the same key order."""
        opts = self._options
        if self._ge_options:
            opts.update(self._ge_options)
        if self._device_id is not None:
            if isinstance(self._device_id, int):
                opts["ge.exec.deviceId"] = str(self._device_id)
                opts["ge.session_device_id"] = str(self._device_id)
            else:
                # An empty list passes the setter and fails here with IndexError, as in the real code.
                opts["ge.session_device_id"] = str(self._device_id[0])
                opts["ge.exec.deviceId"] = ";".join(str(dev) for dev in self._device_id)
        if self._sync_kv_timeout is not None:
            opts["llm.SyncKvCacheWaitTime"] = str(self._sync_kv_timeout)
        if self._deploy_res_path:
            opts["llm.deployResPath"] = str(self._deploy_res_path)
        self._add_memory_options(opts)
        self._add_connect_options(opts)
        if self._cluster_info:
            opts["llm.ClusterInfo"] = str(self._cluster_info)
        if self._output_max_size is not None:
            opts["llm.OutputMaxSize"] = str(self._output_max_size)
        if self._enable_switch_role:
            opts["llm.EnableSwitchRole"] = "1"
        opts["llm.MemoryUtilization"] = str(self._mem_utilization)  # the setter never allows None
        return opts

    def _add_memory_options(self, opts: Dict[str, str]) -> None:
        if self._buf_pool_cfg:
            opts["llm.BufPoolCfg"] = str(self._buf_pool_cfg)
        if self._mem_pool_cfg:
            opts["llm.MemPoolConfig"] = str(self._mem_pool_cfg)
        if self._host_mem_pool_cfg:
            opts["llm.HostMemPoolConfig"] = str(self._host_mem_pool_cfg)
        if self._enable_cache_manager is not None:
            opts["llm.EnableCacheManager"] = "1" if self._enable_cache_manager else "0"
        if self._enable_remote_cache_accessible is not None:
            opts["llm.EnableRemoteCacheAccessible"] = "1" if self._enable_remote_cache_accessible else "0"

    def _add_connect_options(self, opts: Dict[str, str]) -> None:
        if self._listen_ip_info:
            opts["llm.listenIpInfo"] = str(self._listen_ip_info)
        # "Ever set" options: an explicit value, even the default or "", is passed to the engine.
        if self._link_total_time is not None:
            opts["llm.LinkTotalTime"] = str(self._link_total_time)
        if self._link_retry_count is not None:
            opts["llm.LinkRetryCount"] = str(self._link_retry_count)
        if self._rdma_traffic_class is not None:
            opts["llm.RdmaTrafficClass"] = str(self._rdma_traffic_class)
        if self._rdma_service_level is not None:
            opts["llm.RdmaServiceLevel"] = str(self._rdma_service_level)
        if self._local_comm_res is not None:
            opts["llm.LocalCommRes"] = str(self._local_comm_res)
        if self._transfer_backend is not None:
            opts["llm.TransferBackend"] = str(self._transfer_backend)
        if self._global_resource_config is not None:
            opts["llm.GlobalResourceConfig"] = str(self._global_resource_config)

    @property
    def options(self) -> Dict[str, str]:
        return self._options

    # -- engine options ------------------------------------------------------------------------------------

    @property
    def ge_options(self) -> Dict[str, str]:
        return self._ge_options

    @ge_options.setter
    def ge_options(self, ge_options: Dict[str, str]) -> None:
        check_isinstance("ge_options", ge_options, dict)
        # None passes the type check and then fails here with AttributeError, as in the real setter.
        check_dict("ge_options", ge_options, str, str)
        self._ge_options = ge_options

    @property
    def device_id(self) -> Optional[DeviceId]:
        return self._device_id

    @device_id.setter
    def device_id(self, device_id: DeviceId) -> None:
        check_isinstance("device_id", device_id, [list, tuple, int], allow_none=False)
        if isinstance(device_id, (list, tuple)):
            check_isinstance("device_id", device_id, [list, tuple], int)
            # All sign checks run before any range check, matching the real two-pass order.
            for dev_id in device_id:
                raise_if_false(dev_id >= 0, "device_id should be greater than or equal to zero.")
            for dev_id in device_id:
                check_int32("device_id", dev_id)
        else:
            raise_if_false(device_id >= 0, "device_id should be greater than or equal to zero.")
            check_int32("device_id", device_id)
        self._device_id = device_id

    @property
    def sync_kv_timeout(self) -> Optional[Union[int, str]]:
        return self._sync_kv_timeout

    @sync_kv_timeout.setter
    def sync_kv_timeout(self, sync_kv_timeout: Union[int, str]) -> None:
        check_isinstance("sync_kv_timeout", sync_kv_timeout, [int, str], allow_none=False)
        if isinstance(sync_kv_timeout, str):
            raise_if_false(sync_kv_timeout.isdigit(), "sync_kv_timeout must be digit.")
        raise_if_false(int(sync_kv_timeout) > 0, "sync_kv_timeout should be greater than zero.")
        check_int32("sync_kv_timeout", int(sync_kv_timeout))
        self._sync_kv_timeout = sync_kv_timeout

    @property
    def deploy_res_path(self) -> Optional[str]:
        return self._deploy_res_path

    @deploy_res_path.setter
    def deploy_res_path(self, deploy_res_path: Optional[str]) -> None:
        self._deploy_res_path = check_isinstance("deploy_res_path", deploy_res_path, str)

    @property
    def listen_ip_info(self) -> Optional[str]:
        return self._listen_ip_info

    @listen_ip_info.setter
    def listen_ip_info(self, listen_ip_info: Optional[str]) -> None:
        self._listen_ip_info = check_isinstance("listen_ip_info", listen_ip_info, str)

    @property
    def enable_switch_role(self) -> Optional[bool]:
        return self._enable_switch_role

    @enable_switch_role.setter
    def enable_switch_role(self, enable_switch_role: Optional[bool]) -> None:
        self._enable_switch_role = check_isinstance("enable_switch_role", enable_switch_role, [bool])

    @property
    def link_total_time(self) -> int:
        return 0 if self._link_total_time is None else self._link_total_time

    @link_total_time.setter
    def link_total_time(self, link_total_time: int) -> None:
        check_isinstance("link_total_time", link_total_time, int, allow_none=False)
        raise_if_false(
            0 <= link_total_time <= _UINT32_MAX,
            f"link_total_time should be an integer between [0, 2^32-1], given value is {link_total_time}",
        )
        self._link_total_time = link_total_time

    @property
    def link_retry_count(self) -> int:
        return 1 if self._link_retry_count is None else self._link_retry_count

    @link_retry_count.setter
    def link_retry_count(self, link_retry_count: int) -> None:
        check_isinstance("link_retry_count", link_retry_count, int, allow_none=False)
        raise_if_false(
            1 <= link_retry_count <= 100,
            f"link_retry_count should be an integer between [1, 100], given value is {link_retry_count}",
        )
        self._link_retry_count = link_retry_count

    @property
    def rdma_traffic_class(self) -> Optional[int]:
        return self._rdma_traffic_class

    @rdma_traffic_class.setter
    def rdma_traffic_class(self, rdma_traffic_class: int) -> None:
        check_uint32("rdma_traffic_class", rdma_traffic_class)
        self._rdma_traffic_class = rdma_traffic_class

    @property
    def rdma_service_level(self) -> Optional[int]:
        return self._rdma_service_level

    @rdma_service_level.setter
    def rdma_service_level(self, rdma_service_level: int) -> None:
        check_uint32("rdma_service_level", rdma_service_level)
        self._rdma_service_level = rdma_service_level

    @property
    def local_comm_res(self) -> str:
        return "" if self._local_comm_res is None else self._local_comm_res

    @local_comm_res.setter
    def local_comm_res(self, local_comm_res: Optional[str]) -> None:
        self._local_comm_res = check_isinstance("local_comm_res", local_comm_res, str)

    @property
    def transfer_backend(self) -> str:
        return "" if self._transfer_backend is None else self._transfer_backend

    @transfer_backend.setter
    def transfer_backend(self, transfer_backend: Optional[str]) -> None:
        self._transfer_backend = check_isinstance("transfer_backend", transfer_backend, str)

    @property
    def global_resource_config(self) -> str:
        return "" if self._global_resource_config is None else self._global_resource_config

    @global_resource_config.setter
    def global_resource_config(self, global_resource_config: Optional[str]) -> None:
        self._global_resource_config = check_isinstance("global_resource_config", global_resource_config, str)

    # -- memory options ------------------------------------------------------------------------------------

    @property
    def mem_utilization(self) -> float:
        return self._mem_utilization

    @mem_utilization.setter
    def mem_utilization(self, mem_utilization: float) -> None:
        # Must be a real float: an int such as 1 is a TypeError, as in the real setter.
        check_isinstance("mem_utilization", mem_utilization, float, allow_none=False)
        raise_if_false(
            0.0 <= mem_utilization <= 1.0,
            f"mem_utilization must be in range [0,1], current:{mem_utilization}",
        )
        self._mem_utilization = mem_utilization

    @property
    def buf_pool_cfg(self) -> Optional[str]:
        return self._buf_pool_cfg

    @buf_pool_cfg.setter
    def buf_pool_cfg(self, buf_pool_cfg: Optional[str]) -> None:
        self._buf_pool_cfg = check_isinstance("buf_pool_cfg", buf_pool_cfg, str)

    @property
    def mem_pool_cfg(self) -> Optional[str]:
        return self._mem_pool_cfg

    @mem_pool_cfg.setter
    def mem_pool_cfg(self, mem_pool_cfg: Optional[str]) -> None:
        self._mem_pool_cfg = check_isinstance("mem_pool_cfg", mem_pool_cfg, str)

    @property
    def host_mem_pool_cfg(self) -> Optional[str]:
        return self._host_mem_pool_cfg

    @host_mem_pool_cfg.setter
    def host_mem_pool_cfg(self, host_mem_pool_cfg: Optional[str]) -> None:
        self._host_mem_pool_cfg = check_isinstance("host_mem_pool_cfg", host_mem_pool_cfg, str)

    @property
    def enable_cache_manager(self) -> bool:
        return bool(self._enable_cache_manager)

    @enable_cache_manager.setter
    def enable_cache_manager(self, enable_cache_manager: Optional[bool]) -> None:
        self._enable_cache_manager = check_isinstance("enable_cache_manager", enable_cache_manager, [bool])

    @property
    def enable_remote_cache_accessible(self) -> bool:
        return bool(self._enable_remote_cache_accessible)

    @enable_remote_cache_accessible.setter
    def enable_remote_cache_accessible(self, enable_remote_cache_accessible: Optional[bool]) -> None:
        self._enable_remote_cache_accessible = check_isinstance(
            "enable_remote_cache_accessible", enable_remote_cache_accessible, [bool]
        )

    # -- offline / internal --------------------------------------------------------------------------------

    @property
    def cluster_info(self) -> str:
        return self._cluster_info

    @cluster_info.setter
    def cluster_info(self, cluster_info: str) -> None:
        """JSON text; IP strings under ``listen_ip_info`` are turned into the engine's int form."""
        check_isinstance("cluster_info", cluster_info, str)
        info = json.loads(cluster_info)
        if "listen_ip_info" in info:
            entries: Sequence[Dict[str, Any]] = info["listen_ip_info"]
            for ip_info in entries:
                ip_info["ip"] = trans_str_ip(ip_info["ip"])
        self._cluster_info = json.dumps(info)

    @property
    def output_max_size(self) -> Optional[int]:
        return self._output_max_size

    @output_max_size.setter
    def output_max_size(self, output_max_size: Optional[int]) -> None:
        self._output_max_size = check_isinstance("output_max_size", output_max_size, int)


LLMConfig = LlmConfig
