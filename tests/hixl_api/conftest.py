"""A fresh world per test, and engines that finalize themselves."""

from __future__ import annotations

from typing import Callable, Dict, Iterator, List, Optional

import pytest

import datadist_sim.hixl as hixl
from datadist_sim import SimWorld

SERVER = "127.0.0.1:26001"
OTHER = "127.0.0.1:26002"
NOBODY = "127.0.0.1:19999"


@pytest.fixture
def world() -> Iterator[SimWorld]:
    world = SimWorld()
    with world.activate():
        yield world


@pytest.fixture
def make(world: SimWorld) -> Iterator[Callable[..., hixl.Hixl]]:
    """``make(local, options)``: an initialised engine in the test's world."""
    made: List[hixl.Hixl] = []

    def build(local: str = "127.0.0.1:0", options: Optional[Dict[str, str]] = None) -> hixl.Hixl:
        engine = hixl.Hixl()
        assert engine.initialize(local, options or {}) == hixl.SUCCESS
        made.append(engine)
        return engine

    yield build
    for engine in made:
        engine.finalize()


CS = {hixl.OPTION_GLOBAL_RESOURCE_CONFIG: '{"comm_resource_config.protocol_desc": ["roce:device"]}'}
"""Options that pick the hixl_cs engine (``engine_factory.cc:66-69``)."""
