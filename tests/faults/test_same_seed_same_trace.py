"""Same seed, same trace: each bundled scenario at seed 1 writes, byte for byte, the trace it wrote before
the faults, the door and the fast paths were moved (digests in ``trace_digests.json``, taken from
``datadist-sim run NAME --seed 1 --trace F`` on main at ``f285231``).

A change that means to alter what a scenario does (a new fidelity decision, a new event) changes these
digests on purpose; regenerate them with
``DATADIST_SIM_WRITE_DIGESTS=1 python -m pytest tests/faults/test_same_seed_same_trace.py`` and say why
in the commit. Anything else that changes them has changed behaviour by accident.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Dict

import pytest

from datadist_sim import scenarios
from datadist_sim.scenarios.runner import run

DIGESTS = Path(__file__).with_name("trace_digests.json")
RECORDED: Dict[str, str] = json.loads(DIGESTS.read_text())


def test_every_bundled_scenario_has_a_recorded_digest() -> None:
    assert sorted(RECORDED) == sorted(scenarios.names())


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_bundled_scenario_at_seed_1_writes_the_recorded_trace(name: str, tmp_path: Path) -> None:
    path = tmp_path / f"{name}.jsonl"
    run(scenarios.load(name), seed=1, trace_path=str(path))
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if os.environ.get("DATADIST_SIM_WRITE_DIGESTS") == "1":
        RECORDED[name] = digest
        DIGESTS.write_text(json.dumps(RECORDED, indent=2, sort_keys=True) + "\n")
    assert digest == RECORDED[name], f"{name}: the same seed no longer gives the same trace"
