"""Nobody but the fabric we started runs anything in a client: a squatter at the socket path (another
user, or one that does not speak the protocol), a directory that is not ours and private, and a frame
that names code are all refused before anything is decoded."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterator, List

import pytest

from datadist_sim.fabric.client.client import connect
from datadist_sim.fabric.transport import wire
from datadist_sim.fabric.transport.address import ENV_VAR, FabricAddress, new_address
from datadist_sim.fabric.transport.wire import FabricRefused

from .conftest import TIMEOUT_S, Fabric, Program

pytestmark = pytest.mark.crossproc

NOBODY = 65534

SQUATTER = r"""
import os, pickle, socket, struct, sys
path, uid, mode, marker = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]

class Payload:
    def __reduce__(self):
        return (os.system, ("touch " + marker,))

frame = pickle.dumps(Payload())
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.bind(path)
os.chmod(path, 0o777)
if uid >= 0:
    os.setgid(uid)
    os.setuid(uid)  # before listen: the kernel records the listener's credentials there
server.listen(16)
print("listening", flush=True)
held = []
while True:
    conn, _ = server.accept()
    if mode == "talk":
        try:
            conn.sendall(struct.pack("!Q", len(frame)) + frame)
        except OSError:
            pass
    held.append(conn)
"""


class Squatter:
    """A process listening at a fabric's path that is not a fabric: it sends a pickle that would create
    ``marker`` if anyone decoded it (``talk``), or says nothing (``silent``)."""

    def __init__(self, path: str, *, uid: int = -1, mode: str = "talk") -> None:
        self.marker = Path(tempfile.mkdtemp(prefix="dds-m-")) / "ran"
        self.proc = subprocess.Popen(
            [sys.executable, "-c", SQUATTER, path, str(uid), mode, str(self.marker)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline().strip() == "listening"

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=TIMEOUT_S)
        assert self.proc.stdout is not None
        self.proc.stdout.close()
        shutil.rmtree(self.marker.parent, ignore_errors=True)


@pytest.fixture
def private_dir() -> Iterator[str]:
    folder = tempfile.mkdtemp(prefix="dds-")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _run_member(where: FabricAddress) -> Program:
    env = {k: v for k, v in os.environ.items() if k != ENV_VAR}
    launcher: List[str] = [sys.executable, "-m", "datadist_sim.cli", "exec", f"--fabric={where}", "--"]
    return Program("trust_member.py", ["1"], env, launcher=launcher)


@pytest.mark.skipif(os.geteuid() != 0, reason="switching to another uid needs root")
def test_a_squatter_of_another_uid_is_refused_and_nothing_it_sends_runs(private_dir: str) -> None:
    where = new_address(private_dir)
    squatter = Squatter(where.path, uid=NOBODY)
    try:
        program = _run_member(where)
        code = program.finish()
        program.kill()  # closes its pipes
        assert code != 0
        output = "\n".join(program.lines)
        assert "refusing the datadist-sim fabric" in output
        assert f"uid {NOBODY}" in output
        assert not squatter.marker.exists()
    finally:
        squatter.close()


def test_a_listener_that_does_not_speak_the_protocol_is_refused_at_once(private_dir: str) -> None:
    where = new_address(private_dir)
    squatter = Squatter(where.path, mode="talk")
    try:
        with pytest.raises(FabricRefused, match="handshake"):
            connect(where, timeout=5)
        assert not squatter.marker.exists()
    finally:
        squatter.close()


def test_a_listener_that_says_nothing_is_refused_after_the_handshake_bound(
    private_dir: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(wire, "HANDSHAKE_TIMEOUT_S", 0.5)
    where = new_address(private_dir)
    squatter = Squatter(where.path, mode="silent")
    try:
        with pytest.raises(FabricRefused, match="handshake"):
            connect(where, timeout=5)
    finally:
        squatter.close()


def test_a_directory_open_to_others_is_refused_by_clients_and_by_the_fabric(private_dir: str) -> None:
    os.chmod(private_dir, 0o777)
    where = FabricAddress(os.path.join(private_dir, "fabric.sock"), "0123456789abcdef0123", {})
    with pytest.raises(FabricRefused, match="not a private directory"):
        connect(where, timeout=5)
    assert os.listdir(private_dir) == []  # no fabric was started there
    served = subprocess.run(
        [sys.executable, "-m", "datadist_sim.cli", "fabric", "--socket-dir", private_dir],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert served.returncode == 2
    assert "not a private directory" in served.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory to another uid needs root")
def test_a_directory_owned_by_another_uid_is_refused(private_dir: str) -> None:
    os.chown(private_dir, NOBODY, NOBODY)
    where = FabricAddress(os.path.join(private_dir, "fabric.sock"), "0123456789abcdef0123", {})
    with pytest.raises(FabricRefused, match=f"owner uid {NOBODY}"):
        connect(where, timeout=5)


def test_only_a_client_with_the_token_passes_and_the_token_never_crosses_the_wire(fabric: Fabric) -> None:
    import socket

    sent: List[bytes] = []
    real = socket.socket.sendall

    def spy(self: socket.socket, data: bytes) -> None:
        sent.append(bytes(data))
        real(self, data)

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(fabric.address.path)
    with sock, pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket.socket, "sendall", spy)
        wire.client_handshake(sock, fabric.address.token)
    assert sent
    assert not any(fabric.address.token.encode() in data for data in sent)
    assert not any(bytes.fromhex(fabric.address.token) in data for data in sent)


def test_an_argument_of_a_type_the_wire_refuses_is_a_type_error_and_the_session_goes_on(
    fabric: Fabric, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    program = fabric.start("refused_argument.py", str(marker))
    refused = program.expect("refused")  # the TypeError's message
    assert "an argument names __main__.Payload: refused, nothing of it sent" in refused
    assert "an argument names __main__.NotCarried: refused" in program.expect("refused_plain")
    assert program.expect("after") == "Cache"
    assert program.expect("same_connection") == "True"
    assert program.expect("processes") == "1"
    assert program.expect("clusters") == "2"
    program.expect("done")
    assert program.finish() == 0
    assert not marker.exists()  # nothing of the refused argument ran in the fabric
