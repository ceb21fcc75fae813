"""The status codes of the ``hixl`` engine API as one enum, for the fault floor and the tools.

The ``hixl`` face exports them as plain ``int`` constants, as the binding does (``hixl/_codes.py``;
hixl ``hixl_py.cc:227-235``); the fault rules, the code table and the coverage report need them as a
type of their own beside ``LLMStatusCode`` (the integers do not overlap). Values: hixl
``include/hixl/hixl_types.h:38-46``. Where a name alone could mean either (``TIMEOUT``), a rule or a
scenario file writes ``hixl.TIMEOUT`` (``label``).
"""

from __future__ import annotations

from enum import IntEnum
from typing import Optional, Union

from datadist_sim._status import LLMStatusCode

PREFIX = "hixl."


class HixlCode(IntEnum):
    SUCCESS = 0
    PARAM_INVALID = 103900
    TIMEOUT = 103901
    NOT_CONNECTED = 103902
    ALREADY_CONNECTED = 103903
    NOTIFY_FAILED = 103904
    UNSUPPORTED = 103905
    RESOURCE_EXHAUSTED = 203900
    FAILED = 503900

    @property
    def label(self) -> str:
        """``hixl.TIMEOUT``: how rules, scenario files and reports name it."""
        return PREFIX + self.name

    def __str__(self) -> str:
        return self.label


Code = Union[LLMStatusCode, HixlCode]
"""A code either API gives: a ``llm_datadist`` status or a ``hixl`` one."""


def label(code: Code) -> str:
    """The name a rule, a scenario file or a report gives ``code`` (``LLM_TIMEOUT``, ``hixl.TIMEOUT``)."""
    return code.label if isinstance(code, HixlCode) else code.name


def from_label(text: str) -> Optional[HixlCode]:
    """The hixl code ``hixl.NAME`` names, or None when ``text`` is no such label."""
    if not text.startswith(PREFIX):
        return None
    return HixlCode.__members__.get(text[len(PREFIX) :].upper())


_TWINS = {
    HixlCode.SUCCESS: LLMStatusCode.LLM_SUCCESS,
    HixlCode.PARAM_INVALID: LLMStatusCode.LLM_PARAM_INVALID,
    HixlCode.TIMEOUT: LLMStatusCode.LLM_TIMEOUT,
    HixlCode.NOT_CONNECTED: LLMStatusCode.LLM_NOT_YET_LINK,
    HixlCode.ALREADY_CONNECTED: LLMStatusCode.LLM_ALREADY_LINK,
    HixlCode.UNSUPPORTED: LLMStatusCode.LLM_FEATURE_NOT_ENABLED,
    HixlCode.RESOURCE_EXHAUSTED: LLMStatusCode.LLM_OUT_OF_MEMORY,
}
"""The ``LLMStatusCode`` the vendor pairs with each hixl code (adxl ``adxl_utils.cc:50-63``, hixl
``llm_log.h:164-176``; ``RESOURCE_EXHAUSTED``, which has no twin there, is ``LLM_OUT_OF_MEMORY``)."""


def as_llm(code: Code) -> LLMStatusCode:
    """``code`` as an ``LLMStatusCode``: itself, or a hixl code's twin (``LLM_FAILED`` when it has none)."""
    if isinstance(code, LLMStatusCode):
        return code
    return _TWINS.get(code, LLMStatusCode.LLM_FAILED)
