"""Where a world action changes the world: a kill, a cut, a capped pool when the rule fires, and what it
undid (and the memory a poison rule poisoned) when it heals.

The plan calls these through the world's two hooks (``faults.plan.WorldHooks``: ``SimWorld.start_fault``,
``heal_fault``), so this module sits under the world and knows of it only what ``_World`` names. A
``partition`` or ``hang`` changes nothing here: the world asks the plan whether one holds
(``SimWorld.unreachable``, ``FaultPlan.hung``). A rule names a cluster by its id, or ``hixl`` engines by
their ``local_engine`` name (a ``str``, ``Fault.kill("10.0.0.1:26000")``); the faults a call meets are
``fault_effects``' and ``hixl_faults``'.
"""

from __future__ import annotations

from typing import Any, ContextManager, Mapping, Optional, Protocol, Sequence, Tuple, Union

from datadist_sim._status_hixl import HixlCode
from datadist_sim._world.address_space import AddressSpace
from datadist_sim._world.caches import NodeCaches
from datadist_sim._world.hixl_state import HixlEngines, fail_connection, tear_down
from datadist_sim.faults.rules import Fault


class _World(Protocol):
    """What a world action needs of the world (``SimWorld`` has each)."""

    @property
    def lock(self) -> ContextManager[Any]: ...

    @property
    def caches(self) -> Mapping[int, NodeCaches]: ...

    @property
    def memory(self) -> AddressSpace: ...

    @property
    def hixl(self) -> HixlEngines: ...

    def kill(self, cluster_id: int) -> None: ...

    def break_link(self, a: int, b: int) -> None: ...

    def record(
        self,
        cluster_id: Optional[Union[int, str]],
        op: str,
        outcome: str,
        detail: str = "",
        *,
        args: object = "",
        kind: str = "event",
    ) -> None: ...


def start_world_fault(world: _World, rule: Fault) -> object:
    """A world action fires: a ``kill`` kills its cluster's process (``SimWorld.kill``), a timed
    ``cut_link`` breaks the link both ways, ``cap_pool`` / ``exhaust_pool`` cap the device pool (the
    previous limit is returned, for ``heal_world_fault``)."""
    if rule.action == "kill":
        assert rule.cluster is not None
        if isinstance(rule.cluster, str):
            _kill_engines(world, rule.cluster)
        else:
            world.kill(rule.cluster)
    elif rule.action == "cut_link":
        a, b = rule.cluster, rule.remote
        if a is not None and b is not None:
            if isinstance(a, str) or isinstance(b, str):
                _cut_engines(world, a, b)
            else:
                world.break_link(a, b)
    elif rule.action in ("cap_pool", "exhaust_pool"):
        assert rule.cluster is not None
        return _cap_pool(world, rule.cluster, rule.nbytes)
    return None


def heal_world_fault(world: _World, rule: Fault, undo: object, poisoned: Sequence[Tuple[int, int]]) -> None:
    """A rule heals: a capped pool gets its previous limit back (``undo``), the ranges a poison rule
    poisoned are clean again. A kill does not heal (``actions``); a partition or hang ends by itself."""
    if rule.action in ("cap_pool", "exhaust_pool") and rule.cluster is not None:
        _restore_pool(world, rule.cluster, undo)
    elif rule.action == "poison":
        for address, nbytes in poisoned:
            world.memory.heal(address, nbytes)


def _cap_pool(world: _World, cluster_id: Union[int, str], nbytes: Optional[int]) -> Optional[int]:
    """Cap the device pool of ``cluster_id`` at ``nbytes`` in use (None: what it uses now); returns
    the previous limit. A cluster without a pool is left alone. ``hixl`` engines (a name) have no
    memory pool: their connect pool takes no task."""
    if isinstance(cluster_id, str):
        return _cap_connect_pools(world, cluster_id)
    store = world.caches.get(cluster_id)
    pool = None if store is None else store.device_pool
    if pool is None:
        return None
    previous = pool.limit
    pool.set_limit(pool.used if nbytes is None else nbytes)
    return previous


def _restore_pool(world: _World, cluster_id: Union[int, str], previous: object) -> None:
    if isinstance(cluster_id, str):
        _restore_connect_pools(world, cluster_id, previous)
        return
    store = world.caches.get(cluster_id)
    pool = None if store is None else store.device_pool
    if pool is not None:
        pool.set_limit(previous if isinstance(previous, int) else None)


# -- on hixl engines, named by their local_engine ------------------------------------------------


def _kill_engines(world: _World, name: str) -> None:
    """The processes of the engines named ``name`` die: they stop listening and their memory and
    connections go; peers are not told (their connections to them fail on use)."""
    with world.lock:
        for engine in world.hixl.called(name):
            if tear_down(world.hixl, engine):
                world.record(name, "hixl.engine.kill", "ok", kind="event")


def _cut_engines(world: _World, a: Union[int, str], b: Union[int, str]) -> None:
    """The connections between the engines named ``a`` and ``b`` fail, both ways (a cluster id names
    the engine of a hixl-backend instance, ``hixl_served``)."""
    with world.lock:
        for here, there in ((a, b), (b, a)):
            for engine in world.hixl.called(here) if isinstance(here, str) else ():
                for remote, peer in list(engine.peers.items()):
                    if there in (remote, peer.name, peer.cluster_id):
                        fail_connection(engine, remote, HixlCode.FAILED)
        world.record(a, "link.cut", "ok", f"remote {b}", kind="event")


def _cap_connect_pools(world: _World, name: str) -> Optional[int]:
    """Fill the connect pools of the engines named ``name`` (they take no task); the previous capacity,
    for ``_restore_connect_pools``."""
    previous = None
    for engine in world.hixl.called(name):
        previous = engine.pool.capacity if previous is None else previous
        engine.pool.capacity = 0
    return previous


def _restore_connect_pools(world: _World, name: str, previous: object) -> None:
    if isinstance(previous, int):
        for engine in world.hixl.called(name):
            engine.pool.capacity = previous
