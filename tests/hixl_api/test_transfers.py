"""hixl transfers move real bytes between registered memory, and nothing else (docs/hixl_engine_facts.md,
section 3, ``transfer_sync``/``transfer_async``; vendor lines are hicann/hixl 9ed283b)."""

from __future__ import annotations

import ctypes
from typing import Callable, List, Optional, Tuple

import numpy as np
import pytest

import datadist_sim.hixl as hixl
from datadist_sim import SimConfig, SimWorld

from .conftest import CS, NOBODY, SERVER

Make = Callable[..., hixl.Hixl]
AUTO = {hixl.OPTION_AUTO_CONNECT: "1"}


def _pair(make: Make, options: Optional[dict] = None) -> Tuple[hixl.Hixl, hixl.Hixl, np.ndarray, np.ndarray]:
    """A server holding 4 KiB of known bytes and a client (not connected) holding 4 KiB of others,
    both registered."""
    if options is None:
        options = {}
    server, client = make(SERVER, options), make(options=options)
    remote = np.arange(4096, dtype=np.uint32).astype(np.uint8)
    local = np.full(4096, 0xEE, dtype=np.uint8)
    assert server.register_mem(hixl.MemDesc(remote.ctypes.data, 4096), hixl.MEM_DEVICE)[0] == hixl.SUCCESS
    assert client.register_mem(hixl.MemDesc(local.ctypes.data, 4096), hixl.MEM_HOST)[0] == hixl.SUCCESS
    return server, client, remote, local


def _op(
    local: np.ndarray, remote: np.ndarray, nbytes: int, at: int = 0, remote_at: int = 0
) -> hixl.TransferOpDesc:
    return hixl.TransferOpDesc(local.ctypes.data + at, remote.ctypes.data + remote_at, nbytes)


@pytest.mark.parametrize("options", [{}, CS])
def test_read_copies_remote_bytes_into_local_ranges_only_and_never_writes_the_remote(
    make: Make, options: dict
) -> None:
    """``hixl.h:125``: READ copies remote -> local. Only the described local ranges change."""
    _, client, remote, local = _pair(make, options)
    assert client.connect(SERVER) == hixl.SUCCESS
    remote_before = remote.copy()
    ops = [_op(local, remote, 100, 0, 1000), _op(local, remote, 50, 2000, 7)]
    assert client.transfer_sync(SERVER, hixl.READ, ops) == hixl.SUCCESS
    expected = np.full(4096, 0xEE, dtype=np.uint8)
    expected[0:100] = remote_before[1000:1100]
    expected[2000:2050] = remote_before[7:57]
    assert np.array_equal(local, expected)
    assert np.array_equal(remote, remote_before)


@pytest.mark.parametrize("options", [{}, CS])
def test_write_copies_local_bytes_into_remote_ranges_only(make: Make, options: dict) -> None:
    _, client, remote, local = _pair(make, options)
    local[:] = np.arange(4096) % 7
    local_before, remote_before = local.copy(), remote.copy()
    assert client.connect(SERVER) == hixl.SUCCESS
    assert client.transfer_sync(SERVER, hixl.WRITE, [_op(local, remote, 64, 10, 4000)]) == hixl.SUCCESS
    expected = remote_before.copy()
    expected[4000:4064] = local_before[10:74]
    assert np.array_equal(remote, expected)
    assert np.array_equal(local, local_before)


def test_ctypes_buffers_move_too(make: Make) -> None:
    """The vendor test's memory: ``ctypes.create_string_buffer`` by ``ctypes.addressof``
    (``test_hixl_engine_api.py:27-36``)."""
    server, client = make(SERVER), make()
    remote, local = ctypes.create_string_buffer(b"hixl-bytes", 16), ctypes.create_string_buffer(16)
    server.register_mem(hixl.MemDesc(ctypes.addressof(remote), 16), hixl.MEM_HOST)
    client.register_mem(hixl.MemDesc(ctypes.addressof(local), 16), hixl.MEM_HOST)
    client.connect(SERVER)
    desc = hixl.TransferOpDesc(ctypes.addressof(local), ctypes.addressof(remote), 10)
    assert client.transfer_sync(SERVER, hixl.READ, [desc]) == hixl.SUCCESS
    assert local.raw[:10] == b"hixl-bytes"


@pytest.mark.parametrize("options", [{}, CS])
@pytest.mark.parametrize("where", ["remote past its end", "remote unregistered", "local unregistered"])
def test_a_range_outside_registered_memory_is_param_invalid_and_moves_nothing(
    make: Make, options: dict, where: str
) -> None:
    """``hixl_mem_store.cc:259-279``: every descriptor's ranges must lie in registered memory, checked
    before any byte moves: the first, valid descriptor is not copied either. (The open-source comm
    engine checks no registration; the simulator holds it to the same rule, docs section 10.)"""
    _, client, remote, local = _pair(make, options)
    client.connect(SERVER)
    stray = np.zeros(64, np.uint8)
    bad = {
        "remote past its end": _op(local, remote, 64, 0, 4096 - 63),
        "remote unregistered": hixl.TransferOpDesc(local.ctypes.data, stray.ctypes.data, 8),
        "local unregistered": hixl.TransferOpDesc(stray.ctypes.data, remote.ctypes.data, 8),
    }[where]
    before = (local.copy(), remote.copy(), stray.copy())
    for op in (hixl.READ, hixl.WRITE):
        assert client.transfer_sync(SERVER, op, [_op(local, remote, 16), bad]) == hixl.PARAM_INVALID
    assert all(np.array_equal(a, b) for a, b in zip((local, remote, stray), before))


def test_adjacent_registrations_count_as_one_range(make: Make) -> None:
    """``hixl_mem_store.cc:171, 176-217``: a range across two adjacent registrations is inside."""
    server, client, remote, local = _pair(make)
    client.connect(SERVER)
    server.register_mem(hixl.MemDesc(remote.ctypes.data, 4096), hixl.MEM_DEVICE)  # comm: a second handle
    client.register_mem(hixl.MemDesc(local.ctypes.data, 2048), hixl.MEM_HOST)
    assert client.transfer_sync(SERVER, hixl.READ, [_op(local, remote, 4096)]) == hixl.SUCCESS
    assert np.array_equal(local, remote)


def test_descriptor_checks_come_first(make: Make) -> None:
    """``hixl_impl.cc:364`` (timeout), ``:24-32, 188`` (a zero address): ``PARAM_INVALID`` with no
    connection; comm's empty list is ``PARAM_INVALID`` before the connection (``comm_engine.cc:60``),
    hixl_cs's after it (``hixl_client.cc:173``)."""
    _, client, remote, local = _pair(make)
    assert client.transfer_sync(SERVER, hixl.READ, [_op(local, remote, 8)], 0) == hixl.PARAM_INVALID
    zero = hixl.TransferOpDesc(0, remote.ctypes.data, 8)
    assert client.transfer_sync(SERVER, hixl.READ, [zero]) == hixl.PARAM_INVALID
    assert client.transfer_async(SERVER, hixl.READ, [zero]) == (hixl.PARAM_INVALID, 0)
    assert client.transfer_sync(SERVER, hixl.READ, []) == hixl.PARAM_INVALID
    cs_client = make(options=CS)
    assert cs_client.transfer_sync(SERVER, hixl.READ, []) == hixl.NOT_CONNECTED
    cs_client.connect(SERVER)
    assert cs_client.transfer_sync(SERVER, hixl.READ, []) == hixl.PARAM_INVALID


@pytest.mark.parametrize("options", [{}, CS])
def test_without_a_connection_a_transfer_is_not_connected(make: Make, options: dict) -> None:
    """``adxl_inner_engine.cc:489-491``; ``hixl_engine.cc:383-391``."""
    _, client, remote, local = _pair(make, options)
    before = local.copy()
    assert client.transfer_sync(SERVER, hixl.READ, [_op(local, remote, 8)]) == hixl.NOT_CONNECTED
    assert client.transfer_async(SERVER, hixl.READ, [_op(local, remote, 8)]) == (hixl.NOT_CONNECTED, 0)
    assert np.array_equal(local, before)


def test_auto_connect_connects_first(make: Make) -> None:
    """With ``AutoConnect=1`` the engine connects before the transfer (``adxl_inner_engine.cc:486``),
    and the connection stays: connecting again is ``ALREADY_CONNECTED``."""
    _, client, remote, local = _pair(make, AUTO)
    assert client.transfer_sync(SERVER, hixl.READ, [_op(local, remote, 8)]) == hixl.SUCCESS
    assert np.array_equal(local[:8], remote[:8])
    assert client.connect(SERVER) == hixl.ALREADY_CONNECTED


def test_auto_connect_to_nobody_comm_is_not_connected_hixl_cs_the_connects_code(make: Make) -> None:
    """comm ignores the connect's result and answers ``NOT_CONNECTED`` (``adxl_inner_engine.cc:486-491``);
    hixl_cs returns the connect's own ``FAILED`` (``hixl_engine.cc:199-201``)."""
    local = np.zeros(8, np.uint8)
    for options, code in ((AUTO, hixl.NOT_CONNECTED), ({**AUTO, **CS}, hixl.FAILED)):
        client = make(options=options)
        client.register_mem(hixl.MemDesc(local.ctypes.data, 8), hixl.MEM_HOST)
        desc = hixl.TransferOpDesc(local.ctypes.data, 0x2000, 8)
        assert client.transfer_sync(NOBODY, hixl.READ, [desc]) == code
        assert client.transfer_async(NOBODY, hixl.READ, [desc]) == (code, 0)


def test_a_failed_transfer_drops_an_auto_connection_but_not_a_plain_one(make: Make) -> None:
    """``hixl_engine.cc:205-210``; ``adxl_inner_engine.cc:408-415``: with ``AutoConnect`` the next call
    connects again; without it the connection stays."""
    _, auto, remote, local = _pair(make, AUTO)
    plain = make()
    plain.register_mem(hixl.MemDesc(local.ctypes.data, 4096), hixl.MEM_HOST)
    for client in (auto, plain):
        assert client.connect(SERVER) == hixl.SUCCESS
        assert client.transfer_sync(SERVER, hixl.READ, [_op(local, remote, 8, 0, 4090)]) == hixl.PARAM_INVALID
    assert auto.connect(SERVER) == hixl.SUCCESS
    assert plain.connect(SERVER) == hixl.ALREADY_CONNECTED


def test_a_peer_finalized_after_connect_fails_the_transfer(make: Make) -> None:
    server, client, remote, local = _pair(make)
    client.connect(SERVER)
    server.finalize()
    before = local.copy()
    assert client.transfer_sync(SERVER, hixl.READ, [_op(local, remote, 8)]) == hixl.FAILED
    assert np.array_equal(local, before)


def test_a_transfer_that_outlasts_its_timeout_is_timeout_and_moves_nothing() -> None:
    """``hixl_cs_client.cc:964-970``: past the deadline ``TIMEOUT``; at 1 KB/s, 4 KiB take 4 s."""
    world = SimWorld(config=SimConfig(bandwidth_bytes_per_s=1e3))
    with world.activate():
        made: List[hixl.Hixl] = []

        def make(local: str = "127.0.0.1:0", options: Optional[dict] = None) -> hixl.Hixl:
            if options is None:
                options = {}
            engine = hixl.Hixl()
            engine.initialize(local, options)
            made.append(engine)
            return engine

        _, client, remote, local = _pair(make)
        client.connect(SERVER)
        before, start = local.copy(), world.now()
        past_end = _op(local, remote, 4096, 0, 1)  # the ranges are checked first (hixl_cs_client.cc:994)
        assert client.transfer_sync(SERVER, hixl.READ, [past_end], 1000) == hixl.PARAM_INVALID
        assert client.transfer_sync(SERVER, hixl.READ, [_op(local, remote, 4096)], 1000) == hixl.TIMEOUT
        assert np.array_equal(local, before)
        assert world.now() - start == pytest.approx(1.0)
        # The timeout leaves the connection unusable (comm_channel.cc:209-228, 514-531;
        # hixl_cs_client.cc:988-991) until the client makes it again.
        assert client.transfer_sync(SERVER, hixl.READ, [_op(local, remote, 4096)], 5000) == hixl.FAILED
        assert client.disconnect(SERVER) == hixl.SUCCESS
        assert client.connect(SERVER) == hixl.SUCCESS
        assert client.transfer_sync(SERVER, hixl.READ, [_op(local, remote, 4096)], 5000) == hixl.SUCCESS
        for engine in made:
            engine.finalize()


def test_transfer_sync_takes_simulated_time(make: Make, world: SimWorld) -> None:
    """One round trip plus the bytes at the link's bandwidth."""
    _, client, remote, local = _pair(make)
    client.connect(SERVER)
    start = world.now()
    client.transfer_sync(SERVER, hixl.READ, [_op(local, remote, 4096)])
    config = world.config
    assert world.now() - start == pytest.approx(config.message_rtt_s + 4096 / config.bandwidth_bytes_per_s)


def test_registered_memory_that_is_not_mapped_is_refused_and_nothing_moves(make: Make) -> None:
    """An address the process has not mapped (a made-up device address) can be registered, but a
    transfer touching it is refused by the address space before any byte moves (``address_space``:
    raw pointers are read and written only once ``/proc/self/maps`` vouches for them)."""
    server, client, remote, local = _pair(make)
    fake = 0x1000_0000_0000 - 0x10000  # below every mapping a test process has
    assert server.register_mem(hixl.MemDesc(fake, 4096), hixl.MEM_DEVICE)[0] == hixl.SUCCESS
    client.connect(SERVER)
    before = local.copy()
    ops = [_op(local, remote, 16), hixl.TransferOpDesc(local.ctypes.data + 16, fake, 16)]
    assert client.transfer_sync(SERVER, hixl.READ, ops) == hixl.PARAM_INVALID
    assert np.array_equal(local, before)


@pytest.mark.parametrize("side", ["server", "client"])
def test_a_range_that_checked_out_is_refused_once_its_registration_goes(make: Make, side: str) -> None:
    """A transfer's range check holds only while the registrations it was made against stand
    (``hixl_mem_store.cc:259-279`` checks every transfer): after either side deregisters the range,
    the same descriptors are ``PARAM_INVALID`` and move nothing (comm: deregistering with a connection
    is allowed, ``channel_msg_handler.cc:244-250``)."""
    server, client = make(SERVER), make()
    remote = np.arange(4096, dtype=np.uint32).astype(np.uint8)
    local = np.zeros(4096, dtype=np.uint8)
    _, remote_handle = server.register_mem(hixl.MemDesc(remote.ctypes.data, 4096), hixl.MEM_DEVICE)
    _, local_handle = client.register_mem(hixl.MemDesc(local.ctypes.data, 4096), hixl.MEM_HOST)
    assert client.connect(SERVER) == hixl.SUCCESS
    ops = [_op(local, remote, 64)]
    assert client.transfer_sync(SERVER, hixl.READ, ops) == hixl.SUCCESS
    local[:] = 0xEE
    if side == "server":
        assert server.deregister_mem(remote_handle) == hixl.SUCCESS
    else:
        assert client.deregister_mem(local_handle) == hixl.SUCCESS
    assert client.transfer_sync(SERVER, hixl.READ, ops) == hixl.PARAM_INVALID
    assert (local == 0xEE).all()


def test_the_common_call_and_its_edges_give_the_bindings_answers(make: Make, world: SimWorld) -> None:
    """The positional call with plain types takes a short way to the world; each edge next to it takes
    the full one and answers as the binding does (``hixl_impl.cc:24-32, 364``; pybind's ``int32_t``
    caster refuses 2**31 with ``TypeError``)."""
    _, client, remote, local = _pair(make)
    client.connect(SERVER)
    ops = [_op(local, remote, 32)]
    assert client.transfer_sync(SERVER, hixl.READ, ops, 1) == hixl.SUCCESS
    assert client.transfer_sync(SERVER, hixl.READ, tuple(ops), True) == hixl.SUCCESS  # pybind: bool is int
    assert client.transfer_sync(SERVER, op=hixl.READ, op_descs=ops) == hixl.SUCCESS
    assert client.transfer_sync(SERVER, hixl.READ, ops, 0) == hixl.PARAM_INVALID
    assert client.transfer_sync(SERVER, hixl.READ, ops, -5) == hixl.PARAM_INVALID
    with pytest.raises(TypeError):
        client.transfer_sync(SERVER, hixl.READ, ops, 1 << 31)
    with pytest.raises(TypeError):
        client.transfer_sync(SERVER, hixl.READ, ops, 1.0)
    zero = [hixl.TransferOpDesc(local.ctypes.data, 0, 32)]
    assert client.transfer_sync(SERVER, hixl.READ, zero) == hixl.PARAM_INVALID
    assert np.array_equal(local[:32], remote[:32])
    trace = [e for e in world.trace.calls() if e.op == "hixl.transfer_sync"]
    assert [e.outcome for e in trace] == ["SUCCESS"] * 3 + ["PARAM_INVALID"] * 2 + ["PARAM_INVALID"]
