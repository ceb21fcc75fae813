"""The module-level constants of ``hixl`` (hixl ``hixl_py.cc:226-247``): status codes and feature values are
plain ``int``, option keys plain ``str``, with the values of ``include/hixl/hixl_types.h``."""

from __future__ import annotations

from datadist_sim._status_hixl import HixlCode

# Status codes (hixl_types.h:38-46), the values of the world's ``HixlCode``. Not an enum: the binding
# stores py::int_ values (hixl_py.cc:227-235).
SUCCESS: int = HixlCode.SUCCESS.value
PARAM_INVALID: int = HixlCode.PARAM_INVALID.value
TIMEOUT: int = HixlCode.TIMEOUT.value
NOT_CONNECTED: int = HixlCode.NOT_CONNECTED.value
ALREADY_CONNECTED: int = HixlCode.ALREADY_CONNECTED.value
NOTIFY_FAILED: int = HixlCode.NOTIFY_FAILED.value
UNSUPPORTED: int = HixlCode.UNSUPPORTED.value
FAILED: int = HixlCode.FAILED.value
RESOURCE_EXHAUSTED: int = HixlCode.RESOURCE_EXHAUSTED.value

# Option keys (hixl_types.h:29-35; hixl_py.cc:237-243).
OPTION_ENABLE_USE_FABRIC_MEM = "EnableUseFabricMem"
OPTION_RDMA_TRAFFIC_CLASS = "RdmaTrafficClass"
OPTION_RDMA_SERVICE_LEVEL = "RdmaServiceLevel"
OPTION_BUFFER_POOL = "BufferPool"
OPTION_GLOBAL_RESOURCE_CONFIG = "GlobalResourceConfig"
OPTION_AUTO_CONNECT = "AutoConnect"
OPTION_LOCAL_COMM_RES = "LocalCommRes"

# What get_capability reports (hixl_types.h:54-55; hixl_py.cc:245-246).
FEATURE_SUPPORTED = 1
FEATURE_NOT_SUPPORTED = 0
