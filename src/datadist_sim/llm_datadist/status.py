"""``llm_datadist.status``: the status codes, the exception and the status helpers.

Defined in ``datadist_sim._status`` so the simulated world can use them without importing the face.
"""

from datadist_sim._status import LLMException as LLMException
from datadist_sim._status import LLMStatusCode as LLMStatusCode
from datadist_sim._status import Status as Status
from datadist_sim._status import code_2_status as code_2_status
from datadist_sim._status import handle_llm_status as handle_llm_status
from datadist_sim._status import raise_if_false as raise_if_false
from datadist_sim._status import raise_if_true as raise_if_true

__all__ = [
    "LLMException",
    "LLMStatusCode",
    "Status",
    "code_2_status",
    "handle_llm_status",
    "raise_if_false",
    "raise_if_true",
]
