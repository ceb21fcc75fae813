"""The hixl engine of an ``llm_datadist`` instance on the hixl backend, as ``hixl.Hixl`` clients meet it.

With ``llm.TransferBackend = "hixl"`` the v2 instance builds a plain hixl engine through the same
factory a ``hixl.Hixl`` uses (hicann/hixl ``src/llm_datadist/transfer_engine/hixl_transfer_engine.cc:
100-106``, ``engine_factory.cc:38-77``), named ``"<listen ip>:<listen port>"`` from its
``llm.listenIpInfo`` (``hixl_transfer_engine.cc:88-98``), and registers with it every range the instance
makes remote-accessible: its device and host memory pools (``data_cache_engine.cc:295-296, 322-323``)
and each tensor of a ``register_cache`` whose ``remote_accessible`` holds (``comm_mem_manager.cc:73-104``),
until ``unregister_cache`` or ``finalize`` (``:106-125``, ``data_cache_engine.cc:228-242``). Its own
links are that engine's plain ``Connect`` (``hixl_entity.cc:22-29``) followed by a cache-table request
on a message type of its own (``hixl_transfer_engine.cc:51-78``); the engine's connect handshake
checks nothing of who connects (comm ``channel_msg_handler.cc:412-442``), so any hixl engine can
connect to it and read or write what it registered.

The world models that with one rule: such an instance that listens (a port above 0) is served by a
``HixlEngine`` the world keeps for it, listening at its endpoint among the hixl engines, whose
registrations are the instance's transport-registered memory (``caches.spans``). Connecting to it,
transferring with it, and the faults both meet are then exactly those of any hixl engine
(``hixl_engines``, ``hixl_transfers``, ``hixl_faults``); the instance's finalize or death ends it as
an engine's ``finalize`` does (``tear_down``). Its kind is read as ``comm``, the factory's default;
on the serving side the kind decides nothing a client sees but the ``hixl_cs`` notify queue limit.
The cache table buffer the instance also registers (``data_cache_engine.cc:211-215``) is not simulated
memory, so it is not among the regions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, List

from datadist_sim._world.caches import spans
from datadist_sim._world.cluster import ClusterNode, Endpoint
from datadist_sim._world.hixl_state import EngineSettings, HixlEngine, HixlEngines, Region, tear_down

if TYPE_CHECKING:
    from datadist_sim._world.caches import NodeCaches


def serve(engines: HixlEngines, node: ClusterNode, store: NodeCaches, listening: List[Endpoint]) -> None:
    """Open the engine of a hixl-backend instance that listens (``listening``: its endpoints with a
    port above 0), with the instance's registered memory as its regions from now on."""
    if not node.hixl or not listening:
        return
    host, port = listening[0]
    engine = HixlEngine(f"{host}:{port}", listening[0], EngineSettings(), cluster_id=node.cluster_id)
    engines.listeners[listening[0]] = engine
    engines.served[node.cluster_id] = engine

    def follow() -> None:
        if engine.alive:
            # what a transfer checks changed: the new layout voids the checks clients keep (``vetted``)
            engine.regions = {
                i: Region(low, high - low, True) for i, (low, high) in enumerate(spans(store, True))
            }
            engine.layout += 1

    store.on_registration = follow
    follow()


def unserve(engines: HixlEngines, node: ClusterNode) -> None:
    """The instance finalized or died: its engine ends as a finalized one does (its clients' transfers
    are ``FAILED``, a new connect is refused)."""
    engine = engines.served.pop(node.cluster_id, None)
    if engine is not None:
        tear_down(engines, engine)
