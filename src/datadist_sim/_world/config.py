"""``SimConfig``: the modelled durations, limits and fidelity switches of a world.

On its own floor, below the world, so that the world's parts (communicators, links, transfers) can be
configured without importing the world itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Tuple


@dataclass
class SimConfig:
    """Modelled durations and limits. Fidelity switches name the source they follow."""

    link_setup_s: float = 0.05
    """Simulated time to set one link up (links of one call are set up in parallel)."""
    message_rtt_s: float = 0.0005
    """One control-message round trip (unlink notices, handshakes that fail fast)."""
    comm_setup_s: float = 0.5
    """Time for a rank-table communicator (``link``) to reach OK once every member has joined."""
    poll_interval_s: float = 1.0
    """How far one PREPARING poll moves time while a member is still missing (a client's poll gap)."""
    hccl_connect_timeout_s: float = 30.0
    """How long a rank-table link waits for a member that does not answer when ``llm.LinkTotalTime``
    is 0: the memory-descriptor exchange times out after ``link_total_time``, else 30 s (hixl
    ``comm_link_manager.cc:90``)."""
    comm_timeout_keeps_link: bool = False
    """A transfer that times out on a rank-table (``link``) link: False (the documented behaviour,
    status table: the link is unrecoverable and must be re-established) leaves it broken, later
    transfers get ``LLM_NOT_YET_LINK`` until ``unlink`` and ``link``; True follows the hixl code, which
    only aborts the stream and keeps the comm entity (``comm_entity.cc:538``; ``LLM_NOT_YET_LINK`` only
    for a missing or destroyed entity, ``data_cache_engine.cc:141-152``), so later transfers run."""
    max_links: int = 512
    max_clusters_per_call: int = 16
    v2_cluster_limit: bool = False
    """The docs give the 16-clusters-per-call limit for CacheManager mode too; the hixl code has none.
    Default follows the code; True follows the docs."""
    one_instance_per_process: bool = False
    """Enforce the real rule of one initialised LLMDataDist per process across this whole world."""
    pause_wall_limit_s: float = 5.0
    """Longest wall time a call waits on a paused peer before it counts as unanswered."""
    bandwidth_bytes_per_s: float = 25e9
    """Default transfer bandwidth of a link (bytes / bandwidth + one rtt): RoCE at 200 Gb/s."""
    link_bandwidth: Dict[Tuple[int, int], float] = field(default_factory=dict)
    """Per-link bandwidth, keyed by the two cluster ids in ascending order (``set_link_bandwidth``)."""
    link_busy: str = "reject"
    """A documented conflicting pair on one link (``pull_cache`` with ``transfer_cache_async``: hixl
    ``docs/zh/api/python/LLMStatusCode.md:24``):
    ``"reject"`` gives ``LLM_LINK_BUSY`` (the docs), ``"serialize"`` waits (the open-source engine)."""
    metadata_only: bool = False
    """No bytes back simulated memory: transfers check ranges and time but move nothing (large runs)."""
    unified_exceptions: bool = False
    """The real split packaging has two exception classes: a v1 ``KvCacheManager`` raises
    ``llm_datadist_v1.LLMException`` with v1 codes (a plain ``Enum``), which ``except
    llm_datadist.LLMException`` does not catch (GE ``llm_datadist_v1/status.py``). True raises one class
    that both names catch, with ``llm_datadist`` codes, as a single package would."""
    legacy_codes: bool = False
    """Produce the legacy model-mode codes under the closest current condition (README, status-code
    matrix): a prefix key bound twice, a pull of a prefix never loaded, a call after finalize, and so on.
    Off by default, because the current real API gives other codes there."""
