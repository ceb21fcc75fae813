"""A process that dies: its peers see what the real library shows (timeouts, then a broken link), its
memory is reclaimed, and no surviving process hangs."""

from __future__ import annotations

import os
import signal

import pytest

from .conftest import Fabric

pytestmark = pytest.mark.crossproc


def test_prompt_killed_mid_pull_times_out_the_pull_and_breaks_the_link(fabric: Fabric) -> None:
    prompt = fabric.start("victim_prompt.py", "cm")
    decode = fabric.start("survivor_decode.py", "cm")
    prompt.expect("up")
    decode.expect("up")
    prompt.tell()
    prompt.expect("linked")  # joins first; the Decode side's short LinkTotalTime is for the re-link below
    decode.tell()
    assert prompt.expect("status") == "OK"
    assert decode.expect("status") == "OK"
    prompt.expect("ready")
    decode.tell()
    assert decode.expect("pull") == "LLM_TIMEOUT"  # the process holding the source died serving it
    assert prompt.finish() == -signal.SIGKILL
    assert decode.expect("untouched") == "True"  # nothing was written
    assert decode.expect("gone") == "True"
    assert decode.expect("pull_again") == "LLM_NOT_YET_LINK"  # a timed-out link must be re-established
    assert decode.expect("unlink") == "LLM_SUCCESS"
    assert decode.expect("relink_status") == "FAILED"  # nobody joins: link_total_time passes
    decode.expect("done")
    assert decode.finish() == 0


def test_killed_prompt_memory_is_reclaimed_and_peers_time_out(fabric: Fabric) -> None:
    prompt = fabric.start("victim_prompt.py", "kv")
    assert int(prompt.expect("ready")) == 6  # three caches of two tensors, one file each
    decode = fabric.start("survivor_decode.py", "kv")
    assert decode.expect("link") == "LLM_SUCCESS"
    decode.expect("ready")
    prompt.kill()  # SIGKILL: no finalize, no goodbye
    decode.tell()
    assert decode.expect("gone") == "True"
    assert decode.expect("segments") == "2"  # only the Decode side's own cache (two tensors) is left
    assert decode.expect("pull") == "LLM_WAIT_PROCESS_TIMEOUT"
    # GE keeps the Decoder's entry, so the next pull is sent and unanswered too, until an unlink
    # (docs/vendor_facts.md, "Connectors and defects")
    assert decode.expect("pull_again") == "LLM_WAIT_PROCESS_TIMEOUT"
    assert decode.expect("relink_kept") == "LLM_SUCCESS ['LLM_ALREADY_LINK']"  # the entry outlives it
    assert decode.expect("unlink") == "LLM_UNLINK_FAILED ['LLM_NOTIFY_PROMPT_UNLINK_FAILED']"
    assert decode.expect("relink") == "LLM_LINK_FAILED ['LLM_LINK_FAILED']"  # nobody listens any more
    decode.expect("done")
    assert decode.finish() == 0


def test_a_stopped_prompt_times_the_pull_out_in_bounded_time_and_lives_on() -> None:
    fabric = Fabric(memory_timeout="1")  # how long the fabric waits for a process to serve its memory
    try:
        prompt = fabric.start("victim_prompt.py", "stop")
        decode = fabric.start("survivor_decode.py", "stop")
        prompt.expect("up")
        decode.expect("up")
        prompt.tell()
        prompt.expect("linked")
        decode.tell()
        assert prompt.expect("status") == "OK"
        assert decode.expect("status") == "OK"
        prompt.expect("ready")
        os.kill(prompt.proc.pid, signal.SIGSTOP)  # hung, not dead
        decode.tell()
        assert decode.expect("pull") == "LLM_TIMEOUT"
        assert decode.expect("pull_again") == "LLM_NOT_YET_LINK"  # the timed-out link must be re-made
        assert decode.expect("untouched") == "True"
        assert decode.expect("unlink") == "LLM_SUCCESS"
        decode.expect("done")
        assert decode.finish() == 0
        os.kill(prompt.proc.pid, signal.SIGCONT)
        prompt.tell()
        prompt.expect("still alive")  # its process was never declared dead
        assert prompt.finish() == 0
    finally:
        fabric.close()
