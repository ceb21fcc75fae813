"""Transfers past the inline limit travel through shared scratch files (or, raw pointer to raw pointer,
straight from process to process), never the socket, and arrive intact in every direction between raw
pointers and shared caches."""

from __future__ import annotations

import os
from typing import Iterator

import pytest

from .conftest import Fabric

pytestmark = pytest.mark.crossproc


def _siblings_may_read_each_other() -> bool:
    """Whether the kernel lets a process read a sibling's memory (``process_vm_readv``): Linux without
    Yama, or Yama's ``ptrace_scope`` 0."""
    try:
        with open("/proc/sys/kernel/yama/ptrace_scope", encoding="ascii") as handle:
            return handle.read().strip() == "0"
    except FileNotFoundError:
        return os.path.exists("/proc/self/maps")


@pytest.fixture(params=["1", "0"], ids=["direct", "scratch-only"])
def fabric(request: pytest.FixtureRequest) -> Iterator[Fabric]:
    world = Fabric(direct_memory=request.param)
    try:
        yield world
    finally:
        world.close()


def test_large_pulls_between_raw_pointers_and_shared_caches_arrive_intact(fabric: Fabric) -> None:
    direct = fabric.address.options["direct_memory"] == "1"
    prompt = fabric.start("large_pair.py", "prompt")
    decode = fabric.start("large_pair.py", "decode")
    shared_id = prompt.expect("shared_id")
    prompt.tell()
    decode.tell()
    assert prompt.expect("status") == "OK"
    assert decode.expect("status") == "OK"
    decode.tell(shared_id)
    for _ in range(2):  # the second round reuses the warm scratch files
        assert decode.expect("raw_to_raw") == "True"
        assert decode.expect("raw_to_shared") == "True"
        assert decode.expect("shared_to_raw") == "True"
    # large reads and writes went through shared files, and the second round reused them
    assert 1 <= int(decode.expect("scratch_files_made")) <= 4
    # raw to raw went process to process where the kernel allows it, else through one scratch file
    expected_direct = 2 if direct and _siblings_may_read_each_other() else 0
    assert int(decode.expect("direct_copies")) == expected_direct
    # each direct copy (2 MiB, parts of at least 1 MiB in this program) read by one thread per CPU, up to 2
    ways = min(len(os.sched_getaffinity(0)), 2) if hasattr(os, "sched_getaffinity") else 1
    assert int(decode.expect("parts_read")) == expected_direct * ways
    decode.expect("pulled")
    decode.tell()
    prompt.tell()
    decode.expect("done")
    prompt.expect("done")
    assert (prompt.finish(), decode.finish()) == (0, 0)
