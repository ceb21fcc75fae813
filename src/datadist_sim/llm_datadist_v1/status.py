"""The v1 status names, shared with ``llm_datadist`` so one ``LLMException`` class is caught everywhere.

(The real split packaging has two distinct exception classes; see reference section 1.1.)
"""

from __future__ import annotations

from datadist_sim.llm_datadist.status import LLMException as LLMException
from datadist_sim.llm_datadist.status import LLMStatusCode as LLMStatusCode
from datadist_sim.llm_datadist.status import Status as Status
from datadist_sim.llm_datadist.status import code_2_status as code_2_status
from datadist_sim.llm_datadist.status import handle_llm_status as handle_llm_status
from datadist_sim.llm_datadist.status import raise_if_false as raise_if_false
from datadist_sim.llm_datadist.status import raise_if_true as raise_if_true
