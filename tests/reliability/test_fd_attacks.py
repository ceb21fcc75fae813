"""Descriptors and an authenticated but hostile client: the fabric hands a memory file only to a
connection that joined a session (hello or attach), only one it holds by that name, and keeps none that
a client attaches to its requests; it stays answering throughout."""

from __future__ import annotations

import array
import os
import socket
from typing import Iterator, List, Tuple

import pytest
from tests.crossproc.conftest import Fabric
from tests.reliability._attacker import Attacker

from datadist_sim.fabric.transport import wire
from datadist_sim.fabric.transport.exceptions import unpack_exception


@pytest.fixture
def fabric() -> Iterator[Fabric]:
    world = Fabric()
    try:
        yield world
    finally:
        world.close()


def _reply_with_fds(attacker: Attacker, rid: int) -> Tuple[bool, object, List[int]]:
    """The reply to ``rid`` and every descriptor that came with it (closed here: only counted)."""
    fds: List[int] = []
    data = b""
    while len(data) < wire.HEADER.size or len(data) < wire.HEADER.size + wire.HEADER.unpack_from(data)[0]:
        chunk, ancillary, _, _ = attacker.sock.recvmsg(65536, socket.CMSG_SPACE(64 * 4))
        assert chunk, "the fabric closed the connection"
        for _, _, payload in ancillary:
            fds.extend(array.array("i", payload[: len(payload) - len(payload) % 4]))
        data += chunk
    for fd in fds:
        os.close(fd)
    message = attacker._loads(data[wire.HEADER.size :])
    assert message[1] == rid
    return bool(message[2]), message[3], fds


def test_no_descriptor_before_a_connection_joins_a_session(fabric: Fabric) -> None:
    with Attacker(fabric.address, hello=False) as stranger:
        ok, error, fds = _reply_with_fds(stranger, stranger.request("fd", "datadist-sim-0000000000000000"))
    assert not ok
    assert "hello or attach" in str(wire.unpack_exception(error))
    assert fds == []


def test_a_name_the_fabric_does_not_hold_gets_no_descriptor(fabric: Fabric) -> None:
    with Attacker(fabric.address) as member:
        for name in ("datadist-sim-0123456789abcdef", "", "../../etc/passwd", 7):
            ok, error, fds = _reply_with_fds(member, member.request("fd", name))
            assert not ok, name
            assert isinstance(unpack_exception(error), FileNotFoundError), error
            assert fds == []
        ok, status = member.call("fn", "status", (), {})
        assert ok, status


def test_descriptors_a_client_attaches_to_its_requests_are_not_kept_by_the_fabric(fabric: Fabric) -> None:
    fabric_fds = f"/proc/{fabric.server.pid}/fd"
    with Attacker(fabric.address) as member:
        assert member.call("fn", "status", (), {})[0]
        before = len(os.listdir(fabric_fds))
        files = [os.open("/dev/null", os.O_RDONLY) for _ in range(16)]
        try:
            for _ in range(20):
                frame = member._dumps(("req", member.next_id(), "fn", ("status", (), {})))
                rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", files).tobytes())]
                member.sock.sendmsg([wire.HEADER.pack(len(frame)) + frame], rights)
            ok, status = member.call("fn", "status", (), {})  # answered after all of them
        finally:
            for fd in files:
                os.close(fd)
        assert ok, status
        assert len(os.listdir(fabric_fds)) <= before
