"""Logging under the ``datadist_sim`` logger: silent unless the application turns it on.

World code calls ``world_event(event)`` once per notable event (an API call and its outcome, a fault
firing, a cluster killed); it costs one level check when DEBUG is off. Happy-path lines never contain
the word "error": outcomes are status-code names such as ``LLM_SUCCESS``.
"""

from __future__ import annotations

import logging
import sys
from typing import IO, Optional

LOGGER_NAME = "datadist_sim"
logger = logging.getLogger(LOGGER_NAME)
logger.addHandler(logging.NullHandler())
world_logger = logging.getLogger(LOGGER_NAME + ".world")


def world_event(event: object) -> None:
    """One DEBUG line for a world event or API call, in the trace's readable form (``str(event)``)."""
    if world_logger.isEnabledFor(logging.DEBUG):
        world_logger.debug("%s", event)


def enable(level: int = logging.DEBUG, stream: Optional[IO[str]] = None) -> logging.Handler:
    """Send ``datadist_sim`` records at ``level`` and above to ``stream`` (stderr); returns the handler
    so the caller can remove it. For scripts and the CLI's ``-v``; applications configure logging."""
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(level)
    return handler


def disable(handler: logging.Handler) -> None:
    """Undo ``enable``: remove its handler and return the logger to the inherited level."""
    logger.removeHandler(handler)
    logger.setLevel(logging.NOTSET)
