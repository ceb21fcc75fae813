"""Handles to objects that live in the fabric, as a client process holds them.

A ``RemoteObject`` names its object by handle and forwards attribute reads, writes and method calls
through whatever carries this process's requests (a ``Requester``: in practice its ``FabricClient``).
It knows nothing of sockets, nor of how the process joined its fabric, so two modules build on it
without importing each other: the client, which makes a proxy for every handle it receives, and
``proxies``, whose ``LLMDataDist`` has behaviour of its own in the client process (it asks the client
to join the fabric when it is built).

A proxy's class carries the name of the class it stands for (``Cache``, ``KvCacheManager``...), so
``str``, ``repr`` and logging read as they do in-process.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, ClassVar, Dict, Protocol, Tuple, Type, TypeVar

_classes: Dict[str, Type[RemoteObject]] = {}
_lock = threading.Lock()
_Proxy = TypeVar("_Proxy", bound="Type[RemoteObject]")


class Requester(Protocol):
    """What carries a proxy's requests to the fabric and brings back their results."""

    def request(self, kind: str, *payload: Any) -> Any: ...


class RemoteObject:
    """A handle to an object living in the fabric; attributes and methods are fetched from there."""

    _method_names: ClassVar[Dict[Tuple[str, str], bool]] = {}

    def __init__(self, client: Requester, handle: int, type_name: str) -> None:
        object.__setattr__(self, "_client", client)
        object.__setattr__(self, "_handle", handle)
        object.__setattr__(self, "_type_name", type_name)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # private state lives in the fabric's object, never fetched
            raise AttributeError(name)
        key = (self._type_name, name)
        if not RemoteObject._method_names.get(key):
            is_method, value = self._client.request("get", self, name)
            if not is_method:
                return value
            RemoteObject._method_names[key] = True
        method = _remote_method(name)
        cls = type(self)
        if _classes.get(self._type_name) is cls:
            # from now on the name is found on the class: no failed lookup, no ``__getattr__``
            setattr(cls, name, method)
        return method.__get__(self, cls)

    def __setattr__(self, name: str, value: Any) -> None:
        self._client.request("set", self, name, value)

    def __str__(self) -> str:
        return str(self._client.request("str", self))

    def __repr__(self) -> str:
        return self.__str__()


def _remote_method(name: str) -> Callable[..., Any]:
    """A method of a proxy class that forwards its calls to the fabric, as a plain function: installed on
    the class, the name then resolves as any method does."""

    def method(self: RemoteObject, *args: Any, **kwargs: Any) -> Any:
        return self._client.request("call", self, name, args, kwargs)

    method.__name__ = method.__qualname__ = name
    return method


def stands_for(type_name: str) -> Callable[[_Proxy], _Proxy]:
    """Class decorator: the decorated class is the proxy for the fabric's class ``type_name``. Only a
    class with client-side behaviour of its own needs this (``proxies.LLMDataDist``); every other type
    gets a plain proxy class made on first use."""

    def register(cls: _Proxy) -> _Proxy:
        with _lock:
            _classes[type_name] = cls
        return cls

    return register


def proxy_class(type_name: str) -> Type[RemoteObject]:
    """The proxy class standing for the fabric's class ``type_name``."""
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


def stand_in(client: Requester, handle: int, type_name: str) -> RemoteObject:
    """A new proxy for ``handle``, of its type's proxy class. Built without the class's own
    constructor: a registered class's constructor may do more (``LLMDataDist`` asks the fabric for a
    new instance), while a handle received needs only to be named."""
    cls = proxy_class(type_name)
    proxy = cls.__new__(cls)
    RemoteObject.__init__(proxy, client, handle, type_name)
    return proxy


def _no_safety_net(self: Any) -> None:
    """The fabric's own object carries the safety net (it runs when the handle is released)."""


def _data_handles() -> Dict[str, type]:
    from datadist_sim.llm_datadist.v2._caches import Cache, KvCache

    return {"Cache": Cache, "KvCache": KvCache}
