"""Raw pointers are routed to the process that owns them, by (process, address): workers ``fork``ed from
one parent hold buffers at the same virtual address, and each pull lands in the puller's own buffer,
nothing in its siblings', and nothing in memory a process unregistered and reused."""

from __future__ import annotations

from typing import Dict

import pytest

from .conftest import Fabric

pytestmark = pytest.mark.crossproc


def _reports(fabric: Fabric, nbytes: int) -> Dict[str, str]:
    program = fabric.start("forked_workers.py", str(nbytes))
    program.finish(timeout=180)
    found = dict(line.split(" ", 1) for line in program.lines if " " in line)
    assert not [k for k in found if k.endswith("_error")], program.lines
    return found


@pytest.mark.parametrize("nbytes", [4096, 1 << 20], ids=["inline", "large"])
def test_forked_workers_at_one_address_each_get_their_own_bytes(fabric: Fabric, nbytes: int) -> None:
    found = _reports(fabric, nbytes)
    # the premise: the three buffers sit at one virtual address
    assert found["prompt_address"] == found["a_address"] == found["b_address"], found
    assert found["a_pulled"] == "True"  # A's pull wrote A's buffer, with the Prompt's bytes
    assert found["b_untouched"] == "True"  # ... and nothing of B's
    assert found["prompt_intact"] == "True"
    assert found["b_pulled"] == "True"  # after A unregistered, B's pull goes to B
    assert found["a_reused_untouched"] == "True"  # ... never into A's reused memory
    assert found["exit"] == "[0, 0, 0]"
