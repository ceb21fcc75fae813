"""Explore: find the fault schedule that breaks a client, shrink it, write it as a scenario file.

``datadist-sim explore package.module:function`` (``_main``), the ``datadist_explore`` pytest marker
(``pytest_support``), and ``explore()`` for programs. See README, section "Explore".
"""

from __future__ import annotations

from datadist_sim.explore.run import Hang as Hang
from datadist_sim.explore.run import Limits as Limits
from datadist_sim.explore.run import RunResult as RunResult
from datadist_sim.explore.search import Options as Options
from datadist_sim.explore.search import Outcome as Outcome
from datadist_sim.explore.search import explore as explore

__all__ = ["Hang", "Limits", "Options", "Outcome", "RunResult", "explore"]
