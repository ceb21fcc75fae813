"""``hixl.Hixl``'s codes, each under the condition the engine checks (docs/hixl_engine_facts.md, sections
2-4; vendor lines are hicann/hixl 9ed283b)."""

from __future__ import annotations

import ctypes
from typing import Callable

import numpy as np
import pytest

import datadist_sim.hixl as hixl
from datadist_sim import SimWorld

from .conftest import CS, NOBODY, OTHER, SERVER

Make = Callable[..., hixl.Hixl]


def _desc(array: np.ndarray) -> hixl.MemDesc:
    return hixl.MemDesc(array.ctypes.data, array.nbytes)


# -- initialize / finalize ----------------------------------------------------------------------------


def test_initialize_twice_is_success_and_keeps_the_first_engine(make: Make, world: SimWorld) -> None:
    """``hixl_py.cc:43-46``: a repeated ``initialize`` is ``SUCCESS`` and ignores its arguments."""
    engine = make(SERVER)
    assert engine.initialize(OTHER) == hixl.SUCCESS
    client = make()
    assert client.connect(SERVER) == hixl.SUCCESS
    assert make().connect(OTHER) == hixl.FAILED  # nobody listens there


@pytest.mark.parametrize(
    "local",
    ["localhost:1234", "127.0.0.1:port", "1.2.3:5", "::1"],
)
def test_a_local_engine_that_is_not_ip_or_ip_port_is_param_invalid(local: str, world: SimWorld) -> None:
    """``hixl_utils.cc:218-240``: the host must be an IP literal (``CheckIp``, ``:132-139``) and the port
    a number; a failed ``initialize`` keeps nothing (``hixl_py.cc:53-57``)."""
    engine = hixl.Hixl()
    assert engine.initialize(local) == hixl.PARAM_INVALID
    assert engine.connect(SERVER) == hixl.FAILED  # still not initialised


def test_a_port_in_use_fails_initialize(make: Make, world: SimWorld) -> None:
    """``ctrl_msg_plugin.cc:176-177``: a second listener on the same port fails to bind: ``FAILED``;
    a finalized engine's port is free again."""
    first = make(SERVER)
    assert hixl.Hixl().initialize(SERVER) == hixl.FAILED
    first.finalize()
    assert make(SERVER) is not None


@pytest.mark.parametrize(
    "options",
    [
        {hixl.OPTION_AUTO_CONNECT: ""},
        {hixl.OPTION_AUTO_CONNECT: "2"},
        {hixl.OPTION_AUTO_CONNECT: "yes"},
        {hixl.OPTION_RDMA_TRAFFIC_CLASS: "6"},
        {hixl.OPTION_RDMA_TRAFFIC_CLASS: "256"},
        {hixl.OPTION_RDMA_SERVICE_LEVEL: "8"},
        {hixl.OPTION_ENABLE_USE_FABRIC_MEM: "2"},
        {hixl.OPTION_GLOBAL_RESOURCE_CONFIG: "[1]"},
        {hixl.OPTION_GLOBAL_RESOURCE_CONFIG: '{"connect_pool.thread_num": 65}'},
        {hixl.OPTION_LOCAL_COMM_RES: "not json"},
        {hixl.OPTION_BUFFER_POOL: "4:0"},
        {"NoSuchOption": "1"},
        {**CS, hixl.OPTION_ENABLE_USE_FABRIC_MEM: "0"},
        {**CS, hixl.OPTION_BUFFER_POOL: "4:8"},
    ],
)
def test_options_the_engine_cannot_parse_are_param_invalid(options: dict, world: SimWorld) -> None:
    """``hixl_options.cc:246-369`` (ranges, JSON), ``engine_factory.cc:59-62`` (``LocalCommRes`` not JSON),
    ``hixl_options.cc:230-236`` (a key the chosen engine does not know: ``hixl_cs`` knows no
    ``EnableUseFabricMem``, ``hixl_engine.cc:31-37``), ``hixl_engine.cc:62-69`` (``hixl_cs``'s
    ``BufferPool`` only ``0:0``), ``adxl_inner_engine.cc:216-248`` (comm's both above 0)."""
    assert hixl.Hixl().initialize("127.0.0.1:0", options) == hixl.PARAM_INVALID


def test_options_that_parse_initialize(make: Make) -> None:
    """The vendor sample's options (``hixl_d2rd_multiproc_sample.py:70-78``) and comm's buffer pool."""
    make(options={hixl.OPTION_AUTO_CONNECT: "1", **CS})
    make(options={hixl.OPTION_BUFFER_POOL: "4:8", "adxl.RdmaTrafficClass": "132"})


def test_options_must_be_a_dict_of_text() -> None:
    """pybind's ``std::map<std::string, std::string>`` caster: a dict whose keys and values are text."""
    with pytest.raises(TypeError, match=r"initialize\(\): incompatible function arguments"):
        hixl.Hixl().initialize("127.0.0.1:0", {hixl.OPTION_AUTO_CONNECT: 1})


def test_every_method_of_an_engine_not_initialised_is_failed_with_empty_values(world: SimWorld) -> None:
    """``hixl_py.cc:79-214``: ``FAILED`` and handle/req ``0``, ``NOT_CONNECT``, ``TransferStatus.FAILED``,
    ``{}``, ``[]``, before any argument check of the engine."""
    engine = hixl.Hixl()
    desc = hixl.TransferOpDesc(0, 0, 0)
    assert engine.register_mem(hixl.MemDesc(0, 0), hixl.MEM_HOST) == (hixl.FAILED, 0)
    assert engine.deregister_mem(0) == hixl.FAILED
    assert engine.connect(SERVER, -1) == hixl.FAILED
    assert engine.disconnect(SERVER) == hixl.FAILED
    assert engine.connect_async(SERVER) == hixl.FAILED
    assert engine.get_async_connect_status(SERVER) == (hixl.FAILED, hixl.NOT_CONNECT)
    assert engine.get_all_async_connect_status() == (hixl.FAILED, {})
    assert engine.transfer_sync(SERVER, hixl.READ, [desc]) == hixl.FAILED
    assert engine.transfer_async(SERVER, hixl.READ, [desc]) == (hixl.FAILED, 0)
    assert engine.get_transfer_status(1) == (hixl.FAILED, hixl.TransferStatus.FAILED)
    assert engine.get_all_transfer_status() == (hixl.FAILED, [])
    assert engine.send_notify(SERVER, hixl.NotifyDesc("n", "m")) == hixl.FAILED
    assert engine.get_notifies() == (hixl.FAILED, [])
    assert engine.finalize() is None


def test_after_finalize_every_method_is_failed_and_the_engine_can_be_initialised_again(make: Make) -> None:
    """``hixl_py.cc:67-71``: ``finalize`` clears the flag; ``finalize`` again is a no-op."""
    engine = make(SERVER)
    engine.finalize()
    engine.finalize()
    assert engine.connect(OTHER) == hixl.FAILED
    assert make().connect(SERVER) == hixl.FAILED  # its listener closed
    assert engine.initialize(SERVER) == hixl.SUCCESS
    assert make().connect(SERVER) == hixl.SUCCESS
    engine.finalize()


# -- memory -------------------------------------------------------------------------------------------


def test_register_mem_gives_distinct_non_zero_handles_and_checks_its_arguments(make: Make) -> None:
    """``hixl_impl.cc:115`` (addr 0), ``channel_msg_handler.cc:225-227`` (addr + len overflows):
    ``PARAM_INVALID`` with handle 0; comm gives each registration its own handle (``:222-242``)."""
    engine = make()
    buf = np.zeros(64, np.uint8)
    status, first = engine.register_mem(_desc(buf), hixl.MEM_HOST)
    again = engine.register_mem(_desc(buf), hixl.MEM_HOST)
    assert status == hixl.SUCCESS
    assert first != 0
    assert again[0] == hixl.SUCCESS
    assert again[1] not in (0, first)
    assert engine.register_mem(hixl.MemDesc(0, 8), hixl.MEM_HOST) == (hixl.PARAM_INVALID, 0)
    assert engine.register_mem(hixl.MemDesc(2**64 - 8, 8), hixl.MEM_HOST) == (hixl.PARAM_INVALID, 0)


def test_hixl_cs_gives_the_same_handle_again_and_refuses_an_overlap(make: Make) -> None:
    """``hixl_server.cc:111-119``, ``hixl_utils.cc:242-264``: the same range and type is the same
    handle; an overlapping range of the same type is ``PARAM_INVALID``, of the other type allowed."""
    engine = make(options=CS)
    buf = np.zeros(64, np.uint8)
    status, handle = engine.register_mem(_desc(buf), hixl.MEM_DEVICE)
    assert status == hixl.SUCCESS
    assert engine.register_mem(_desc(buf), hixl.MEM_DEVICE) == (hixl.SUCCESS, handle)
    half = hixl.MemDesc(buf.ctypes.data + 32, 64)
    assert engine.register_mem(half, hixl.MEM_DEVICE) == (hixl.PARAM_INVALID, 0)
    assert engine.register_mem(half, hixl.MEM_HOST)[0] == hixl.SUCCESS


def test_deregister_mem(make: Make) -> None:
    """``hixl_impl.cc:123``: handle 0 is ``PARAM_INVALID``; an unknown handle is ``SUCCESS``
    (``channel_msg_handler.cc:244-250``)."""
    engine = make()
    buf = np.zeros(8, np.uint8)
    _, handle = engine.register_mem(_desc(buf), hixl.MEM_HOST)
    assert engine.deregister_mem(0) == hixl.PARAM_INVALID
    assert engine.deregister_mem(handle) == hixl.SUCCESS
    assert engine.deregister_mem(handle) == hixl.SUCCESS
    assert engine.deregister_mem(12345) == hixl.SUCCESS


def test_hixl_cs_refuses_deregister_while_it_holds_a_connection(make: Make) -> None:
    """``hixl_engine.cc:129-133``: ``FAILED`` while a client connection exists."""
    make(SERVER, CS)
    engine = make(options=CS)
    buf = np.zeros(8, np.uint8)
    _, handle = engine.register_mem(_desc(buf), hixl.MEM_HOST)
    assert engine.connect(SERVER) == hixl.SUCCESS
    assert engine.deregister_mem(handle) == hixl.FAILED
    assert engine.disconnect(SERVER) == hixl.SUCCESS
    assert engine.deregister_mem(handle) == hixl.SUCCESS


def test_register_mem_takes_positional_arguments_only(make: Make) -> None:
    """``hixl_py.cc:334``: no ``py::arg`` names, so no keywords."""
    buf = ctypes.create_string_buffer(8)
    with pytest.raises(TypeError, match=r"(?s)register_mem\(\).*arg0: hixl.hixl.MemDesc"):
        make().register_mem(arg0=hixl.MemDesc(ctypes.addressof(buf), 8), arg1=hixl.MEM_HOST)


# -- connections --------------------------------------------------------------------------------------


def test_connect_to_an_engine_nobody_serves_is_failed(make: Make) -> None:
    """The TCP connect is refused at once: ``FAILED`` (``ctrl_msg_plugin.cc:71-85``;
    ``channel_msg_handler.cc:515-516``). A client-only engine (port 0) serves nobody."""
    make("127.0.0.1:0")
    engine = make()
    assert engine.connect(NOBODY) == hixl.FAILED
    assert engine.connect("127.0.0.1:0") == hixl.FAILED


def test_connect_twice_is_already_connected_and_each_direction_is_its_own(make: Make) -> None:
    """``channel_msg_handler.cc:492-495``: ``ALREADY_CONNECTED``; connections are per direction
    (``channel_manager.cc:442-462``): A->B and B->A both succeed."""
    a, b = make(SERVER), make(OTHER)
    assert a.connect(OTHER) == hixl.SUCCESS
    assert a.connect(OTHER) == hixl.ALREADY_CONNECTED
    assert b.connect(SERVER) == hixl.SUCCESS


@pytest.mark.parametrize("options", [{}, CS])
def test_connect_checks_timeout_and_name(make: Make, options: dict) -> None:
    """``hixl_impl.cc:289``: ``timeout_in_millis <= 0`` is ``PARAM_INVALID``; a remote that is not
    ip:port is ``PARAM_INVALID`` (``client_manager.cc:49-50``; ``channel_msg_handler.cc:513``)."""
    make(SERVER)
    engine = make(options=options)
    assert engine.connect(SERVER, 0) == hixl.PARAM_INVALID
    assert engine.connect("server:1", 100) == hixl.PARAM_INVALID
    assert engine.connect(SERVER, 100) == hixl.SUCCESS


def test_hixl_cs_refuses_to_connect_to_itself(make: Make) -> None:
    """``hixl_engine.cc:147-150``: ``PARAM_INVALID``."""
    assert make(SERVER, CS).connect(SERVER) == hixl.PARAM_INVALID


def test_disconnect_what_is_not_connected_is_not_connected(make: Make) -> None:
    """``channel_msg_handler.cc:580-583``; ``client_manager.cc:181-204``; ``hixl_impl.cc:303`` for the
    timeout. Only the caller's connection goes: the peer's own stays."""
    a, b = make(SERVER), make(OTHER)
    assert a.disconnect(OTHER) == hixl.NOT_CONNECTED
    assert a.disconnect(OTHER, -5) == hixl.PARAM_INVALID
    assert a.connect(OTHER) == hixl.SUCCESS
    assert b.connect(SERVER) == hixl.SUCCESS
    assert a.disconnect(OTHER) == hixl.SUCCESS
    assert a.disconnect(OTHER) == hixl.NOT_CONNECTED
    assert b.connect(SERVER) == hixl.ALREADY_CONNECTED


# -- notifies -----------------------------------------------------------------------------------------


def test_notifies_go_to_the_peer_once_and_need_a_connection(make: Make) -> None:
    """``hixl_engine.cc:329-332``; ``adxl_inner_engine.cc:602-604``: without a connection
    ``NOT_CONNECTED``; ``get_notifies`` drains the queue (``hixl_server.cc:177-182``)."""
    server, client = make(SERVER), make()
    assert client.send_notify(SERVER, hixl.NotifyDesc("n", "m")) == hixl.NOT_CONNECTED
    assert client.connect(SERVER) == hixl.SUCCESS
    assert client.send_notify(SERVER, hixl.NotifyDesc("first", "1")) == hixl.SUCCESS
    assert client.send_notify(SERVER, hixl.NotifyDesc("second", "2")) == hixl.SUCCESS
    status, got = server.get_notifies()
    assert status == hixl.SUCCESS
    assert [(n.name, n.notify_msg) for n in got] == [("first", "1"), ("second", "2")]
    assert server.get_notifies() == (hixl.SUCCESS, [])
    assert client.get_notifies() == (hixl.SUCCESS, [])


def test_send_notify_checks_lengths_and_timeout_first(make: Make) -> None:
    """``hixl_impl.cc:399-415``: a name or message over 1024 bytes, or a timeout <= 0, is
    ``PARAM_INVALID``, before the connection is looked at."""
    engine = make()
    assert engine.send_notify(SERVER, hixl.NotifyDesc("n" * 1025, "m")) == hixl.PARAM_INVALID
    assert engine.send_notify(SERVER, hixl.NotifyDesc("n", "m" * 1025)) == hixl.PARAM_INVALID
    assert engine.send_notify(SERVER, hixl.NotifyDesc("n", "m"), 0) == hixl.PARAM_INVALID
    assert engine.send_notify(SERVER, hixl.NotifyDesc("n" * 1024, "m" * 1024)) == hixl.NOT_CONNECTED


def test_a_hixl_cs_server_holds_at_most_4096_notifies(make: Make) -> None:
    """``ctrl_msg.h:20``, ``hixl_server.cc:193-239``: the full queue answers ``RESOURCE_EXHAUSTED``."""
    server, client = make(SERVER, CS), make(options=CS)
    assert client.connect(SERVER) == hixl.SUCCESS
    notify = hixl.NotifyDesc("n", "m")
    assert all(client.send_notify(SERVER, notify) == hixl.SUCCESS for _ in range(4096))
    assert client.send_notify(SERVER, notify) == hixl.RESOURCE_EXHAUSTED
    assert len(server.get_notifies()[1]) == 4096


# -- capability ---------------------------------------------------------------------------------------


def test_get_capability() -> None:
    """``hixl_impl.cc:425-438``: both features supported; another non-negative value is not; a negative
    one is ``PARAM_INVALID`` with ``FEATURE_NOT_SUPPORTED`` (``hixl_py.cc:221``). No engine needed."""
    assert hixl.get_capability(hixl.AUTO_CONNECT) == (hixl.SUCCESS, hixl.FEATURE_SUPPORTED)
    assert hixl.get_capability(hixl.CLIENT_SERVER_COMM) == (hixl.SUCCESS, hixl.FEATURE_SUPPORTED)
    assert hixl.get_capability(hixl.FeatureType(7)) == (hixl.SUCCESS, hixl.FEATURE_NOT_SUPPORTED)
    assert hixl.get_capability(hixl.FeatureType(-1)) == (hixl.PARAM_INVALID, hixl.FEATURE_NOT_SUPPORTED)
    with pytest.raises(TypeError, match=r"get_capability\(\): incompatible function arguments"):
        hixl.get_capability(0)


def test_calls_are_traced_with_the_hixl_code(make: Make, world: SimWorld) -> None:
    """Each call is one ``hixl.<method>`` call in the world's trace, its outcome the code's name."""
    make().connect(NOBODY)
    calls = [(e.op, e.outcome) for e in world.trace if e.kind == "call"]
    assert calls[-1] == ("hixl.connect", "FAILED")


def test_a_connect_that_outlasts_its_timeout_is_timeout_and_leaves_no_connection(
    make: Make, world: SimWorld
) -> None:
    """``ctrl_msg_plugin.cc:102-122``: an attempt that outlasts ``timeout_in_millis`` is ``TIMEOUT``;
    here a connect takes ``SimConfig.link_setup_s`` (docs section 10)."""
    make(SERVER)
    client = make()
    short = int(world.config.link_setup_s * 1000) // 2
    start = world.now()
    assert client.connect(SERVER, short) == hixl.TIMEOUT
    assert world.now() - start == pytest.approx(short / 1000)
    assert client.disconnect(SERVER) == hixl.NOT_CONNECTED
    assert client.connect(SERVER) == hixl.SUCCESS


def test_disconnect_parses_the_name_on_comm_only(make: Make) -> None:
    """comm parses ``remote_engine`` first (``channel_msg_handler.cc:576-579``): ``PARAM_INVALID``;
    hixl_cs does not, so it is simply not connected (``client_manager.cc:181-204``)."""
    assert make().disconnect("no-such-host") == hixl.PARAM_INVALID
    assert make(options=CS).disconnect("no-such-host") == hixl.NOT_CONNECTED


def test_transfer_arguments_pybind_refuses_are_type_errors(make: Make) -> None:
    """``hixl_py.cc:346-347``: ``op`` must be a ``TransferOp`` (no conversion from ``int``), ``op_descs``
    a sequence of ``TransferOpDesc``, the timeout an ``int``."""
    engine = make()
    desc = hixl.TransferOpDesc(1, 2, 3)
    for args in ((SERVER, 0, [desc]), (SERVER, hixl.READ, [1]), (SERVER, hixl.READ, [desc], 1.5)):
        with pytest.raises(TypeError, match=r"^transfer_sync\(\): incompatible function arguments"):
            engine.transfer_sync(*args)


def test_a_port_an_llm_datadist_instance_listens_on_is_in_use(make: Make, world: SimWorld) -> None:
    """Two listeners cannot share a port (``ctrl_msg_plugin.cc:176-177``), whichever API opened the
    first (both engines build on the same factory, docs section 6): ``FAILED`` / ``LLM_FAILED``."""
    from datadist_sim.llm_datadist import LLMDataDist, LLMException, LLMRole, LLMStatusCode

    prompt = LLMDataDist(LLMRole.PROMPT, 1)
    prompt.init({"ge.exec.deviceId": "0", "llm.listenIpInfo": "127.0.0.1:26003"})
    try:
        assert hixl.Hixl().initialize("127.0.0.1:26003") == hixl.FAILED
        assert hixl.Hixl().initialize("0.0.0.0:26003") == hixl.FAILED
        make("127.0.0.1:26004")
    finally:
        prompt.finalize()
    second = LLMDataDist(LLMRole.PROMPT, 2)
    with pytest.raises(LLMException, match="already in use") as refused:
        second.init({"ge.exec.deviceId": "0", "llm.listenIpInfo": "127.0.0.1:26004"})
    assert refused.value.status_code == LLMStatusCode.LLM_FAILED


def test_an_engine_belongs_to_the_world_current_at_its_construction() -> None:
    """As an ``LLMDataDist`` does: construction picks the world; initialising later elsewhere does not
    move it, so two worlds' engines never see each other."""
    first, second = SimWorld(), SimWorld()
    with first.activate():
        server = hixl.Hixl()
    with second.activate():
        assert server.initialize(SERVER) == hixl.SUCCESS
        client = hixl.Hixl()
        assert client.initialize("127.0.0.1:0") == hixl.SUCCESS
        assert client.connect(SERVER) == hixl.FAILED
    assert [e.op for e in first.trace if e.kind == "call"] == ["hixl.initialize"]
    server.finalize()
    client.finalize()
