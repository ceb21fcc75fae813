"""Cross-process mode: several OS processes on one machine share one simulated world.

A *fabric* process owns the ``SimWorld``; client processes find it through one environment variable,
``DATADIST_SIM_FABRIC=unix:/path?token=...`` (``datadist-sim exec`` sets it, ``datadist-sim fabric``
prints it, and the first client starts a fabric on demand if none listens there). In a client process,
``datadist_sim.install()`` makes ``llm_datadist.LLMDataDist`` build its instance in the fabric.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

from datadist_sim.fabric.transport.address import (
    ENV_VAR,
    FabricAddress,
    default_address,
    from_env,
    new_address,
    parse,
)

__all__ = [
    "ENV_VAR",
    "FabricAddress",
    "default_address",
    "from_env",
    "new_address",
    "parse",
    "status",
    "tensor_views",
    "trace_events",
    "trace_lines",
]


def tensor_views(
    cache: Any, shape: Optional[Sequence[int]] = None, dtype: Any = None, **kwargs: Any
) -> List[Any]:
    """``datadist_sim.tensor_views`` for a process of a fabric: numpy views mapped from shared memory."""
    from datadist_sim.fabric.client.client import current_client

    client = current_client()
    if client is None:
        from datadist_sim._views import tensor_views as local_views

        return local_views(cache, shape, dtype, **kwargs)
    return list(client.function("tensor_views", cache, shape, dtype, **kwargs))


def trace_lines(last: Optional[int] = None) -> List[str]:
    """The fabric's merged trace: every process's events, in simulated-time order."""
    from datadist_sim.fabric.client.client import current_client

    client = current_client()
    if client is None:
        raise RuntimeError(f"{ENV_VAR} is not set: this process belongs to no fabric")
    return list(client.function("trace_lines", last))


def status() -> Dict[str, Any]:
    """The fabric's state: live cluster ids, connected processes, shared segments and bytes backed."""
    from datadist_sim.fabric.client.client import current_client

    client = current_client()
    if client is None:
        raise RuntimeError(f"{ENV_VAR} is not set: this process belongs to no fabric")
    return dict(client.function("status"))


def trace_events() -> List[Dict[str, Any]]:
    """The fabric's merged trace as dicts (``TraceEvent.to_json`` of each), oldest first."""
    import json

    from datadist_sim.fabric.client.client import current_client

    client = current_client()
    if client is None:
        raise RuntimeError(f"{ENV_VAR} is not set: this process belongs to no fabric")
    return [json.loads(line) for line in client.function("trace_events")]
