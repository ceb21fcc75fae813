"""Exceptions across the fabric's wire: an exception as data (a class name, args and attributes, rebuilt
on the other end only as a built-in or datadist-sim exception class already loaded there: nothing is
imported), and what a decoder raises for a value the protocol does not carry."""

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


class TypeRefused(ValueError):
    """A value the protocol does not carry (a class, enum or dtype outside its tables, or a value that
    names one). ``type_name`` is a short printable form of the name, safe to log and to send back (a
    frame's own text is never repeated beyond it)."""

    def __init__(self, type_name: str) -> None:
        self.type_name = printable(type_name)
        super().__init__(f"the fabric protocol does not carry {self.type_name}: refused")


def printable(text: str, limit: int = 96) -> str:
    """``text`` (a name from an untrusted frame) as identifier characters only, at most ``limit`` long."""
    kept = "".join(ch if ch.isascii() and (ch.isalnum() or ch in "._") else "?" for ch in text[: limit + 1])
    return kept if len(kept) <= limit else kept[: limit - 3] + "..."


class PayloadRefused(ValueError):
    """A message whose envelope decoded but whose payload holds a value the protocol does not carry: that
    one request is answered with a ``TypeError``, as the real library answers an argument of a type it
    does not take (``check_isinstance`` in hixl ``src/python/llm_datadist/llm_datadist/utils/utils.py``
    and in GE ``api/python/llm_datadist_v1/utils/utils.py`` raises ``TypeError``); the connection, still
    in step frame by frame, goes on serving."""

    def __init__(self, head: Tuple[Any, ...], type_name: str) -> None:
        super().__init__(f"a payload naming {type_name}: refused")
        self.head = head
        self.type_name = type_name

    @property
    def is_request(self) -> bool:
        return bool(self.head[0] == "req")

    def error(self) -> TypeError:
        """What the sender of the refused payload gets, in place of a result."""
        return refused_error("an argument" if self.is_request else "a reply", self.type_name, "decoded")

    def as_reply(self) -> Tuple[Any, ...]:
        """A refused reply as the failed reply its waiter gets."""
        return ("rep", self.head[1], False, self.error())


def refused_error(what: str, type_name: str, done: str) -> TypeError:
    return TypeError(
        f"the datadist-sim fabric carries only the types llm_datadist's API takes, but {what} names "
        f"{type_name}: refused, nothing of it {done}"
    )
