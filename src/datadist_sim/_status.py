"""Status codes and the exception every engine failure becomes (the face: ``llm_datadist.status``)."""

from __future__ import annotations

from enum import Enum, IntEnum
from typing import Any, Callable, Protocol, TypeVar

_BASE = 0x5010B000
_F = TypeVar("_F", bound=Callable[..., Any])


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


# -- the raisers, one implementation for both packages ---------------------------------------------
# The v2 package (hixl ``src/python/llm_datadist/llm_datadist/status.py:127-144``) and the v1 package (ge
# ``api/python/llm_datadist_v1/status.py:125-144``) write the same three helpers, each raising its own
# exception class with its own enum; the factories below take those two and give a package its helpers.

_E = TypeVar("_E", bound=Enum)
_E_contra = TypeVar("_E_contra", bound=Enum, contravariant=True)


class HandleStatus(Protocol):
    def __call__(self, status: Any, func_name: str, other_info: object) -> None: ...


class RaiseIf(Protocol[_E_contra]):
    def __call__(
        self, pred: object, fmt: str, *args: Any, status_code: _E_contra = ..., **kwargs: Any
    ) -> None: ...


def _named(func: _F, name: str, module: str) -> _F:
    """Give a made function the name and module a plain module-level one would have (for repr and pickle)."""
    func.__name__ = func.__qualname__ = name
    func.__module__ = module
    return func


def make_handle_llm_status(
    error: Callable[..., Exception],
    to_code: Callable[[Any], _E],
    is_failure: Callable[[Any], bool],
    module: str,
) -> HandleStatus:
    """``handle_llm_status`` raising ``error`` with ``to_code(status)`` when ``is_failure(status)``, which
    reads the raw status (the v2 wrapper compares the integer itself, status.py:128, and converts it only
    for the message)."""

    def handle_llm_status(status: Any, func_name: str, other_info: object) -> None:
        """Raise the real message form for a non-success engine code."""
        if is_failure(status):
            code = to_code(status)
            raise error(f"{func_name} failed, error code is {code}, {other_info}.", status_code=code)

    return _named(handle_llm_status, "handle_llm_status", module)


def make_raise_ifs(
    error: Callable[..., Exception], codes: type[_E], module: str
) -> tuple[RaiseIf[_E], RaiseIf[_E]]:
    """``raise_if_false`` and ``raise_if_true`` raising ``error``, by default with ``LLM_PARAM_INVALID``
    of ``codes``."""
    param_invalid = codes["LLM_PARAM_INVALID"]

    def raise_if_false(
        pred: object, fmt: str, *args: Any, status_code: _E = param_invalid, **kwargs: Any
    ) -> None:
        if not pred:
            raise error(fmt.format(*args, **kwargs), status_code=status_code)

    def raise_if_true(
        pred: object, fmt: str, *args: Any, status_code: _E = param_invalid, **kwargs: Any
    ) -> None:
        if pred:
            raise error(fmt.format(*args, **kwargs), status_code=status_code)

    return _named(raise_if_false, "raise_if_false", module), _named(raise_if_true, "raise_if_true", module)


handle_llm_status = make_handle_llm_status(
    LLMException, code_2_status, lambda status: bool(status != LLMStatusCode.LLM_SUCCESS), __name__
)
raise_if_false, raise_if_true = make_raise_ifs(LLMException, LLMStatusCode, __name__)
