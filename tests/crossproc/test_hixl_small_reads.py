"""A small cross-process ``hixl`` READ takes its bytes in the reply to the caller's call
(``fabric/client/hixl_proxy.py``, ``fabric/host/raw.py``: ``delivering``): no memory request is made of
the caller, and none of the source's process beyond the first (its mark) where the fabric may read it
itself. Whatever the world refuses writes nothing, on either side."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import Fabric

pytestmark = pytest.mark.crossproc

SUCCESS, PARAM_INVALID, TIMEOUT, FAILED = 0, 103900, 103901, 503900


def _pair(fabric: Fabric, client_mode: str = "client") -> tuple:  # type: ignore[type-arg]
    server = fabric.start("hixl_small_reads.py", "server")
    client = fabric.start("hixl_small_reads.py", client_mode)
    client.tell(server.expect("addr"))
    return server, client


@pytest.mark.parametrize("direct", ["1", "0"])
def test_a_small_read_comes_back_in_the_reply_and_refusals_write_nothing(direct: str) -> None:
    fabric = Fabric(direct_memory=direct)
    try:
        server, client = _pair(fabric)
        assert int(client.expect("read")) == SUCCESS
        assert client.expect("bytes") == "True"
        assert client.expect("rest") == "True"  # only the described ranges were written
        # the caller is never asked to check or write its own memory: the bytes came in its reply
        assert client.expect("served") == "-"
        # hixl_mem_store.cc:259-279: a range outside either engine's registrations is PARAM_INVALID
        assert client.expect("out_of_range").split() == [str(PARAM_INVALID), "True"]
        assert client.expect("unregistered").split() == [str(PARAM_INVALID), "True"]
        peeks = int(client.expect("status"))
        server.tell()
        served = server.expect("served")
        if direct == "1":
            # the fabric read the server's memory itself: it asked only for the server's mark, once
            assert peeks == 1
            assert served == "mem_check_read"
        else:  # direct_memory=0: the fabric asks the server to read its own memory, as before
            assert peeks == 0
            assert served == "mem_read"
        assert server.expect("intact") == "True"  # a READ never writes the remote side
        server.expect("finalized")
        client.tell()
        # a peer that finalized its engine: FAILED, nothing written
        assert client.expect("after_finalize").split() == [str(FAILED), "True"]
        client.expect("done")
        server.tell()
        server.expect("done")
        assert (client.finish(), server.finish()) == (0, 0)
    finally:
        fabric.close()


RULES = {
    "fail": 'action = "fail"\ncode = "hixl.FAILED"',
    "landed": 'action = "timeout"\nlanded = true',
}


@pytest.mark.parametrize(
    ("rule", "first"),
    [
        ("fail", [str(FAILED), "True", "False"]),  # refused: nothing written
        # a timeout whose bytes landed all the same (tests/hixl_api/test_faults.py, in one process)
        ("landed", [str(TIMEOUT), "False", "True"]),
    ],
)
def test_a_small_read_under_a_fault_rule_writes_what_the_world_wrote(
    tmp_path: Path,
    rule: str,
    first: list,  # type: ignore[type-arg]
) -> None:
    scenario = tmp_path / "rule.toml"
    scenario.write_text(f'name = "{rule}"\n[[rules]]\n{RULES[rule]}\nop = "hixl.transfer_sync"\nfirst = 1\n')
    fabric = Fabric("--scenario", str(scenario))
    try:
        server, client = _pair(fabric, "client_rule")
        assert client.expect("first").split() == first
        assert client.expect("second").split() == [str(SUCCESS), "True"]
        client.expect("done")
        server.tell()
        assert server.expect("intact") == "True"
        server.tell()
        server.expect("done")
        assert (client.finish(), server.finish()) == (0, 0)
    finally:
        fabric.close()
