"""One simulated LLM-DataDist process: its identity, role, listeners and the links it holds."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from enum import Enum
from typing import Dict, List, Optional, Tuple

from datadist_sim.faults.engine_codes import EngineMode, mode_of

Endpoint = Tuple[str, int]


class Mode(Enum):
    """Which engine the instance runs: v1 (KvCacheManager) or v2 (CacheManager)."""

    KV_CACHE_MANAGER = "v1"
    CACHE_MANAGER = "v2"


class Role(Enum):
    """Engine role strings, as ``llm.Role`` carries them."""

    PROMPT = "Prompt"
    DECODER = "Decoder"
    MIX = "Mix"


@dataclass
class PeerLink:
    """This side's record of a link. A link is healthy when both ends hold a record of each other."""

    remote_id: int
    is_client: bool
    since: float
    via_comm: Optional[int] = None
    broken: bool = False
    """A transfer on this link timed out: per the documented remedy it must be re-established."""
    peer_lost: bool = False
    """The peer's process died; the next transfer waits for an answer that never comes."""
    instance: Optional[object] = None
    """hixl backend: the peer instance (``ClusterNode``) this one-sided link was made to; one that
    finalized and came back under the same id is another instance the link does not reach."""
    by_table: bool = False
    """This end moves bytes one-sidedly (v2 with ``llm.EnableRemoteCacheAccessible``), finding them in
    its copy of the peer's cache table (``_world/cache_table.py``)."""
    table: Optional[object] = None
    """That copy (a ``CacheTable``), read at the first lookup on this link; a new link starts without."""


def reads_table(node: ClusterNode) -> bool:
    """Whether ``node``'s links read the peer's cache table (``PeerLink.by_table``): the v2 engine with
    remote cache access on (the engine parses the option, default off: hixl ``data_cache_engine.cc:208``,
    ``llm_utils.cc:65-80``)."""
    return node.mode is Mode.CACHE_MANAGER and node.settings.remote_cache_accessible


@dataclass
class NodeSettings:
    """Engine options the world acts on, parsed once at ``init``."""

    device_ids: List[int] = field(default_factory=lambda: [0])
    sync_kv_timeout_ms: int = 1000
    enable_switch_role: bool = False
    remote_cache_accessible: bool = False
    link_total_time_s: int = 0
    link_retry_count: int = 1
    transfer_backend: str = ""
    """``"hixl"`` (``llm.TransferBackend``) or ``""``, the default (HCCL) backend. The hixl backend keeps
    a one-sided link table: only the caller of ``link_clusters`` holds the link (``_world/links.py``)."""
    options: Dict[str, str] = field(default_factory=dict)


@dataclass(eq=False)
class ClusterNode:
    """The world's state of one initialised instance (a simulated OS process); equal only to itself."""

    cluster_id: int
    role: Role
    mode: Mode
    settings: NodeSettings
    listeners: List[Endpoint] = field(default_factory=list)
    peers: Dict[int, PeerLink] = field(default_factory=dict)
    alive: bool = True
    link_mutex: threading.Lock = field(default_factory=threading.Lock)
    hixl: bool = field(init=False)
    """The instance runs the hixl transfer backend (one-sided links, no rank-table links); its settings
    are fixed at init, so this is worked out once."""
    engine_mode: EngineMode = field(init=False)
    """The mode whose codes its calls can give (``faults.engine_codes``), fixed at init as well."""

    @property
    def device_num(self) -> int:
        return len(self.settings.device_ids)

    def __post_init__(self) -> None:
        self.hixl = self.settings.transfer_backend == "hixl"
        self.engine_mode = mode_of(self.mode is Mode.CACHE_MANAGER, self.hixl)

    def describe(self) -> str:
        return f"cluster {self.cluster_id} ({self.role.value}, {self.mode.value})"
