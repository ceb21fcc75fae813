"""The module-level names of ``hixl``: status codes, option keys, feature values and ``__all__``
(docs/hixl_engine_facts.md, section 2). Vendor lines are hicann/hixl 9ed283b."""

from __future__ import annotations

import datadist_sim.hixl as hixl
from datadist_sim.hixl import hixl as hixl_module

VENDOR_ALL = [
    "SUCCESS",
    "PARAM_INVALID",
    "TIMEOUT",
    "NOT_CONNECTED",
    "ALREADY_CONNECTED",
    "NOTIFY_FAILED",
    "UNSUPPORTED",
    "FAILED",
    "RESOURCE_EXHAUSTED",
    "OPTION_ENABLE_USE_FABRIC_MEM",
    "OPTION_RDMA_TRAFFIC_CLASS",
    "OPTION_RDMA_SERVICE_LEVEL",
    "OPTION_BUFFER_POOL",
    "OPTION_GLOBAL_RESOURCE_CONFIG",
    "OPTION_AUTO_CONNECT",
    "OPTION_LOCAL_COMM_RES",
    "FEATURE_SUPPORTED",
    "FEATURE_NOT_SUPPORTED",
    "MemType",
    "MEM_DEVICE",
    "MEM_HOST",
    "TransferOp",
    "READ",
    "WRITE",
    "TransferStatus",
    "AsyncConnectStatus",
    "NOT_CONNECT",
    "CONNECT_PENDING",
    "CONNECTING",
    "CONNECTED",
    "CONNECT_FAILED",
    "DISCONNECT_PENDING",
    "DISCONNECTING",
    "FeatureType",
    "AUTO_CONNECT",
    "CLIENT_SERVER_COMM",
    "MemDesc",
    "TransferOpDesc",
    "TransferArgs",
    "GetTransferStatusArgs",
    "TransferResult",
    "NotifyDesc",
    "Hixl",
    "get_capability",
]


def test_status_codes_are_plain_ints_with_the_vendor_values() -> None:
    """``hixl_types.h:38-46`` gives the values; ``hixl_py.cc:227-235`` binds them as ``py::int_``."""
    expected = {
        "SUCCESS": 0,
        "PARAM_INVALID": 103900,
        "TIMEOUT": 103901,
        "NOT_CONNECTED": 103902,
        "ALREADY_CONNECTED": 103903,
        "NOTIFY_FAILED": 103904,
        "UNSUPPORTED": 103905,
        "FAILED": 503900,
        "RESOURCE_EXHAUSTED": 203900,
    }
    for name, value in expected.items():
        code = getattr(hixl, name)
        assert type(code) is int, name
        assert code == value, name


def test_option_keys_are_the_vendor_strings() -> None:
    """``hixl_types.h:29-35``; bound as ``py::str`` at ``hixl_py.cc:237-243``."""
    assert hixl.OPTION_ENABLE_USE_FABRIC_MEM == "EnableUseFabricMem"
    assert hixl.OPTION_RDMA_TRAFFIC_CLASS == "RdmaTrafficClass"
    assert hixl.OPTION_RDMA_SERVICE_LEVEL == "RdmaServiceLevel"
    assert hixl.OPTION_BUFFER_POOL == "BufferPool"
    assert hixl.OPTION_GLOBAL_RESOURCE_CONFIG == "GlobalResourceConfig"
    assert hixl.OPTION_AUTO_CONNECT == "AutoConnect"
    assert hixl.OPTION_LOCAL_COMM_RES == "LocalCommRes"


def test_feature_values_are_ints() -> None:
    """``hixl_types.h:54-55``, ``hixl_py.cc:245-246``."""
    assert (type(hixl.FEATURE_SUPPORTED), hixl.FEATURE_SUPPORTED) == (int, 1)
    assert (type(hixl.FEATURE_NOT_SUPPORTED), hixl.FEATURE_NOT_SUPPORTED) == (int, 0)


def test_all_is_the_vendors_in_its_order() -> None:
    """``hixl/__init__.py:60-105``: the 44 names, each the one of the module ``hixl.hixl``."""
    assert hixl.__all__ == VENDOR_ALL
    assert len(VENDOR_ALL) == 44
    for name in hixl.__all__:
        assert getattr(hixl, name) is getattr(hixl_module, name), name


def test_exported_enum_members_are_module_attributes_but_transfer_status_ones_are_not() -> None:
    """``export_values()`` at ``hixl_py.cc:253, 255, 271, 276``; none for ``TransferStatus``
    (``:257-261``), so ``TIMEOUT`` and ``FAILED`` stay the status codes."""
    assert hixl.MEM_DEVICE is hixl.MemType.MEM_DEVICE
    assert hixl.WRITE is hixl.TransferOp.WRITE
    assert hixl.DISCONNECTING is hixl.AsyncConnectStatus.DISCONNECTING
    assert hixl.CLIENT_SERVER_COMM is hixl.FeatureType.CLIENT_SERVER_COMM
    assert hixl.TIMEOUT == 103901
    assert hixl.FAILED == 503900
    assert not hasattr(hixl_module, "WAITING")
    assert not hasattr(hixl_module, "COMPLETED")
