"""The classes a client process sees: ``LLMDataDist`` built in the fabric, and typed proxies.

A proxy's class carries the name of the class it stands for (``Cache``, ``KvCacheManager``...), so
``str``, ``repr`` and logging read as they do in-process.
"""

from __future__ import annotations

import atexit
import contextlib
import threading
import weakref
from typing import Any, Dict, Optional, Tuple, Type

from datadist_sim.fabric.client import FabricClient, RemoteObject, current_client

_classes: Dict[str, Type[RemoteObject]] = {}
_lock = threading.Lock()
_initialised: weakref.WeakSet[LLMDataDist] = weakref.WeakSet()


def _client() -> FabricClient:
    client = current_client()
    if client is None:
        raise RuntimeError("DATADIST_SIM_FABRIC is not set: this process belongs to no fabric")
    return client


class LLMDataDist(RemoteObject):
    """``llm_datadist.LLMDataDist`` of a process in a cross-process world: the instance lives in the
    fabric (constructor checks, every method and property run there)."""

    llm_engine_instance: Optional[Any] = None

    def __init__(self, role: Any, cluster_id: int) -> None:
        client = _client()
        handle = client.request("new", role, cluster_id)
        super().__init__(client, handle, "LLMDataDist")
        client.adopt(handle, self)

    def init(self, options: Any) -> None:
        self._client.request("call", self, "init", (options,), {})
        self._client.note_options(options)
        _initialised.add(self)
        if LLMDataDist.llm_engine_instance is None:
            LLMDataDist.llm_engine_instance = self

    def finalize(self) -> None:
        self._client.request("call", self, "finalize", (), {})
        _initialised.discard(self)
        if LLMDataDist.llm_engine_instance is self:
            LLMDataDist.llm_engine_instance = None


def proxy_class(type_name: str) -> Type[RemoteObject]:
    """The proxy class standing for the fabric's class ``type_name``."""
    if type_name == "LLMDataDist":
        return LLMDataDist
    with _lock:
        cls = _classes.get(type_name)
        if cls is None:
            # Cache and KvCache are data handles (properties only): their proxies are instances of the
            # real classes, so a client's isinstance checks hold; each property, finding no local state,
            # falls back to the fabric. Managers and tasks have methods, which must not run here.
            real = _data_handles().get(type_name)
            bases: Tuple[type, ...] = (RemoteObject,) if real is None else (RemoteObject, real)
            cls = type(type_name, bases, {"__module__": __name__, "__del__": _no_safety_net})
            _classes[type_name] = cls
        return cls


def _no_safety_net(self: Any) -> None:
    """The fabric's own object carries the safety net (it runs when the handle is released)."""


def _data_handles() -> Dict[str, type]:
    from datadist_sim.llm_datadist.v2._caches import Cache, KvCache

    return {"Cache": Cache, "KvCache": KvCache}


@atexit.register
def _shutdown_handler() -> None:
    """As the real package does at interpreter exit: finalize every instance still initialised."""
    for instance in list(_initialised):
        with contextlib.suppress(Exception):
            instance.finalize()
