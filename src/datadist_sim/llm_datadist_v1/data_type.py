"""The v1 data type names: the same ``DataType`` as ``llm_datadist.data_type``."""

from __future__ import annotations

from typing import Any

from datadist_sim.llm_datadist import data_type as _shared
from datadist_sim.llm_datadist.data_type import DataType as DataType
from datadist_sim.llm_datadist.data_type import element_size as element_size


def __getattr__(name: str) -> Any:
    """The numpy tables (``dtype_to_np_dtype`` ...) are the shared module's, built on first use."""
    return getattr(_shared, name)
