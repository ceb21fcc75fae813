"""Exceptions as data across the fabric's wire: a class name, args and attributes, rebuilt on the other
end only as a built-in or datadist-sim exception class already loaded there (nothing is imported)."""

from __future__ import annotations

import sys
from typing import Any, Dict, Tuple

PackedException = Tuple[str, str, Tuple[Any, ...], Dict[str, Any]]


class RemoteError(RuntimeError):
    """An exception from the other end that cannot be rebuilt here as its own type."""


def pack_exception(exc: BaseException) -> PackedException:
    """An exception as data: its class (by import path), args and attributes."""
    cls = type(exc)
    state = {k: v for k, v in vars(exc).items() if not k.startswith("__")} if hasattr(exc, "__dict__") else {}
    return cls.__module__, cls.__qualname__, tuple(exc.args), state


def unpack_exception(packed: PackedException) -> BaseException:
    """Rebuild the very exception type (``LLMException`` with its status code, ``TypeError``...) when it
    is a built-in one or one of datadist-sim's modules already loaded here (nothing is imported); any
    other keeps only its text, as ``RemoteError``."""
    module, qualname, args, state = packed
    text = f"{module}.{qualname}: {', '.join(map(str, args))}"
    loaded = sys.modules.get(module) if module == "builtins" or module.startswith("datadist_sim.") else None
    cls: Any = loaded
    for part in qualname.split(".") if loaded is not None else ():
        cls = getattr(cls, part, None)
    if not (isinstance(cls, type) and issubclass(cls, BaseException)):
        return RemoteError(text)
    try:
        exc: BaseException = cls.__new__(cls)
        exc.args = tuple(args)
        if state:
            vars(exc).update(state)
        return exc
    except Exception:  # a class that cannot be rebuilt this way: keep the text
        return RemoteError(text)
