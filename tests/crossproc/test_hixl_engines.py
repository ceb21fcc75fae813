"""``hixl.Hixl`` engines in two processes of one fabric: each registered in the shared world, connected by
``"ip:port"``, moving real bytes between the two processes' own memory (numpy in one, ctypes in the
other), with the bytes checked on both sides."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from .conftest import Fabric

pytestmark = pytest.mark.crossproc

SIZE = 512 << 10
SMALL = 4 << 10
SUCCESS, PARAM_INVALID, NOT_CONNECTED, ALREADY_CONNECTED, FAILED = 0, 103900, 103902, 103903, 503900
COMPLETED = 1


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_hixl_engines_in_two_processes_read_and_write_each_others_memory(fabric: Fabric) -> None:
    server = fabric.start("hixl_pair.py", "server")
    client = fabric.start("hixl_pair.py", "client")
    remote_addr = server.expect("addr")
    pattern = np.random.default_rng(1).integers(0, 256, SIZE, dtype=np.uint8).tobytes()
    assert server.expect("pattern") == _digest(pattern)
    client.tell(remote_addr)
    # hixl_engine.cc:383-391: a transfer on an engine with no connection (and no AutoConnect)
    assert int(client.expect("unconnected")) == NOT_CONNECTED
    # the server's engine, in the other process, is found by its "ip:port"; a second connect is refused
    assert int(client.expect("connect")) == SUCCESS
    assert int(client.expect("connect_again")) == ALREADY_CONNECTED
    # READ: the server's bytes arrive in the client's buffer, and the server's buffer is not written
    assert int(client.expect("read")) == SUCCESS
    assert client.expect("local") == _digest(pattern)
    server.tell("digest")
    assert server.expect("digest") == _digest(pattern)
    client.tell()
    # a remote range past the registration is PARAM_INVALID (hixl_mem_store.cc:259-279), nothing moved
    assert int(client.expect("out_of_range")) == PARAM_INVALID
    # WRITE (async): only the described remote range changes; the client's own buffer keeps its bytes
    assert client.expect("write_async").split() == [str(SUCCESS), str(COMPLETED)]
    assert client.expect("local_after_write") == _digest(pattern)
    server.tell("head")
    assert server.expect("head").split() == [_digest(b"\x77" * SMALL), _digest(pattern[SMALL:])]
    # a notify crosses to the server's process
    assert int(client.expect("notify")) == SUCCESS
    server.tell("notifies")
    assert server.expect("notifies") == "0 [('kv', 'layer 0 done')]"
    assert int(client.expect("disconnect")) == SUCCESS
    assert int(client.expect("after_disconnect")) == NOT_CONNECTED
    client.expect("done")
    server.tell("end")
    server.expect("done")
    assert (client.finish(), server.finish()) == (0, 0)


def test_a_hixl_engine_whose_process_dies_is_gone_for_its_peers(fabric: Fabric) -> None:
    """The fabric finalizes a lost process's engines; a transfer to a finalized engine is ``FAILED``
    and writes nothing (docs/hixl_engine_facts.md, "hixl engines across processes")."""
    server = fabric.start("hixl_pair.py", "server")
    client = fabric.start("hixl_pair.py", "client_lost")
    client.tell(server.expect("addr"))
    assert int(client.expect("read")) == SUCCESS
    server.kill()
    client.tell()
    assert int(client.expect("read_after_loss")) == FAILED
    assert client.expect("untouched") == "True"
    client.expect("done")
    assert client.finish() == 0
