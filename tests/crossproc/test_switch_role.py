"""switch_role between two real processes: a loopback listener closes and the same port reopens."""

from __future__ import annotations

import pytest

from .conftest import Fabric

pytestmark = pytest.mark.crossproc


def test_roles_swap_across_processes_and_the_closed_port_is_reused(fabric: Fabric) -> None:
    a = fabric.start("switch_role.py", "a")
    b = fabric.start("switch_role.py", "b")
    a.expect("up")
    b.expect("up")
    b.tell()
    assert b.expect("link") == "LLM_SUCCESS"
    assert b.expect("pulled") == "True"
    assert b.expect("unlink") == "LLM_SUCCESS"
    a.tell()  # a becomes Decoder: its listener on 127.0.0.1:26000 closes
    a.expect("switched")
    b.tell()  # b becomes Prompt listening on that very port
    b.expect("switched")
    a.tell()
    assert a.expect("link") == "LLM_SUCCESS"
    a.expect("pushed")
    b.tell()
    assert b.expect("pushed_bytes") == "True"
    b.expect("done")
    a.tell()
    a.expect("done")
    assert (a.finish(), b.finish()) == (0, 0)
