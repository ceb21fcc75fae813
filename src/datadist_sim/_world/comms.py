"""Rank-table communicators: ``link`` / ``unlink`` / ``query_register_mem_status`` (CacheManager mode).

Every member calls ``link`` with the same ``comm_name``, ``cluster_rank_info`` and a rank table that
describes the same ranks (``_rank_facts``: the same servers and devices, in any order). The
communicator is PREPARING until all members have joined and ``comm_setup_s`` has passed, then OK, and
the members are linked for transfers. Members that disagree on the rank information leave it FAILED.

The vendor's link task connects the comm and exchanges memory descriptors with every other member
(hixl ``comm_link_manager.cc:211-256``, ``comm_entity.cc:211-234``); a failure there is
``LLM_LINK_FAILED`` and the status FAILED (``comm_link_manager.cc:428-443``). So a member that never
joins, or one a partition, hang or death cuts off while the link is set up, fails it once the exchange
times out: ``llm.LinkTotalTime`` seconds after the member's own ``link``, or 30 s when that is 0
(``comm_link_manager.cc:90``).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Dict, FrozenSet, Optional, Protocol, Set, Tuple

from datadist_sim._status import LLMStatusCode
from datadist_sim._world.clock import Wake
from datadist_sim._world.cluster import ClusterNode, PeerLink, reads_table
from datadist_sim._world.config import SimConfig
from datadist_sim._world.errors import SimError

RankFacts = FrozenSet[Tuple[str, ...]]
"""What a rank table says about its communicator (``_rank_facts``)."""


class CommWorld(Protocol):
    """What communicators need of their world (a ``SimWorld``); the world holds the registry, so the
    registry sees the world only through this and does not import it."""

    lock: threading.RLock
    config: SimConfig

    def now(self) -> float: ...

    def node(self, cluster_id: int) -> Optional[ClusterNode]: ...

    def unreachable(self, a: int, b: int) -> bool: ...

    def wait_until(self, when: float, wake: Optional[Wake] = None) -> None: ...

    def record(
        self,
        cluster_id: Optional[int],
        op: str,
        outcome: str,
        detail: str = "",
        *,
        args: object = "",
        kind: str = "event",
    ) -> None: ...


class CommStatus(Enum):
    OK = 0
    PREPARING = 1
    FAILED = 2


@dataclass
class _Member:
    comm_id: int
    joined_at: float
    rank_info: Dict[int, int]
    rank_facts: RankFacts


@dataclass
class Communicator:
    """One named communicator and who has joined it so far."""

    name: str
    expected: Dict[int, int]
    members: Dict[int, _Member] = field(default_factory=dict)
    consistent: bool = True
    ready_at: Optional[float] = None
    blocked: bool = False
    """A member could not reach another while the link was set up: the exchange will time out."""
    verified: bool = False
    """The set-up finished with every member reachable: OK for good."""

    def settled(self) -> bool:
        """Every member has joined (it is ready, or will be, at ``ready_at``) or they disagreed."""
        return self.ready_at is not None or not self.consistent

    def status(self, cluster_id: int, now: float, deadline_s: float) -> CommStatus:
        if not self.consistent:
            return CommStatus.FAILED
        if self.ready_at is not None and not self.blocked:
            return CommStatus.OK if now >= self.ready_at else CommStatus.PREPARING
        joined = self.members[cluster_id].joined_at
        return CommStatus.FAILED if now >= joined + deadline_s else CommStatus.PREPARING


class CommRegistry:
    """All communicators of one world, with per-instance comm ids counted from 1."""

    def __init__(self, world: CommWorld) -> None:
        self._world = world
        self._by_name: Dict[str, Communicator] = {}
        """The communicator a ``link`` of each name joins: the one still forming, or the settled one
        every member still holds. One that a member left after it settled is no longer here."""
        self._by_id: Dict[int, Dict[int, Communicator]] = {}
        self._next_id: Dict[int, int] = {}

    def link(self, node: ClusterNode, name: str, rank_info: Dict[int, int], rank_table: str) -> int:
        """Join (or open) communicator ``name``; returns this instance's comm id."""
        world, own = self._world, node.cluster_id
        if own not in rank_info:
            raise SimError(LLMStatusCode.LLM_PARAM_INVALID, f"cluster_id {own} is not in cluster_rank_info")
        facts = _rank_facts(_check_rank_table(rank_table))
        with world.lock:
            if sum(len(ids) for ids in self._by_id.values()) >= world.config.max_links:
                raise SimError(LLMStatusCode.LLM_PARAM_INVALID, "Link num is over limit:512.")
            comm = self._by_name.setdefault(name, Communicator(name, dict(rank_info)))
            if own in comm.members:
                raise SimError(LLMStatusCode.LLM_ALREADY_LINK, f"comm {name} is already linked")
            comm_id = self._next_id.get(own, 1)
            self._next_id[own] = comm_id + 1
            comm.members[own] = _Member(comm_id, world.now(), dict(rank_info), facts)
            self._by_id.setdefault(own, {})[comm_id] = comm
            self._settle(comm)
        world.record(own, "comm.join", "ok", f"comm {name} id {comm_id}")
        return comm_id

    def _settle(self, comm: Communicator) -> None:
        """Once everyone has joined: check agreement, then schedule OK and link the members."""
        first = next(iter(comm.members.values()))
        if any(
            m.rank_info != comm.expected or m.rank_facts != first.rank_facts for m in comm.members.values()
        ):
            comm.consistent = False
            return
        if set(comm.members) != set(comm.expected) or comm.ready_at is not None:
            return
        comm.ready_at = max(m.joined_at for m in comm.members.values()) + self._world.config.comm_setup_s
        ids = sorted(comm.members)
        for own in ids:
            node = self._world.node(own)
            for other in ids:
                if node is not None and other != own:
                    node.peers[other] = PeerLink(
                        other,
                        is_client=own < other,
                        since=comm.ready_at,
                        via_comm=comm.members[own].comm_id,
                        by_table=reads_table(node),
                    )

    def query(self, node: ClusterNode, comm_id: int) -> CommStatus:
        """The communicator's status; a poll while PREPARING waits until its next change: until it
        is ready once every member has joined, else one ``poll_interval_s`` or until the last member
        joins, whichever comes first. The wait is on the world clock, outside the lock, so threads
        that link concurrently meet there (``VirtualClock.wait_until``) instead of running time on."""
        world = self._world
        with world.lock:
            comm = self._lookup(node, comm_id)
            deadline = self._deadline(node)
            if comm.ready_at is not None and not (comm.verified or comm.blocked):
                self._verify(comm)
            status = comm.status(node.cluster_id, world.now(), deadline)
            ready_at, blocked = comm.ready_at, comm.blocked
        if status is CommStatus.PREPARING:
            if ready_at is None:  # a member is missing: one poll gap, or until the last one joins
                world.wait_until(world.now() + world.config.poll_interval_s, comm.settled)
            elif blocked:  # the set-up's exchange cannot finish: polls run on to the deadline
                world.wait_until(world.now() + world.config.poll_interval_s)
            else:
                world.wait_until(ready_at)
        return status

    def _verify(self, comm: Communicator) -> None:
        """While the link is set up, every member must reach every other (``Fault.partition``,
        ``Fault.hang``, a killed member): else the communicator is blocked and the links it made go."""
        world = self._world
        ids = sorted(comm.members)
        if any(world.unreachable(a, b) for a in ids for b in ids if a != b) or set(ids) != set(comm.expected):
            comm.blocked = True
            for own in ids:
                node = world.node(own)
                if node is None:
                    continue
                mine = comm.members[own].comm_id
                for other in ids:
                    peer = node.peers.get(other)
                    if peer is not None and peer.via_comm == mine:
                        del node.peers[other]
            world.record(None, "comm.blocked", "LLM_LINK_FAILED", f"comm {comm.name}", kind="event")
        elif comm.ready_at is not None and world.now() >= comm.ready_at:
            comm.verified = True

    def unlink(self, node: ClusterNode, comm_id: int) -> None:
        """Leave the communicator and drop the links it made for this instance.

        A communicator that had settled is never joined again once a member left it (by ``unlink`` or
        ``finalize``): HCCL builds a communicator once, from every member's init together
        (``comm_link_manager.cc:364-367``), and the engine's finalize destroys its comms
        (``llm_datadist_v2.cc:100-118``). The next ``link`` of that name opens a new one, which the
        members still in the old one join only after they leave it."""
        with self._world.lock:
            comm = self._lookup(node, comm_id)
            self._by_id[node.cluster_id].pop(comm_id)
            comm.members.pop(node.cluster_id, None)
            for remote, peer in list(node.peers.items()):
                if peer.via_comm == comm_id:
                    del node.peers[remote]
            if self._by_name.get(comm.name) is comm and (not comm.members or comm.ready_at is not None):
                del self._by_name[comm.name]
        self._world.record(node.cluster_id, "comm.leave", "ok", f"comm id {comm_id}")

    def forget(self, node: ClusterNode) -> None:
        """Finalize: the instance leaves every communicator it was in."""
        for comm_id in list(self._by_id.get(node.cluster_id, {})):
            self.unlink(node, comm_id)
        self._next_id.pop(node.cluster_id, None)

    def _lookup(self, node: ClusterNode, comm_id: int) -> Communicator:
        comm = self._by_id.get(node.cluster_id, {}).get(comm_id)
        if comm is None:
            raise SimError(LLMStatusCode.LLM_NOT_YET_LINK, f"Comm:{comm_id} is not yet link.")
        return comm

    def _deadline(self, node: ClusterNode) -> float:
        total = node.settings.link_total_time_s
        return float(total) if total > 0 else self._world.config.hccl_connect_timeout_s


def _check_rank_table(rank_table: str) -> Dict[str, Any]:
    """What HCCL needs before it builds the communicator; anything else fails ``link`` with
    ``LLM_LINK_FAILED`` (hixl ``comm_link_manager.cc:364-367``: ``HcclCommInitClusterInfoMemConfig``).

    HCCL (CANN hcomm ``topoinfo_ranktableParser.cc``): the string must be JSON (``LoadString``), with a
    string ``"status"`` (``RefreshStatus``, a required property); a ``"version"`` of "1.0" or "1.2"
    selects the concise parser, which needs a non-empty ``"server_list"``; another version is refused
    (``CfgGetClusterInfo``). A table with no ``"version"`` goes to HCCL's older "Standard" parser, which
    the simulator does not model: it refuses such a table and says so.
    """
    try:
        table = json.loads(rank_table)
    except ValueError as exc:
        raise SimError(LLMStatusCode.LLM_LINK_FAILED, f"rank_table is not valid JSON: {exc}") from None
    if not isinstance(table, dict):
        raise SimError(LLMStatusCode.LLM_LINK_FAILED, "rank_table is not a JSON object")
    for name in ("status", "version"):
        if name in table and not isinstance(table[name], str):
            raise SimError(LLMStatusCode.LLM_LINK_FAILED, f'rank_table "{name}" is not a string')
    if "status" not in table:
        raise SimError(LLMStatusCode.LLM_LINK_FAILED, 'rank_table has no "status"')
    if "version" not in table:
        raise SimError(
            LLMStatusCode.LLM_LINK_FAILED,
            'rank_table has no "version": HCCL would use its "Standard" parser, which the simulator '
            'does not model; give "version" "1.0" or "1.2"',
        )
    if table["version"] not in ("1.0", "1.2"):
        raise SimError(
            LLMStatusCode.LLM_LINK_FAILED, f'rank_table "version" {table["version"]!r} is not supported'
        )
    servers = table.get("server_list")
    if servers is None:
        raise SimError(LLMStatusCode.LLM_LINK_FAILED, 'rank_table has no "server_list"')
    if not servers:
        raise SimError(LLMStatusCode.LLM_LINK_FAILED, 'rank_table "server_list" is empty')
    return table


def _rank_facts(table: Dict[str, Any]) -> RankFacts:
    """What a rank table says about the communicator, whatever the order it is written in: one fact per
    device, (rank id, server id, host ip, device id, device ip), and one per super pod member.

    Nothing compares the members' strings: hixl hands each member's own table to HCCL
    (``comm_link_manager.cc:361-367``), and HCCL's concise parser reads each server's ``server_id`` and
    ``host_ip`` and each device's ``rank_id``, ``device_id`` and ``device_ip``, then sorts the ranks by
    rank id before it finds its own (hcomm 0427d01 ``topoinfo_ranktableConcise.cc``,
    ``ParserClusterInfo``, ``GetSingleServer``, ``GetSingleDevice``). So two members whose tables list
    the same servers and devices in another order (each its own device first, as a connector on one
    host builds them) form one communicator; tables that place a rank elsewhere do not."""
    facts: Set[Tuple[str, ...]] = set()
    for server in table["server_list"] if isinstance(table["server_list"], list) else ():
        if not isinstance(server, dict):
            facts.add(("server", json.dumps(server, sort_keys=True)))
            continue
        server_id, host_ip = _text(server.get("server_id")), _text(server.get("host_ip"))
        devices = server.get("device")
        for device in devices if isinstance(devices, list) else [devices]:
            fields = device if isinstance(device, dict) else {}
            facts.add(
                (
                    "rank",
                    _text(fields.get("rank_id")),
                    server_id,
                    host_ip,
                    _text(fields.get("device_id")),
                    _text(fields.get("device_ip")),
                )
            )
    pods = table.get("super_pod_list")
    for pod in pods if isinstance(pods, list) else ():
        members = pod.get("server_list") if isinstance(pod, dict) else None
        for member in members if isinstance(members, list) else ():
            named = member.get("server_id") if isinstance(member, dict) else member
            facts.add(("pod", _text(pod.get("super_pod_id")), _text(named)))
    return frozenset(facts)


def _text(value: object) -> str:
    """A field as JSON text, so a missing field, a string and a number stay three different facts."""
    return json.dumps(value, sort_keys=True)
