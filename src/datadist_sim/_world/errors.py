"""The only exception the world raises; the drop-in face turns it into ``LLMException``."""

from __future__ import annotations

from datadist_sim._status import LLMStatusCode


class SimError(Exception):
    """A failure of the simulated engine, carrying the status code the real engine would return."""

    def __init__(self, code: LLMStatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def __repr__(self) -> str:
        return f"SimError({self.code}, {self.message!r})"
