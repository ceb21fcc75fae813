"""The module ``hixl.hixl``: in the real package the compiled pybind11 module every public name comes from
(hixl ``src/python/hixl_py/hixl_py.cc:360-365``). Here it gathers the constants, enums and data
classes, the engine class ``Hixl`` and ``get_capability`` (``_engine``, which acts on the simulated world
through the door).

As ``export_values()`` does in the binding, the members of ``MemType``, ``TransferOp``,
``AsyncConnectStatus`` and ``FeatureType`` are also module attributes; those of ``TransferStatus`` are
not (``hixl_py.cc:257-261``), so ``TIMEOUT`` and ``FAILED`` stay the status codes.
"""

from __future__ import annotations

from datadist_sim.hixl._codes import (
    ALREADY_CONNECTED,
    FAILED,
    FEATURE_NOT_SUPPORTED,
    FEATURE_SUPPORTED,
    NOT_CONNECTED,
    NOTIFY_FAILED,
    OPTION_AUTO_CONNECT,
    OPTION_BUFFER_POOL,
    OPTION_ENABLE_USE_FABRIC_MEM,
    OPTION_GLOBAL_RESOURCE_CONFIG,
    OPTION_LOCAL_COMM_RES,
    OPTION_RDMA_SERVICE_LEVEL,
    OPTION_RDMA_TRAFFIC_CLASS,
    PARAM_INVALID,
    RESOURCE_EXHAUSTED,
    SUCCESS,
    TIMEOUT,
    UNSUPPORTED,
)
from datadist_sim.hixl._engine import Hixl, get_capability
from datadist_sim.hixl._enum import AsyncConnectStatus, FeatureType, MemType, TransferOp, TransferStatus
from datadist_sim.hixl._types import (
    GetTransferStatusArgs,
    MemDesc,
    NotifyDesc,
    TransferArgs,
    TransferOpDesc,
    TransferResult,
)

MEM_DEVICE = MemType.MEM_DEVICE
MEM_HOST = MemType.MEM_HOST
READ = TransferOp.READ
WRITE = TransferOp.WRITE
NOT_CONNECT = AsyncConnectStatus.NOT_CONNECT
CONNECT_PENDING = AsyncConnectStatus.CONNECT_PENDING
CONNECTING = AsyncConnectStatus.CONNECTING
CONNECTED = AsyncConnectStatus.CONNECTED
CONNECT_FAILED = AsyncConnectStatus.CONNECT_FAILED
DISCONNECT_PENDING = AsyncConnectStatus.DISCONNECT_PENDING
DISCONNECTING = AsyncConnectStatus.DISCONNECTING
AUTO_CONNECT = FeatureType.AUTO_CONNECT
CLIENT_SERVER_COMM = FeatureType.CLIENT_SERVER_COMM

__all__ = [
    "ALREADY_CONNECTED",
    "AUTO_CONNECT",
    "CLIENT_SERVER_COMM",
    "CONNECTED",
    "CONNECTING",
    "CONNECT_FAILED",
    "CONNECT_PENDING",
    "DISCONNECTING",
    "DISCONNECT_PENDING",
    "FAILED",
    "FEATURE_NOT_SUPPORTED",
    "FEATURE_SUPPORTED",
    "MEM_DEVICE",
    "MEM_HOST",
    "NOTIFY_FAILED",
    "NOT_CONNECT",
    "NOT_CONNECTED",
    "OPTION_AUTO_CONNECT",
    "OPTION_BUFFER_POOL",
    "OPTION_ENABLE_USE_FABRIC_MEM",
    "OPTION_GLOBAL_RESOURCE_CONFIG",
    "OPTION_LOCAL_COMM_RES",
    "OPTION_RDMA_SERVICE_LEVEL",
    "OPTION_RDMA_TRAFFIC_CLASS",
    "PARAM_INVALID",
    "READ",
    "RESOURCE_EXHAUSTED",
    "SUCCESS",
    "TIMEOUT",
    "UNSUPPORTED",
    "WRITE",
    "AsyncConnectStatus",
    "FeatureType",
    "GetTransferStatusArgs",
    "MemDesc",
    "MemType",
    "NotifyDesc",
    "TransferArgs",
    "TransferOp",
    "TransferOpDesc",
    "TransferResult",
    "TransferStatus",
    "Hixl",
    "get_capability",
]
