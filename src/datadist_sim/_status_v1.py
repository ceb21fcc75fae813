"""The v1 package's own status codes and exception (the face: ``llm_datadist_v1.status``).

In the real split packaging the v1 package (GE ``api/python/llm_datadist_v1/status.py:20-64``) defines
``LLMStatusCode`` as a plain ``Enum`` and ``LLMException`` as a class of its own; its ``KvCacheManager``
raises that class. So ``except llm_datadist.LLMException`` does not catch a v1 manager's error, and a v1
code equals neither a ``llm_datadist.LLMStatusCode`` member nor an int. The simulator raises them the
same way by default; ``SimConfig(unified_exceptions=True)`` gives instead one exception caught by both
names, with ``llm_datadist`` codes (``UnifiedLLMException``).

Tools that must work with both (retry policies, the scenario runner, the benchmarks, the pytest
helpers) catch ``LLM_ERRORS`` and read codes with ``as_code``, which matches on the name.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Optional, Union

from datadist_sim import _status
from datadist_sim._status import LLMStatusCode as HixlCode


class LLMStatusCode(Enum):
    """The v1 codes: the same names and integers as ``llm_datadist.LLMStatusCode``, but a plain
    ``Enum``, so a member is equal only to itself (``.value`` holds the integer)."""

    LLM_SUCCESS = int(HixlCode.LLM_SUCCESS)
    LLM_FAILED = int(HixlCode.LLM_FAILED)
    LLM_PARAM_INVALID = int(HixlCode.LLM_PARAM_INVALID)
    LLM_WAIT_PROCESS_TIMEOUT = int(HixlCode.LLM_WAIT_PROCESS_TIMEOUT)
    LLM_KV_CACHE_NOT_EXIST = int(HixlCode.LLM_KV_CACHE_NOT_EXIST)
    LLM_REPEAT_REQUEST = int(HixlCode.LLM_REPEAT_REQUEST)
    LLM_REQUEST_ALREADY_COMPLETED = int(HixlCode.LLM_REQUEST_ALREADY_COMPLETED)
    LLM_ENGINE_FINALIZED = int(HixlCode.LLM_ENGINE_FINALIZED)
    LLM_NOT_YET_LINK = int(HixlCode.LLM_NOT_YET_LINK)
    LLM_ALREADY_LINK = int(HixlCode.LLM_ALREADY_LINK)
    LLM_LINK_FAILED = int(HixlCode.LLM_LINK_FAILED)
    LLM_UNLINK_FAILED = int(HixlCode.LLM_UNLINK_FAILED)
    LLM_NOTIFY_PROMPT_UNLINK_FAILED = int(HixlCode.LLM_NOTIFY_PROMPT_UNLINK_FAILED)
    LLM_CLUSTER_NUM_EXCEED_LIMIT = int(HixlCode.LLM_CLUSTER_NUM_EXCEED_LIMIT)
    LLM_PROCESSING_LINK = int(HixlCode.LLM_PROCESSING_LINK)
    LLM_DEVICE_OUT_OF_MEMORY = int(HixlCode.LLM_DEVICE_OUT_OF_MEMORY)
    LLM_PREFIX_ALREADY_EXIST = int(HixlCode.LLM_PREFIX_ALREADY_EXIST)
    LLM_PREFIX_NOT_EXIST = int(HixlCode.LLM_PREFIX_NOT_EXIST)
    LLM_SEQ_LENOVERLIMIT = int(HixlCode.LLM_SEQ_LENOVERLIMIT)
    LLM_NO_FREE_BLOCK = int(HixlCode.LLM_NO_FREE_BLOCK)
    LLM_BLOCKS_OUT_OF_MEMORY = int(HixlCode.LLM_BLOCKS_OUT_OF_MEMORY)
    LLM_EXIST_LINK = int(HixlCode.LLM_EXIST_LINK)
    LLM_FEATURE_NOT_ENABLED = int(HixlCode.LLM_FEATURE_NOT_ENABLED)
    LLM_TIMEOUT = int(HixlCode.LLM_TIMEOUT)
    LLM_LINK_BUSY = int(HixlCode.LLM_LINK_BUSY)
    LLM_OUT_OF_MEMORY = int(HixlCode.LLM_OUT_OF_MEMORY)
    LLM_DEVICE_MEM_ERROR = int(HixlCode.LLM_DEVICE_MEM_ERROR)
    LLM_SUSPECT_REMOTE_ERROR = int(HixlCode.LLM_SUSPECT_REMOTE_ERROR)
    LLM_UNKNOWN_ERROR = -1


class LLMException(RuntimeError):
    """The v1 package's exception: not a subclass of ``llm_datadist.LLMException`` (nor the reverse)."""

    def __init__(self, *args: object, status_code: LLMStatusCode = LLMStatusCode.LLM_SUCCESS) -> None:
        super().__init__(*args)
        self._status_code = status_code

    @property
    def status_code(self) -> LLMStatusCode:
        return self._status_code


class UnifiedLLMException(_status.LLMException, LLMException):  # type: ignore[misc]
    """``SimConfig(unified_exceptions=True)``: one exception that both ``except llm_datadist.LLMException``
    and ``except llm_datadist_v1.LLMException`` catch, carrying a ``llm_datadist.LLMStatusCode`` (the
    first base's ``status_code``)."""


class Status:
    """The v1 status holder."""

    def __init__(self, status: LLMStatusCode) -> None:
        self._status_code = status

    def is_ok(self) -> bool:
        return self._status_code == LLMStatusCode.LLM_SUCCESS

    @property
    def status_code(self) -> LLMStatusCode:
        return self._status_code


_KNOWN = {code.value: code for code in LLMStatusCode if code is not LLMStatusCode.LLM_UNKNOWN_ERROR}


def code_2_status(status: Any) -> LLMStatusCode:
    """An engine integer (or a code of either enum) as a v1 member; anything unknown is ``LLM_FAILED``."""
    value = status.value if isinstance(status, Enum) else status
    try:
        return _KNOWN.get(int(value), LLMStatusCode.LLM_FAILED)
    except (TypeError, ValueError):
        return LLMStatusCode.LLM_FAILED


handle_llm_status = _status.make_handle_llm_status(
    LLMException,
    code_2_status,
    lambda status: code_2_status(status) is not LLMStatusCode.LLM_SUCCESS,
    __name__,
)
"""Unlike the v2 helper this one reads the status through ``code_2_status`` first, so a code of either
enum (``tensor.py`` passes a v1 member) is judged by its name."""
raise_if_false, raise_if_true = _status.make_raise_ifs(LLMException, LLMStatusCode, __name__)


# -- between the two packages -------------------------------------------------------------------------

LLM_ERRORS = (_status.LLMException, LLMException)
"""Both packages' exception classes: what a tool that serves either mode catches."""

CodeLike = Union[HixlCode, LLMStatusCode, int, str]


def as_code(code: CodeLike) -> HixlCode:
    """Any package's code (member of either enum, its integer or its name) as a ``llm_datadist`` member.

    Matching on the name (or the integer) is what keeps code that compares codes working with both
    packages."""
    if isinstance(code, HixlCode):
        return code
    if isinstance(code, LLMStatusCode):
        return HixlCode[code.name]
    if isinstance(code, str):
        name = code.rsplit(".", 1)[-1].upper()
        return HixlCode[name if name.startswith("LLM_") else f"LLM_{name}"]
    return _status.code_2_status(int(code))


def code_of(exc: BaseException) -> Optional[HixlCode]:
    """The status code an exception of either package carries, as a ``llm_datadist`` member; ``None``
    for anything else."""
    code = getattr(exc, "status_code", None)
    if isinstance(code, (HixlCode, LLMStatusCode)):
        return as_code(code)
    return None


def to_v1(code: HixlCode) -> LLMStatusCode:
    return LLMStatusCode[code.name]


def v1_error(exc: _status.LLMException, *, unified: bool) -> RuntimeError:
    """The exception a v1 manager raises for ``exc`` (the same message): the v1 class with the v1 code,
    or under ``unified_exceptions`` the class both names catch."""
    code = exc.status_code
    if unified:
        return UnifiedLLMException(*exc.args, status_code=code)
    return LLMException(*exc.args, status_code=to_v1(code))
