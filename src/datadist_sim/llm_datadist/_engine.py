"""The face's bridge to the world: a ``SimError`` leaves an engine call as the real ``LLMException``."""

from __future__ import annotations

import contextlib
from typing import Iterator

from datadist_sim._world.errors import SimError
from datadist_sim.llm_datadist.status import handle_llm_status


@contextlib.contextmanager
def engine_call(func_name: str, other_info: object) -> Iterator[None]:
    """One engine call: a ``SimError`` leaves as the real ``LLMException`` message form."""
    try:
        yield
    except SimError as exc:
        handle_llm_status(exc.code, func_name, f"{other_info} ({exc.message})")
