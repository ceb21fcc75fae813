"""``llm_datadist_v1.status``: the v1 package's own codes and exception, distinct from ``llm_datadist``'s.

Defined in ``datadist_sim._status_v1`` (GE ``api/python/llm_datadist_v1/status.py``: a plain ``Enum`` and
an ``LLMException`` of its own); ``SimConfig(unified_exceptions=True)`` makes the v1 managers raise one
class that both names catch instead.
"""

from __future__ import annotations

from datadist_sim._status_v1 import LLMException as LLMException
from datadist_sim._status_v1 import LLMStatusCode as LLMStatusCode
from datadist_sim._status_v1 import Status as Status
from datadist_sim._status_v1 import code_2_status as code_2_status
from datadist_sim._status_v1 import handle_llm_status as handle_llm_status
from datadist_sim._status_v1 import raise_if_false as raise_if_false
from datadist_sim._status_v1 import raise_if_true as raise_if_true
