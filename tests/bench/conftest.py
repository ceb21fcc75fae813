"""Benchmark tests build many worlds: collect their garbage before the next test starts, so the timing of
the cyclic collector in later tests does not depend on whether these ran."""

from __future__ import annotations

import gc
from typing import Iterator

import pytest


@pytest.fixture(autouse=True)
def _collect_garbage() -> Iterator[None]:
    yield
    gc.collect()
