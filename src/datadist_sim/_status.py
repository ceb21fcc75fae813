"""Status codes and the exception every engine failure becomes (the face: ``llm_datadist.status``)."""

from __future__ import annotations

from enum import IntEnum
from typing import Any

_BASE = 0x5010B000


class LLMStatusCode(IntEnum):
    """The engine's ``ge::Status`` values; ``str()`` gives ``"LLMStatusCode.NAME"`` as the real one."""

    LLM_SUCCESS = 0
    LLM_FAILED = 0xFFFFFFFF
    LLM_PARAM_INVALID = _BASE + 0x05
    LLM_WAIT_PROCESS_TIMEOUT = _BASE + 0x01
    LLM_KV_CACHE_NOT_EXIST = _BASE + 0x02
    LLM_REPEAT_REQUEST = _BASE + 0x03
    LLM_REQUEST_ALREADY_COMPLETED = _BASE + 0x04
    LLM_ENGINE_FINALIZED = _BASE + 0x06
    LLM_NOT_YET_LINK = _BASE + 0x07
    LLM_ALREADY_LINK = _BASE + 0x08
    LLM_LINK_FAILED = _BASE + 0x09
    LLM_UNLINK_FAILED = _BASE + 0x0A
    LLM_NOTIFY_PROMPT_UNLINK_FAILED = _BASE + 0x0B
    LLM_CLUSTER_NUM_EXCEED_LIMIT = _BASE + 0x0C
    LLM_PROCESSING_LINK = _BASE + 0x0D
    LLM_DEVICE_OUT_OF_MEMORY = _BASE + 0x0E
    LLM_PREFIX_ALREADY_EXIST = _BASE + 0x0F
    LLM_PREFIX_NOT_EXIST = _BASE + 0x10
    LLM_SEQ_LENOVERLIMIT = _BASE + 0x11
    LLM_NO_FREE_BLOCK = _BASE + 0x12
    LLM_BLOCKS_OUT_OF_MEMORY = _BASE + 0x13
    LLM_EXIST_LINK = _BASE + 0x18
    LLM_FEATURE_NOT_ENABLED = _BASE + 0x19
    LLM_TIMEOUT = _BASE + 0x1A
    LLM_LINK_BUSY = _BASE + 0x1B
    LLM_OUT_OF_MEMORY = _BASE + 0x1C
    LLM_DEVICE_MEM_ERROR = 507053
    LLM_SUSPECT_REMOTE_ERROR = 507057
    LLM_UNKNOWN_ERROR = -1

    def __str__(self) -> str:
        return f"{self.__class__.__name__}.{self.name}"


class LLMException(RuntimeError):
    """Raised for every engine failure and every semantic argument check."""

    def __init__(self, *args: object, status_code: LLMStatusCode = LLMStatusCode.LLM_SUCCESS) -> None:
        super().__init__(*args)
        self._status_code = status_code

    @property
    def status_code(self) -> LLMStatusCode:
        return self._status_code


class Status:
    """A status holder; exported by the real package though no method returns it."""

    def __init__(self, status: LLMStatusCode) -> None:
        self._status_code = status

    def is_ok(self) -> bool:
        return bool(self._status_code == LLMStatusCode.LLM_SUCCESS)

    @property
    def status_code(self) -> LLMStatusCode:
        return self._status_code


_KNOWN = {int(code): code for code in LLMStatusCode if code is not LLMStatusCode.LLM_UNKNOWN_ERROR}


def code_2_status(status: int) -> LLMStatusCode:
    """Map an engine integer to a member; anything unknown is ``LLM_FAILED``, as in the real wrapper."""
    return _KNOWN.get(int(status), LLMStatusCode.LLM_FAILED)


def handle_llm_status(status: int, func_name: str, other_info: object) -> None:
    """Raise the real message form for a non-success engine code."""
    if status != LLMStatusCode.LLM_SUCCESS:
        code = code_2_status(status)
        raise LLMException(f"{func_name} failed, error code is {code}, {other_info}.", status_code=code)


def raise_if_false(
    pred: object,
    fmt: str,
    *args: Any,
    status_code: LLMStatusCode = LLMStatusCode.LLM_PARAM_INVALID,
    **kwargs: Any,
) -> None:
    if not pred:
        raise LLMException(fmt.format(*args, **kwargs), status_code=status_code)


def raise_if_true(
    pred: object,
    fmt: str,
    *args: Any,
    status_code: LLMStatusCode = LLMStatusCode.LLM_PARAM_INVALID,
    **kwargs: Any,
) -> None:
    if pred:
        raise LLMException(fmt.format(*args, **kwargs), status_code=status_code)
