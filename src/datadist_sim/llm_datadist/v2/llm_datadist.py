"""``LLMDataDist``: validates arguments exactly as the real class does and drives the simulated world.

Each instance joins the world current at construction (``SimWorld.activate``, else the default world)
and, once initialised, is one simulated process of that world.
"""

from __future__ import annotations

import atexit
import contextlib
import copy
from typing import Any, Dict, List, Optional, Tuple, Union, cast

from datadist_sim._world import door
from datadist_sim._world.door import ClusterNode, Endpoint, Mode, Role, SimError, SimWorld, current_world
from datadist_sim.llm_datadist._engine import api_call
from datadist_sim.llm_datadist._engine import engine_call as _engine_call
from datadist_sim.llm_datadist.configs import LLMClusterInfo, LLMRole, trans_str_ip
from datadist_sim.llm_datadist.status import (
    LLMException,
    LLMStatusCode,
    code_2_status,
    raise_if_false,
    raise_if_true,
)
from datadist_sim.llm_datadist.utils.utils import (
    check_dict,
    check_int32,
    check_isinstance,
    check_uint32,
    check_uint64,
)
from datadist_sim.llm_datadist.v2.cache_manager import CacheManager
from datadist_sim.llm_datadist.v2.config import (
    engine_listen_endpoint,
    engine_options,
    int_to_ip,
    node_settings,
    v1_listen_endpoints,
)
from datadist_sim.llm_datadist.v2.llm_types import RegisterMemStatus
from datadist_sim.llm_datadist.v2.llm_utils import parse_listen_ip_info

__all__ = ["LLMDataDist"]

_MAX_CLUSTER_NAME = 128
_MAX_NODE_NUM = 4
_ROLE_NAMES = {LLMRole.PROMPT: Role.PROMPT, LLMRole.DECODER: Role.DECODER, LLMRole.MIX: Role.MIX}
_MEM_STATUS = {0: RegisterMemStatus.OK, 1: RegisterMemStatus.PREPARING, 2: RegisterMemStatus.FAILED}
_live: Dict[LLMDataDist, None] = {}
"""Initialised instances in init order (so teardown is deterministic); held strongly because a real
engine outlives its Python handle."""

Clusters = Union[List[LLMClusterInfo], Tuple[LLMClusterInfo, ...]]


class LLMDataDist:
    """One LLM-DataDist instance: a Prompt or Decoder cluster of the simulated world."""

    llm_engine_instance: Optional[LLMDataDist] = None

    def __init__(self, role: LLMRole, cluster_id: int) -> None:
        check_isinstance("role", role, LLMRole)
        check_uint64("cluster_id", cluster_id)
        self._role = role
        self._cluster_id = cluster_id
        self._world = current_world()
        self._node: Optional[ClusterNode] = None
        self._kv_cache_manager: Any = None
        self._cache_manager: Optional[CacheManager] = None
        self._is_initialized = False
        self._engine_options: Dict[str, str] = {}
        self._enable_cache_mgr = False
        self._enable_local_comm_res = False

    # -- lifecycle --------------------------------------------------------------------------------

    @api_call
    def init(self, options: Dict[str, str]) -> None:
        """Initialise the engine; the mode is CacheManager iff ``llm.EnableCacheManager == "1"``."""
        if self._is_initialized:
            return
        raise_if_false(
            not (self._world.config.one_instance_per_process and self._world.nodes),
            "Cannot init multiple LLMDataDists",
            status_code=LLMStatusCode.LLM_FAILED,
        )
        check_isinstance("options", options, dict)
        self._check_flow_graph_max_size(options)
        self._setup_engine_options(options)
        listen = self._listen_endpoints(options)
        mode = Mode.CACHE_MANAGER if self._enable_cache_mgr else Mode.KV_CACHE_MANAGER
        wrapper = "initialize_v2" if self._enable_cache_mgr else "initialize"
        options_for_engine = engine_options(wrapper, self._engine_options)
        with _engine_call("[LLMDataDist.init]", f"Failed to initialize llm datadist, options = {options}"):
            settings = node_settings(options_for_engine)
            # the engine listens iff llm.ListenPort is set, and then requires llm.ListenIp
            # (``LLMLinkManager::Initialize``, hixl ``src/llm_datadist/link_mgr/llm_link_manager.cc:28-35``):
            # an ip alone is a client's own address, a port alone is LLM_PARAM_INVALID
            if self._enable_cache_mgr and "llm.ListenPort" in options_for_engine:
                if "llm.ListenIp" not in options_for_engine:
                    raise SimError(LLMStatusCode.LLM_PARAM_INVALID, "llm.ListenIp is not assigned")
                listen = [
                    engine_listen_endpoint(
                        options_for_engine["llm.ListenIp"],
                        options_for_engine["llm.ListenPort"],
                        hixl=settings.transfer_backend == "hixl",
                    )
                ]
            self._node = self._world.add_node(
                self._cluster_id, _ROLE_NAMES[self._role], mode, settings, listen
            )
        if self._enable_cache_mgr:
            self._cache_manager = CacheManager(self._world, self._node, self._engine_options)
        else:
            from datadist_sim.llm_datadist_v1.kv_cache_manager import KvCacheManager

            self._kv_cache_manager = KvCacheManager(self._world, self._node, self._role)
        if LLMDataDist.llm_engine_instance is None:
            LLMDataDist.llm_engine_instance = self
        _live[self] = None
        self._is_initialized = True

    def _check_flow_graph_max_size(self, options: Dict[str, str]) -> None:
        value = options.get("ge.flowGraphMemMaxSize")
        if value is None:
            return
        check_isinstance("ge.flowGraphMemMaxSize", value, str)
        raise_if_false(
            len(value.split(",")) == 1, "ge.flowGraphMemMaxSize only support one mem pool in llm datadist"
        )
        raise_if_false(value.isdigit(), "ge.flowGraphMemMaxSize must be digit, config value={0}", value)

    def _setup_engine_options(self, options: Dict[str, str]) -> None:
        """Derive the engine options and the mode, with the real defaults and consistency checks."""
        opts = dict(options)
        opts["llm.Role"] = _ROLE_NAMES[self._role].value
        self._enable_local_comm_res = "llm.LocalCommRes" in options
        if self._enable_local_comm_res:
            opts.setdefault("llm.EnableCacheManager", "1")
            opts.setdefault("llm.EnableRemoteCacheAccessible", "1")
        self._engine_options = opts
        self._enable_cache_mgr = opts.get("llm.EnableCacheManager") == "1"
        if self._enable_local_comm_res:
            self._check_is_cache_mgr_mode("llm.LocalCommRes")
        if "llm.TransferBackend" in options:
            raise_if_false(
                self._enable_cache_mgr,
                "llm.TransferBackend is not supported when llm.EnableCacheManager is not configured.",
            )
            opts.setdefault("llm.EnableRemoteCacheAccessible", "1")
            raise_if_false(
                opts["llm.EnableRemoteCacheAccessible"] == "1",
                "llm.TransferBackend is not supported when llm.EnableRemoteCacheAccessible is not enable.",
            )
            raise_if_false(
                "llm.listenIpInfo" in options,
                "llm.TransferBackend is not supported when llm.listenIpInfo is not configured.",
            )
        if self._enable_cache_mgr and "llm.listenIpInfo" in options:
            ip, port = parse_listen_ip_info(options["llm.listenIpInfo"])
            opts["llm.ListenIp"] = ip
            opts["llm.ListenPort"] = str(port)

    def _listen_endpoints(self, options: Dict[str, str]) -> List[Endpoint]:
        """v1: the Prompt must listen, once per device. v2: whoever sets ``listen_ip_info`` is a server;
        the engine reads its endpoint (``engine_listen_endpoint``) inside ``init``'s engine call."""
        opts = self._engine_options
        if self._enable_cache_mgr:
            return []
        if "llm.ClusterInfo" in opts:
            return []
        device_num = len(opts["ge.exec.deviceId"].split(";"))
        if self._role != LLMRole.PROMPT:
            return []
        raise_if_false("llm.listenIpInfo" in opts, "neither llm.ClusterInfo nor llm.listenIp was specified")
        return v1_listen_endpoints(opts["llm.listenIpInfo"], device_num)

    @api_call
    def finalize(self) -> None:
        """Release the instance; a no-op if it is not initialised. Never raises."""
        if not self._is_initialized:
            return
        if self._node is not None:
            self._world.remove_node(self._node)
        for manager in (self._kv_cache_manager, self._cache_manager):
            if manager is not None:
                manager._initialized = False
        self._is_initialized = False
        _live.pop(self, None)
        if LLMDataDist.llm_engine_instance is self:
            LLMDataDist.llm_engine_instance = None

    # -- checks -----------------------------------------------------------------------------------

    def _check_is_inited(self) -> ClusterNode:
        if not self._is_initialized or self._node is None:
            raise RuntimeError("llm datadist is not initialized")
        return self._node

    def _check_is_cache_mgr_mode(self, func_name: str) -> None:
        raise_if_false(
            self._enable_cache_mgr,
            "{0} is not supported when llm.EnableCacheManager is not configured.",
            func_name,
        )

    def _check_is_not_cache_mgr_mode(self, func_name: str) -> None:
        raise_if_false(
            not self._enable_cache_mgr,
            "{0} is not supported when llm.EnableCacheManager is configured.",
            func_name,
        )

    # -- properties -------------------------------------------------------------------------------

    @property
    def cluster_id(self) -> int:
        return self._cluster_id

    @property
    def kv_cache_manager(self) -> Any:
        self._check_is_inited()
        self._check_is_not_cache_mgr_mode("kv_cache_manager")
        return self._kv_cache_manager

    @property
    def cache_manager(self) -> CacheManager:
        self._check_is_inited()
        self._check_is_cache_mgr_mode("cache_manager")
        assert self._cache_manager is not None
        return self._cache_manager

    # -- cluster links ----------------------------------------------------------------------------

    @api_call
    def link_clusters(
        self, clusters: Clusters, timeout: int = 3000
    ) -> Tuple[LLMStatusCode, List[LLMStatusCode]]:
        """Link to each cluster; engine failures are returned as codes, never raised."""
        node = self._check_is_inited()
        self._check_timeout_and_clusters(clusters, timeout)
        if self._enable_cache_mgr:
            local_comm_res = self._engine_options.get("llm.LocalCommRes")
            for cluster in clusters:
                if not self._enable_local_comm_res or not local_comm_res:
                    raise_if_false(
                        cluster.local_ip_info_list,
                        "local_ip_info_list is empty. Call append_local_ip_info to add local_ip_info "
                        "when local_comm_res option is unspecified or empty.",
                    )
                check_uint64("remote_cluster_id", cluster.remote_cluster_id)
        ret, rets = door.link_clusters(self._world, node, _requests(clusters), timeout)
        return code_2_status(ret), [code_2_status(r) for r in rets]

    @api_call
    def unlink_clusters(
        self, clusters: Clusters, timeout: int = 3000, force: bool = False
    ) -> Tuple[LLMStatusCode, List[LLMStatusCode]]:
        """Unlink each cluster; ``force`` tears down only this side. Codes are returned, never raised."""
        node = self._check_is_inited()
        self._check_timeout_and_clusters(clusters, timeout)
        check_isinstance("force", force, bool)
        for cluster in clusters:
            check_uint64("remote_cluster_id", cluster.remote_cluster_id)
        ret, rets = door.unlink_clusters(self._world, node, _requests(clusters), timeout, bool(force))
        return code_2_status(ret), [code_2_status(r) for r in rets]

    @staticmethod
    def _check_timeout_and_clusters(clusters: Clusters, timeout: int) -> None:
        check_int32("timeout", timeout)
        raise_if_false(timeout > 0, "Param timeout should be greater than 0.")
        check_isinstance("clusters", clusters, [list, tuple], LLMClusterInfo)

    @api_call
    def check_link_status(self, remote_cluster_id: int) -> None:
        """v1: succeed on a healthy link, raise the engine's code otherwise."""
        node = self._check_is_inited()
        self._check_is_not_cache_mgr_mode("check_link_status")
        check_uint64("remote_cluster_id", remote_cluster_id)
        with _engine_call("[check_link_status]", f"remote_cluster_id is {remote_cluster_id}"):
            door.check_link_status(self._world, node, remote_cluster_id)

    @api_call
    def switch_role(self, role: LLMRole, switch_options: Optional[Dict[str, str]] = None) -> None:
        """Change role; the listener follows ``llm.listenIpInfo`` in ``switch_options``."""
        node = self._check_is_inited()
        check_isinstance("role", role, LLMRole)
        if not self._enable_cache_mgr:
            raise_if_false(self._role != role, f"role not changed, role = {role.name}")
        role_name = _ROLE_NAMES[role]  # the real _role_to_str, before switch_options is looked at
        check_isinstance("switch_options", switch_options, dict)
        options = dict(switch_options) if switch_options is not None else {}
        if not self._enable_cache_mgr and role == LLMRole.PROMPT:
            # The real check tests switch_options itself (None is a TypeError) and says "was" (sic).
            raise_if_false(
                "llm.listenIpInfo" in cast(Dict[str, str], switch_options),
                'Failed to switch to Prompt, option "llm.listenIpInfo" was specified',
            )
        parsed: Optional[Tuple[str, int]] = None
        if "llm.listenIpInfo" in options and (self._enable_cache_mgr or role == LLMRole.PROMPT):
            parsed = parse_listen_ip_info(options["llm.listenIpInfo"])
            # v1 (EngineConfig.parse_listen_ip_info) hands the engine the host as an int, and a host
            # that is not an IPv4 address is a plain RuntimeError (trans_str_ip).
            host = parsed[0] if self._enable_cache_mgr else str(trans_str_ip(parsed[0]))
            options["llm.ListenIp"], options["llm.ListenPort"] = host, str(parsed[1])
        engine_options("switch_role_v2" if self._enable_cache_mgr else "switch_role", options)
        with _engine_call("[switch_role]", f"Failed to switch role, role = {role}, options = {options}"):
            listen: Optional[List[Endpoint]] = None
            if parsed is not None:
                listen = (
                    [engine_listen_endpoint(parsed[0], str(parsed[1]), hixl=node.hixl)]
                    if self._enable_cache_mgr
                    else [parsed]
                )
            self._world.switch_role(node, role_name, listen)
        if self._kv_cache_manager is not None:
            self._kv_cache_manager._switch_role(role)
        self._role = role

    # -- rank-table communicators (CacheManager mode) ----------------------------------------------

    @api_call
    def link(self, comm_name: str, cluster_rank_info: Dict[int, int], rank_table: str) -> int:
        """Join communicator ``comm_name``; poll ``query_register_mem_status`` until OK."""
        node = self._check_is_inited()
        self._check_is_cache_mgr_mode("link")
        check_isinstance("comm_name", comm_name, str, allow_none=False)
        raise_if_true(len(comm_name) == 0, "comm_name can not be empty")
        raise_if_false(len(comm_name) < _MAX_CLUSTER_NAME, "comm_name length should be smaller than 128.")
        check_isinstance("cluster_rank_info", cluster_rank_info, dict)
        check_dict("cluster_rank_info", cluster_rank_info, int, int)
        raise_if_false(
            len(cluster_rank_info) <= _MAX_NODE_NUM, "cluster_rank_info size can not be greater than 4."
        )
        for k, v in cluster_rank_info.items():
            check_uint64("cluster_rank_info key", k)
            check_uint32("cluster_rank_info value", v)
        check_isinstance("rank_table", rank_table, str)
        ranks = list(cluster_rank_info.values())
        raise_if_false(len(ranks) > 1, "cluster num must be bigger than 1.")
        raise_if_false(ranks == sorted(copy.copy(ranks)), "rank in cluster_rank_info must be ordered")
        with _engine_call("[link]", f"cluster_rank_info = {cluster_rank_info}"):
            _refuse_on_hixl(node)
            comm_id = self._world.comms.link(node, comm_name, cluster_rank_info, rank_table)
        self.cache_manager.set_is_call_linked()
        return comm_id

    @api_call
    def unlink(self, comm_id: int) -> None:
        node = self._check_is_inited()
        self._check_is_cache_mgr_mode("unlink")
        check_isinstance("comm_id", comm_id, int)
        check_uint64("comm_id", comm_id)
        with _engine_call("[unlink]", f"comm_id = {comm_id}"):
            _refuse_on_hixl(node)
            self._world.comms.unlink(node, comm_id)

    @api_call
    def query_register_mem_status(self, comm_id: int) -> RegisterMemStatus:
        node = self._check_is_inited()
        self._check_is_cache_mgr_mode("query_register_mem_status")
        check_isinstance("comm_id", comm_id, int)
        check_uint64("comm_id", comm_id)
        with _engine_call("[query_register_mem_status]", f"comm_id = {comm_id}"):
            _refuse_on_hixl(node)
            status = self._world.comms.query(node, comm_id)
        return _MEM_STATUS.get(status.value, RegisterMemStatus.FAILED)


def _refuse_on_hixl(node: ClusterNode) -> None:
    """The hixl backend has no rank-table links: ``Link``, ``Unlink`` and ``QueryRegisterMemStatus`` all
    answer ``LLM_FEATURE_NOT_ENABLED`` (hixl ``hixl_transfer_engine.cc:226-247``)."""
    if node.hixl:
        raise SimError(LLMStatusCode.LLM_FEATURE_NOT_ENABLED, "The feature is not supported.")


def _requests(clusters: Clusters) -> List[door.LinkRequest]:
    return [
        door.LinkRequest(
            remote_cluster_id=int(cluster.remote_cluster_id or 0),
            local=tuple((int_to_ip(ip), port) for ip, port in cluster.local_ip_info_list),
            remote=tuple((int_to_ip(ip), port) for ip, port in cluster.remote_ip_info_list),
        )
        for cluster in clusters
    ]


def finalize_all(world: Optional[SimWorld] = None) -> None:
    """Finalize every live instance (of ``world`` only, if given); what a test teardown wants."""
    for instance in list(_live):
        if world is None or instance._world is world:
            instance.finalize()


def _shutdown_handler() -> None:
    """At exit, finalize every live instance, as the real package does for its one instance."""
    for instance in list(_live):
        with contextlib.suppress(LLMException):
            instance.finalize()


atexit.register(_shutdown_handler)
