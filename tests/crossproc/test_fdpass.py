"""The client's rules for descriptors the fabric hands over (``fabric.fdpass``): at most ``MAX_FDS`` a
message, the surplus and everything with it closed; only a sealed, fixed-size memory file of the name
and size asked for is mapped; an ordinary reply that carries a descriptor leaves none open here."""

from __future__ import annotations

import array
import fcntl
import os
import pickle
import socket
import tempfile
from typing import Iterator, List, Tuple

import pytest

from datadist_sim.fabric.transport import fdpass
from datadist_sim.fabric.transport.channel import CallConnection, ChannelClosed
from datadist_sim.fabric.transport.wire import HEADER

pytestmark = pytest.mark.crossproc


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture
def pair() -> Iterator[Tuple[socket.socket, socket.socket]]:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    yield ours, theirs
    ours.close()
    theirs.close()


def _memfd(name: str, size: int, seals: int) -> int:
    fd = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, size)
    if seals:
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
    return fd


def _send_reply(sock: socket.socket, rid: int, value: object, fds: List[int]) -> None:
    frame = pickle.dumps(("rep", rid, True, value))
    rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds).tobytes())] if fds else []
    sock.sendmsg([HEADER.pack(len(frame)) + frame], rights)


def test_a_message_with_more_descriptors_than_the_bound_is_refused_and_leaves_none_open(
    pair: Tuple[socket.socket, socket.socket],
) -> None:
    ours, theirs = pair
    files = [_memfd("dds-test", 4096, fdpass.FIXED_SIZE_SEALS) for _ in range(fdpass.MAX_FDS + 2)]
    before = _open_fds()
    theirs.sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", files).tobytes())])
    for fd in files:
        os.close(fd)
    got: List[int] = []
    with pytest.raises(ChannelClosed, match="more than"):
        fdpass.recv_bounded(ours, 16, got)
    assert got == []
    assert _open_fds() == before - len(files)  # the senders' copies closed above; none received kept


@pytest.mark.parametrize(
    "seals",
    [0, fcntl.F_SEAL_SHRINK, fcntl.F_SEAL_GROW],
    ids=["unsealed", "may-grow", "may-shrink"],
)
def test_a_memory_file_that_can_change_size_is_not_mapped(seals: int) -> None:
    fd = _memfd("dds-test-a", 4096, seals)
    try:
        with pytest.raises(FileNotFoundError, match="not sealed"):
            fdpass.check_memory_file(fd, "dds-test-a", 4096)
    finally:
        os.close(fd)


def test_a_file_of_another_size_name_or_kind_is_not_mapped() -> None:
    fd = _memfd("dds-test-b", 4096, fdpass.FIXED_SIZE_SEALS)
    try:
        fdpass.check_memory_file(fd, "dds-test-b", 4096)  # the file asked for: accepted
        with pytest.raises(FileNotFoundError, match="4097 B"):
            fdpass.check_memory_file(fd, "dds-test-b", 4097)
        with pytest.raises(FileNotFoundError, match="another file"):
            fdpass.check_memory_file(fd, "dds-test-other", 4096)
    finally:
        os.close(fd)
    with tempfile.TemporaryFile() as plain:
        plain.truncate(4096)
        with pytest.raises(FileNotFoundError, match="not sealed"):
            fdpass.check_memory_file(plain.fileno(), "dds-test-b", 4096)


def test_an_ordinary_reply_carrying_a_descriptor_leaves_none_open(
    pair: Tuple[socket.socket, socket.socket],
) -> None:
    ours, theirs = pair
    conn = CallConnection(ours, pickle.dumps, pickle.loads)
    fd = _memfd("dds-test-c", 4096, fdpass.FIXED_SIZE_SEALS)
    _send_reply(theirs, 1, "plain", [fd])
    os.close(fd)
    before = _open_fds()
    assert conn.call("fn", (), 5.0) == "plain"  # plain recv: the kernel drops what came with it
    assert _open_fds() == before


def test_a_fetch_whose_reply_carries_no_descriptor_fails(pair: Tuple[socket.socket, socket.socket]) -> None:
    ours, theirs = pair
    conn = CallConnection(ours, pickle.dumps, pickle.loads)
    _send_reply(theirs, 1, 4096, [])
    with pytest.raises(ChannelClosed, match="no descriptor"):
        conn.fetch("fd", ("dds-test-d",), 5.0)


def test_a_fetch_takes_the_one_descriptor_its_reply_carries(
    pair: Tuple[socket.socket, socket.socket],
) -> None:
    ours, theirs = pair
    conn = CallConnection(ours, pickle.dumps, pickle.loads)
    fd = _memfd("dds-test-e", 4096, fdpass.FIXED_SIZE_SEALS)
    _send_reply(theirs, 1, 4096, [fd])
    os.close(fd)
    size, got = conn.fetch("fd", ("dds-test-e",), 5.0)
    try:
        assert size == 4096
        fdpass.check_memory_file(got, "dds-test-e", 4096)
    finally:
        os.close(got)
