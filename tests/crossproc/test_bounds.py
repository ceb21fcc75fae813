"""Bounded waits and connections that cost nothing: a fabric that stops answering fails each call within
its bound with a timeout code, a dead one with ``LLM_FAILED`` at once; hundreds of idle connections hold
no thread each, are dropped after a bound, and do not keep a client from pulling."""

from __future__ import annotations

import os
import signal
import socket
import time
from typing import List

import pytest

from datadist_sim.fabric.transport import loop

from .conftest import TIMEOUT_S, Fabric

pytestmark = pytest.mark.crossproc

MARGIN_S = 1.0
NO_TIMEOUT_BOUND_S = 2.0
SLACK_S = 3.0
"""What a loaded machine may add to a bound before the call's error reaches the program."""


def _threads(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    raise AssertionError("no thread count")


def _stopped(pid: int) -> bool:
    """Every thread of ``pid`` is stopped (state ``T`` in ``/proc/PID/task/*/stat``)."""
    states = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/stat", encoding="ascii") as handle:
            states.append(handle.read().rpartition(")")[2].split()[0])
    return all(state == "T" for state in states)


def _wait_until_stopped(pid: int) -> None:
    """``kill`` returns before a stop takes effect: each thread of the process stops only when it next
    runs, which on a loaded machine can be milliseconds later, and a request sent meanwhile is still
    answered (1-3 runs in 10 of the test below failed so, once the calls got faster)."""
    deadline = time.monotonic() + TIMEOUT_S
    while not _stopped(pid):
        assert time.monotonic() < deadline, f"process {pid} did not stop"
        time.sleep(0.001)


def test_a_stopped_fabric_fails_each_call_within_its_bound_and_a_dead_one_at_once() -> None:
    fabric = Fabric(call_margin=str(MARGIN_S), call_timeout=str(NO_TIMEOUT_BOUND_S))
    try:
        program = fabric.start("stopped_fabric.py")
        program.expect("ready")
        os.kill(fabric.server.pid, signal.SIGSTOP)
        try:
            _wait_until_stopped(fabric.server.pid)
            program.tell()
            code, took = program.expect("pull").split()
            assert code == "LLM_TIMEOUT"  # what a pull whose peer went silent gets
            assert float(took) < 1.0 + MARGIN_S + SLACK_S  # sync_kv_timeout 1 s + the margin
            code, took = program.expect("allocate").split()
            assert code == "LLM_TIMEOUT"
            assert float(took) < NO_TIMEOUT_BOUND_S + SLACK_S
        finally:
            os.kill(fabric.server.pid, signal.SIGKILL)
            os.kill(fabric.server.pid, signal.SIGCONT)
        fabric.server.wait(timeout=TIMEOUT_S)
        program.tell()
        code, took = program.expect("after_death").split()
        assert code == "LLM_FAILED"
        assert float(took) < SLACK_S
        assert program.finish() == 0
    finally:
        fabric.close()


def test_500_idle_connections_hold_no_thread_are_dropped_and_do_not_delay_a_pull(fabric: Fabric) -> None:
    idle: List[socket.socket] = []
    try:
        for _ in range(500):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(fabric.address.path)
            idle.append(sock)
        prompt = fabric.start("pull_loop.py", "prompt")
        decode = fabric.start("pull_loop.py", "decode", "200")
        decode.tell(prompt.expect("ready"))
        assert decode.expect("pulled") == "200"  # every pull arrived, bytes checked
        assert _threads(fabric.server.pid) < 40  # not one per connection
        decode.expect("done")
        assert decode.finish() == 0
        # the idle ones are dropped once they have said nothing for HELLO_WAIT_S
        deadline = time.monotonic() + loop.HELLO_WAIT_S + 15
        dropped = 0
        for sock in idle:
            sock.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                dropped += sock.recv(1) == b""
            except socket.timeout:
                pass  # still open: counted as not dropped
            except ConnectionResetError:
                dropped += 1
        assert dropped == len(idle)
        prompt.tell()
        prompt.expect("done")
        assert prompt.finish() == 0
    finally:
        for sock in idle:
            sock.close()
