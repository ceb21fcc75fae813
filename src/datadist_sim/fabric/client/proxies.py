"""``LLMDataDist`` as a client process sees it: built in the fabric, with what stays in this process.

Every other class a client sees is a plain proxy (``remote``); this one has client-side behaviour, so
it stands on both the proxy base and the process's membership of its fabric (``client``): building one
joins the fabric, ``init`` notes the transfer timeout this process's calls are bounded by, and the
instances still initialised at interpreter exit are finalized, as the real package does.
"""

from __future__ import annotations

import atexit
import contextlib
import weakref
from typing import Any, Optional

from datadist_sim.fabric.client.client import FabricClient, current_client
from datadist_sim.fabric.client.remote import RemoteObject, stands_for

_initialised: weakref.WeakSet[LLMDataDist] = weakref.WeakSet()


def _client() -> FabricClient:
    client = current_client()
    if client is None:
        raise RuntimeError("DATADIST_SIM_FABRIC is not set: this process belongs to no fabric")
    return client


@stands_for("LLMDataDist")
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


@atexit.register
def _shutdown_handler() -> None:
    """As the real package does at interpreter exit: finalize every instance still initialised."""
    for instance in list(_initialised):
        with contextlib.suppress(Exception):
            instance.finalize()
