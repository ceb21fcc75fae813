"""A ``hixl.Hixl`` engine in one process reads and writes the memory an ``llm_datadist`` instance on the
hixl backend registered in another: its pool (shared simulated memory) and a cache over a numpy buffer of
its own process, which only that process can read or write (docs/hixl_engine_facts.md §6)."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from .conftest import Fabric

pytestmark = pytest.mark.crossproc

SIZE = 8 << 10
SUCCESS, FAILED = 0, 503900


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_a_hixl_engine_reads_and_writes_an_llm_datadist_instance_in_another_process(fabric: Fabric) -> None:
    prompt = fabric.start("hixl_to_llm.py", "prompt")
    client = fabric.start("hixl_to_llm.py", "client")
    addrs = prompt.expect("addrs")
    pooled = (np.arange(SIZE) % 253).astype(np.uint8).tobytes()
    own = (np.arange(SIZE) % 241).astype(np.uint8).tobytes()
    assert prompt.expect("pattern").split() == [_digest(pooled), _digest(own)]
    client.tell(addrs)
    assert int(client.expect("connect")) == SUCCESS
    assert int(client.expect("read")) == SUCCESS
    assert client.expect("local").split() == [_digest(pooled), _digest(own)]
    assert int(client.expect("write")) == SUCCESS
    prompt.tell("digest")
    written = [_digest(b"\x77" * 16 + pooled[16:]), _digest(b"\x77" * 16 + own[16:])]
    assert prompt.expect("digest").split() == written
    prompt.tell("end")
    prompt.expect("done")
    client.tell()
    assert int(client.expect("after_finalize")) == FAILED
    client.expect("done")
    assert (client.finish(), prompt.finish()) == (0, 0)
