"""What a ``hixl`` engine is and holds: its settings, regions, connections, requests and notifies, and the
world's table of engines (``SimWorld.hixl``).

The operations on engines (``hixl_engines``, ``hixl_transfers``) and the faults they meet
(``hixl_faults``) both act on this state; it knows neither of them nor the world, so the three import
one way: operations over faults over state. An engine ends here (``tear_down``, by ``finalize`` or a
kill), and a failed transfer leaves its connection dropped or unusable here (``fail_connection``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum, IntEnum
from typing import Dict, List, NamedTuple, Optional, Sequence, Set, Tuple

from datadist_sim._status import LLMStatusCode
from datadist_sim._status_hixl import HixlCode
from datadist_sim._world.cluster import Endpoint
from datadist_sim._world.hixl_pool import DEFAULT_CAPACITY, DEFAULT_WORKERS, ConnectPool
from datadist_sim._world.process_memory import Again

Desc = Tuple[int, int, int]
"""One transfer descriptor: ``(local_addr, remote_addr, len)``."""


class EngineKind(Enum):
    COMM = "comm"
    HIXL_CS = "hixl_cs"


class OpState(IntEnum):
    """The values of ``hixl.TransferStatus`` (``hixl_types.h:74``)."""

    WAITING = 0
    COMPLETED = 1
    TIMEOUT = 2
    FAILED = 3


@dataclass(frozen=True)
class EngineSettings:
    kind: EngineKind = EngineKind.COMM
    auto_connect: bool = False
    workers: int = DEFAULT_WORKERS
    capacity: int = DEFAULT_CAPACITY


class Region(NamedTuple):
    addr: int
    nbytes: int
    device: bool


class Request(NamedTuple):
    remote: str
    user_data: int
    done_at: float
    state: OpState = OpState.COMPLETED
    """What it reports at ``done_at`` (a fault makes it ``FAILED``, ``hixl_faults``)."""


class Vetted:
    """A descriptor list that passed the range check: it holds while the connection goes to ``peer``
    and neither engine's registrations have changed since (``layout``). A plain class with slots, not
    a named tuple: a repeated transfer reads its fields first, and slots read fastest."""

    __slots__ = ("again", "copies", "layout", "peer", "peer_layout", "write")

    def __init__(
        self, peer: HixlEngine, layout: int, peer_layout: int, write: bool, copies: List[Desc]
    ) -> None:
        self.peer, self.layout, self.peer_layout, self.write = peer, layout, peer_layout, write
        self.copies = copies
        """``(dst, src, len)`` of each range, in order."""
        self.again: Optional[Again] = None
        """Set once a single small raw range moved: what copies it again at once
        (``AddressSpace.copy_again``)."""


@dataclass(eq=False)
class HixlEngine:
    name: str
    endpoint: Optional[Endpoint]
    settings: EngineSettings
    alive: bool = True
    regions: Dict[int, Region] = field(default_factory=dict)
    peers: Dict[str, HixlEngine] = field(default_factory=dict)
    requests: Dict[int, Request] = field(default_factory=dict)
    next_req: int = 1
    notifies: List[Tuple[bytes, bytes]] = field(default_factory=list)
    pool: ConnectPool = field(default_factory=ConnectPool)
    broken: Set[str] = field(default_factory=set)
    """Connections a failed transfer left unusable until they are made again (``hixl_faults``)."""
    layout: int = 0
    """Counts changes of ``regions`` (register, deregister, finalize): a transfer's range check, kept
    in ``vetted``, holds while neither engine's layout has moved."""
    vetted: Dict[Tuple[Desc, ...], Vetted] = field(default_factory=dict)
    """Descriptor lists that passed the range check (``hixl_transfers._plan``)."""
    cluster_id: Optional[int] = None
    """The ``llm_datadist`` instance this engine serves (``hixl_served``), None for a ``hixl.Hixl``'s:
    fault rules that name the instance by its id act on it too."""


class HixlEngines:
    """The world's hixl engines: who listens where, and the handles given out."""

    def __init__(self) -> None:
        self.listeners: Dict[Endpoint, HixlEngine] = {}
        self.next_handle = 0x10
        self.named: Dict[str, List[HixlEngine]] = {}
        """Every engine opened, by its name: what fault rules name (a killed one stays)."""
        self.served: Dict[int, HixlEngine] = {}
        """The engines of hixl-backend ``llm_datadist`` instances, by cluster id (``hixl_served``)."""

    def called(self, name: str) -> Sequence[HixlEngine]:
        """The engines opened under ``name`` (a fault rule's name for them)."""
        return self.named.get(name, ())


# -- life and connections --------------------------------------------------------------------------


def tear_down(engines: HixlEngines, engine: HixlEngine) -> bool:
    """End a live engine, by ``finalize`` or by the death of its process (a kill): its pool stops, its
    listener closes, and its connections, memory, requests and notifies go. False if it had ended."""
    if not engine.alive:
        return False
    engine.alive = False
    engine.pool.close()
    if engine.endpoint is not None and engines.listeners.get(engine.endpoint) is engine:
        del engines.listeners[engine.endpoint]
    engine.peers.clear()
    engine.regions.clear()
    engine.layout += 1
    engine.vetted.clear()
    engine.requests.clear()
    engine.notifies.clear()
    return True


def drop_connection(engine: HixlEngine, remote: str) -> None:
    engine.peers.pop(remote, None)
    engine.broken.discard(remote)
    if engine.settings.kind is EngineKind.HIXL_CS:  # client_manager.cc:168-179: its requests go too
        for req in [r for r, request in engine.requests.items() if request.remote == remote]:
            del engine.requests[req]


_FATAL_FREE = frozenset(
    {
        LLMStatusCode.LLM_PARAM_INVALID,
        LLMStatusCode.LLM_NOT_YET_LINK,
        LLMStatusCode.LLM_ALREADY_LINK,
        LLMStatusCode.LLM_FEATURE_NOT_ENABLED,
        LLMStatusCode.LLM_OUT_OF_MEMORY,
        HixlCode.PARAM_INVALID,
        HixlCode.NOT_CONNECTED,
        HixlCode.ALREADY_CONNECTED,
        HixlCode.UNSUPPORTED,
        HixlCode.RESOURCE_EXHAUSTED,
    }
)
"""Codes that leave a connection usable (adxl ``IsLinkFatal``, ``adxl_utils.cc:88-99``): every other
failure of a transfer is fatal to its connection."""


def fail_connection(engine: HixlEngine, remote: str, code: object) -> None:
    """A transfer on ``remote``'s connection failed with ``code``: with ``AutoConnect`` the engine drops
    the connection; else a fatal code leaves it unusable until it is made again."""
    if engine.settings.auto_connect:
        drop_connection(engine, remote)
    elif code not in _FATAL_FREE and remote in engine.peers:
        engine.broken.add(remote)
