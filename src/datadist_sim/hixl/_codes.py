"""The module-level constants of ``hixl`` (hixl ``hixl_py.cc:226-247``): status codes and feature values are
plain ``int``, option keys plain ``str``, with the values of ``include/hixl/hixl_types.h``."""

from __future__ import annotations

# Status codes (hixl_types.h:38-46). Not an enum: the binding stores py::int_ values (hixl_py.cc:227-235).
SUCCESS = 0
PARAM_INVALID = 103900
TIMEOUT = 103901
NOT_CONNECTED = 103902
ALREADY_CONNECTED = 103903
NOTIFY_FAILED = 103904
UNSUPPORTED = 103905
FAILED = 503900
RESOURCE_EXHAUSTED = 203900

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
