"""The exceptions the world raises: ``SimError``, which the drop-in face turns into ``LLMException``, and
its public subclass ``MemoryAccessError`` for the simulator's own tools that read memory directly."""

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


class MemoryAccessError(SimError):
    """Memory a client asked to read or write directly (``datadist_sim.tensor_views``) cannot be handed
    out: it holds an uncorrectable error (``code`` is ``LLM_DEVICE_MEM_ERROR``), it is not (or no longer)
    live memory of the world or of this process (``LLM_PARAM_INVALID``), or no bytes back it at all, in a
    metadata-only world (``LLM_FEATURE_NOT_ENABLED``). Public as ``datadist_sim.MemoryAccessError``, so a
    client's own byte check can catch it; a subclass of the world's error, so code that caught that
    still does."""

    def __repr__(self) -> str:
        return f"MemoryAccessError({self.code}, {self.message!r})"


class BlocksForever(BaseException):
    """The real engine's call would never return here (it waits on a peer that a fault rule hangs for
    good, and nothing the plan holds will end the wait); the simulator says so instead of hanging the
    test. Not a status code: no code comes back from the vendor's call either. A ``BaseException``, so a
    client's ``except Exception`` retry loop does not carry on as if the call had returned."""
