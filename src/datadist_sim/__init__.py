"""datadist-sim: an in-process simulator of Huawei CANN's LLM-DataDist (``llm_datadist``)."""

from __future__ import annotations

from datadist_sim._status_table import STATUS_TABLE as STATUS_TABLE
from datadist_sim._status_table import StatusInfo as StatusInfo
from datadist_sim._status_table import retryable_codes as retryable_codes
from datadist_sim._status_table import status_info as status_info

__version__ = "0.1.0"

__all__ = [
    "STATUS_TABLE",
    "StatusInfo",
    "__version__",
    "retryable_codes",
    "status_info",
]
