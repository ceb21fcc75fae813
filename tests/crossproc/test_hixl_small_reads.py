"""A small cross-process ``hixl`` transfer carries its caller's side in the call and the reply
(``fabric/client/hixl_proxy.py``, ``fabric/host/carried.py``): a READ takes its bytes in the reply, a
WRITE sends its bytes with the call, so no memory request is made of the caller; a READ makes none of
the source's process beyond the first (its mark) where the fabric may read it itself, a WRITE one of the
destination's (the write). Whatever the world refuses writes nothing, on either side."""

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
@pytest.mark.parametrize("mode", ["client", "client_write"])
def test_a_small_transfer_makes_no_request_of_its_caller_and_refusals_write_nothing(
    direct: str, mode: str
) -> None:
    fabric = Fabric(direct_memory=direct)
    try:
        server, client = _pair(fabric, mode)
        assert int(client.expect("read")) == SUCCESS
        assert client.expect("bytes") == "True"
        assert client.expect("rest") == "True"  # only the described ranges were written
        # hixl_mem_store.cc:259-279: a range outside either engine's registrations is PARAM_INVALID
        assert client.expect("out_of_range").split() == [str(PARAM_INVALID), "True"]
        assert client.expect("unregistered").split() == [str(PARAM_INVALID), "True"]
        if mode == "client_write":
            assert int(client.expect("write_out_of_range")) == PARAM_INVALID
            assert int(client.expect("write_unregistered")) == PARAM_INVALID
            assert int(client.expect("write")) == SUCCESS
        # the caller is never asked to check, read or write its own memory: its side came with its call
        # (a WRITE's bytes) or went back in its reply (a READ's)
        assert client.expect("served") == "-"
        peeks = int(client.expect("status"))
        server.tell()
        # the fabric read the server's memory itself, asking only for its mark, once; with
        # direct_memory=0 it asks the server to read its memory, as before. A WRITE asks the server
        # once, to write (its write request checks the ranges first)
        asked = ["mem_check_read"] if direct == "1" else ["mem_read"]
        if mode == "client_write":
            asked.append("mem_write")
        assert server.expect("served").split(",") == asked
        assert peeks == (1 if direct == "1" else 0)
        if mode == "client":
            assert server.expect("intact") == "True"  # a READ never writes the remote side
        else:  # the refused WRITEs wrote nothing; the one that went through wrote its 4 KiB alone
            assert server.expect("written") == "True"
        server.expect("finalized")
        client.tell()
        # a peer that finalized its engine: FAILED, nothing written
        assert client.expect("after_finalize").split() == [str(FAILED), "True"]
        if mode == "client_write":
            assert int(client.expect("write_after_finalize")) == FAILED
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
