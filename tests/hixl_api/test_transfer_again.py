"""A ``transfer_sync`` that repeats one that succeeded takes a shorter way through the world
(``hixl_transfers._again``); it must answer exactly as the first did only while nothing it relied on
has changed. Each test moves the same small range once, changes one thing, and checks that the same
call then gives what the engine gives for that change (the codes are the ones the full path gives,
docs/hixl_engine_facts.md sections 3 and 11)."""

from __future__ import annotations

import ctypes
import mmap
from typing import Callable, Tuple

import numpy as np
import pytest

import datadist_sim.hixl as hixl
from datadist_sim import Fault, SimWorld

from .conftest import CS, SERVER

Make = Callable[..., hixl.Hixl]
NBYTES = 256


def _moved_once(make: Make, options: dict) -> Tuple[hixl.Hixl, hixl.Hixl, np.ndarray, np.ndarray, list]:
    """A connected pair whose client has read the server's first ``NBYTES`` once (and twice, so the
    repeat is the one under test), then set its own bytes to 0xEE."""
    server, client = make(SERVER, options), make(options=options)
    remote = np.arange(4096, dtype=np.uint32).astype(np.uint8)
    local = np.zeros(4096, dtype=np.uint8)
    assert server.register_mem(hixl.MemDesc(remote.ctypes.data, 4096), hixl.MEM_DEVICE)[0] == hixl.SUCCESS
    assert client.register_mem(hixl.MemDesc(local.ctypes.data, 4096), hixl.MEM_HOST)[0] == hixl.SUCCESS
    assert client.connect(SERVER) == hixl.SUCCESS
    ops = [hixl.TransferOpDesc(local.ctypes.data, remote.ctypes.data, NBYTES)]
    for _ in range(2):
        assert client.transfer_sync(SERVER, hixl.READ, ops) == hixl.SUCCESS
        assert np.array_equal(local[:NBYTES], remote[:NBYTES])
    local[:] = 0xEE
    return server, client, remote, local, ops


@pytest.mark.parametrize("options", [{}, CS])
def test_a_repeat_moves_the_bytes_again_and_takes_the_same_simulated_time(
    make: Make, world: SimWorld, options: dict
) -> None:
    _, client, remote, local, ops = _moved_once(make, options)
    remote[:NBYTES] = 7
    start = world.now()
    assert client.transfer_sync(SERVER, hixl.READ, ops) == hixl.SUCCESS
    config = world.config
    assert world.now() - start == pytest.approx(config.message_rtt_s + NBYTES / config.bandwidth_bytes_per_s)
    assert (local[:NBYTES] == 7).all()
    assert (local[NBYTES:] == 0xEE).all()


def test_the_same_descriptors_written_instead_of_read_write_the_remote(make: Make) -> None:
    """The direction is part of what was checked: a WRITE of the ranges a READ used writes the remote."""
    _, client, remote, _local, ops = _moved_once(make, {})
    assert client.transfer_sync(SERVER, hixl.WRITE, ops) == hixl.SUCCESS
    assert (remote[:NBYTES] == 0xEE).all()


def test_after_a_disconnect_the_repeat_is_not_connected(make: Make) -> None:
    """``adxl_inner_engine.cc:489-491``: no connection, ``NOT_CONNECTED``."""
    _, client, _, local, ops = _moved_once(make, {})
    assert client.disconnect(SERVER) == hixl.SUCCESS
    assert client.transfer_sync(SERVER, hixl.READ, ops) == hixl.NOT_CONNECTED
    assert (local == 0xEE).all()


def test_after_the_peer_finalizes_the_repeat_fails(make: Make) -> None:
    server, client, _, local, ops = _moved_once(make, {})
    server.finalize()
    assert client.transfer_sync(SERVER, hixl.READ, ops) == hixl.FAILED
    assert (local == 0xEE).all()


def test_a_rule_loaded_after_the_first_transfer_acts_on_the_repeat(make: Make, world: SimWorld) -> None:
    _, client, _, local, ops = _moved_once(make, {})
    world.faults.add(Fault.poison(op="hixl.transfer_sync", first=1))
    assert client.transfer_sync(SERVER, hixl.READ, ops) == hixl.FAILED
    assert (local == 0xEE).all()


def test_a_slower_link_set_after_the_first_transfer_makes_the_repeat_time_out(
    make: Make, world: SimWorld
) -> None:
    """The duration is the config's now, not the first transfer's: at 1 KB/s the range takes longer
    than a 100 ms timeout (``hixl_cs_client.cc:964-970``: ``TIMEOUT``, nothing moved)."""
    _, client, _, local, ops = _moved_once(make, {})
    world.config.bandwidth_bytes_per_s = 1e3
    assert client.transfer_sync(SERVER, hixl.READ, ops, 100) == hixl.TIMEOUT
    assert (local == 0xEE).all()


def test_registered_memory_unmapped_after_the_first_transfer_is_refused_not_touched(make: Make) -> None:
    """The kernel vouches for the pages on every transfer: memory the client unmapped after it moved
    bytes there once is refused (``PARAM_INVALID``, as memory never mapped) instead of being written."""
    server, client = make(SERVER), make()
    remote = np.arange(4096, dtype=np.uint32).astype(np.uint8)
    mapping = mmap.mmap(-1, mmap.PAGESIZE)
    anchor = ctypes.c_char.from_buffer(mapping)
    address = ctypes.addressof(anchor)
    del anchor  # the mapping exports no buffer now, so it can be closed
    assert server.register_mem(hixl.MemDesc(remote.ctypes.data, 4096), hixl.MEM_DEVICE)[0] == hixl.SUCCESS
    assert client.register_mem(hixl.MemDesc(address, mmap.PAGESIZE), hixl.MEM_HOST)[0] == hixl.SUCCESS
    assert client.connect(SERVER) == hixl.SUCCESS
    ops = [hixl.TransferOpDesc(address, remote.ctypes.data, NBYTES)]
    for _ in range(2):
        assert client.transfer_sync(SERVER, hixl.READ, ops) == hixl.SUCCESS
    mapping.close()
    assert client.transfer_sync(SERVER, hixl.READ, ops) == hixl.PARAM_INVALID


def test_a_repeat_with_its_descriptor_changed_in_place_checks_the_new_range(make: Make) -> None:
    """``TransferOpDesc`` fields are writable (``hixl_py.cc:285-289``): the descriptor's values now, not
    the object, decide what is checked."""
    _, client, remote, local, ops = _moved_once(make, {})
    ops[0].remote_addr = remote.ctypes.data + 4096 - NBYTES // 2  # runs past the registration
    assert client.transfer_sync(SERVER, hixl.READ, ops) == hixl.PARAM_INVALID
    assert (local == 0xEE).all()
