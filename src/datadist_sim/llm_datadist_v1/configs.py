"""The v1 config names: the same classes as ``llm_datadist.configs``."""

from __future__ import annotations

from datadist_sim.llm_datadist.configs import LLMClusterInfo as LLMClusterInfo
from datadist_sim.llm_datadist.configs import LlmConfig as LlmConfig
from datadist_sim.llm_datadist.configs import LLMRole as LLMRole
