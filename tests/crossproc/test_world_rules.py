"""What holds for the fabric as a whole: a scenario applies to every process, only token holders join,
and a fabric that dies leaves its clients with an error, not a hang."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from datadist_sim.fabric.transport import address
from datadist_sim.fabric.transport.wire import FabricRefused, client_handshake

from .conftest import Fabric

pytestmark = pytest.mark.crossproc

SCENARIO = """
name = "busy_first_pull"
[[rules]]
action = "fail"
code = "LLM_LINK_BUSY"
op = "pull_cache"
first = 1
"""


def test_a_scenario_loaded_into_the_fabric_applies_to_other_processes(tmp_path: Path) -> None:
    scenario = tmp_path / "busy.toml"
    scenario.write_text(SCENARIO)
    fabric = Fabric("--scenario", str(scenario))
    try:
        prompt = fabric.start("kv_prompt.py")
        prompt.expect("ready")
        decode = fabric.start("scenario_decode.py")
        assert decode.expect("first") == "LLM_LINK_BUSY"
        assert decode.expect("second") == "LLM_SUCCESS"
        decode.expect("done")
        assert decode.finish() == 0
        prompt.tell()
        assert prompt.finish() == 0
    finally:
        fabric.close()


def test_a_process_without_the_token_is_turned_away(fabric: Fabric) -> None:
    for offered in ("0" * 32, fabric.address.token[:-1] + "x"):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(fabric.address.path)
        with sock, pytest.raises(FabricRefused):
            client_handshake(sock, offered)


def test_the_socket_is_private_to_its_user(fabric: Fabric) -> None:
    assert Path(fabric.address.path).stat().st_mode & 0o077 == 0
    assert Path(fabric.address.path).parent.stat().st_mode & 0o077 == 0


def test_a_client_whose_fabric_dies_gets_llm_failed_instead_of_hanging(fabric: Fabric) -> None:
    prompt = fabric.start("kv_prompt.py")
    prompt.expect("ready")
    fabric.server.kill()
    fabric.server.wait(timeout=60)
    prompt.tell()  # deallocate_cache now has no fabric to go to
    assert prompt.finish() != 0
    assert any("LLM_FAILED" in line and "fabric is gone" in line for line in prompt.lines)


def test_dropped_handles_are_forgotten_and_a_dropped_kv_cache_frees_itself(fabric: Fabric) -> None:
    program = fabric.start("lifecycle.py")
    assert int(program.expect("objects_after_200")) <= 3  # the instance, its manager, maybe one cache
    assert program.expect("segments_held") == "2"
    assert program.expect("segments_after_drop") == "0"
    # the real rule: one initialised LLMDataDist per OS process
    assert program.expect("second_init") == "LLM_FAILED"
    program.expect("done")
    assert program.finish() == 0


def test_the_fabric_command_says_where_it_listens_and_cleans_up_on_sigterm() -> None:
    directory = tempfile.mkdtemp(prefix="dds-")
    try:
        server = subprocess.Popen(
            [sys.executable, "-m", "datadist_sim.cli", "fabric", "--socket-dir", directory, "--seed", "3"],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert server.stdout is not None
        with server.stdout:
            line = server.stdout.readline()
        name, _, value = line.strip().partition("=")
        where = address.parse(value)
        assert (name, os.path.dirname(where.path)) == (address.ENV_VAR, directory)
        assert Path(where.path).exists()
        server.terminate()
        assert server.wait(timeout=60) == 0
        assert not Path(where.path).exists()
    finally:
        shutil.rmtree(directory, ignore_errors=True)
