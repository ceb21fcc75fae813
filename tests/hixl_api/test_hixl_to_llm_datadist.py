"""A ``hixl.Hixl`` engine connects to an ``llm_datadist`` instance on the hixl backend and reads and
writes the memory that instance registered, as it would a hixl engine's (docs/hixl_engine_facts.md §6;
hicann/hixl 9ed283b: the instance's engine comes from the same factory,
``hixl_transfer_engine.cc:100-106``, listens at its ``llm.listenIpInfo``, ``:88-98``, and registers its
memory pools and remote-accessible registered caches, ``data_cache_engine.cc:295-296, 322-323``,
``comm_mem_manager.cc:73-104``; the connect handshake checks nothing of who connects,
``channel_msg_handler.cc:412-442``)."""

from __future__ import annotations

import json
from typing import Callable, Dict, Iterator, List, Optional, Tuple

import numpy as np
import pytest

import datadist_sim.hixl as hixl
from datadist_sim import Fault, SimWorld, tensor_views
from datadist_sim.llm_datadist import CacheDesc, DataType, LLMClusterInfo, LLMDataDist, LLMRole, LLMStatusCode

Make = Callable[..., hixl.Hixl]
PROMPT = "10.0.0.1:26000"
NBYTES = 4096
AUTO = {hixl.OPTION_AUTO_CONNECT: "1"}


def _instance(
    cluster: int = 1, listen: str = PROMPT, backend: Optional[str] = "hixl", role: LLMRole = LLMRole.PROMPT
) -> LLMDataDist:
    options = {
        "llm.EnableCacheManager": "1",
        "llm.listenIpInfo": listen,
        "llm.MemPoolConfig": json.dumps({"memory_size": 1 << 20, "page_shift": 16}),
        "ge.exec.deviceId": "0",
    }
    if backend is not None:
        options["llm.TransferBackend"] = backend
    dd = LLMDataDist(role, cluster)
    dd.init(options)
    return dd


@pytest.fixture
def instances(world: SimWorld) -> Iterator[List[LLMDataDist]]:
    made: List[LLMDataDist] = []
    yield made
    for dd in made:
        dd.finalize()


class Remote:
    """A cache of the instance: its bytes (a view) and the address a transfer names them by."""

    def __init__(self, view: np.ndarray, addr: int) -> None:
        self.view, self.addr = view, addr


Served = Tuple[LLMDataDist, Remote, hixl.Hixl, np.ndarray]


@pytest.fixture
def served(make: Make, instances: List[LLMDataDist]) -> Served:
    """A Prompt on the hixl backend holding a cache of known bytes, and a hixl client (not connected)
    with 4 KiB of its own registered."""
    dd = _instance()
    instances.append(dd)
    cache = dd.cache_manager.allocate_cache(CacheDesc(1, [NBYTES], DataType.DT_UINT8))
    (view,) = tensor_views(cache)
    view[:] = np.arange(NBYTES) % 251
    client = make("10.0.0.2")
    local = np.full(NBYTES, 0xEE, dtype=np.uint8)
    assert client.register_mem(hixl.MemDesc(local.ctypes.data, NBYTES), hixl.MEM_HOST)[0] == hixl.SUCCESS
    return dd, Remote(view, cache.tensor_addrs[0]), client, local


def _op(
    local: np.ndarray, remote: Remote, nbytes: int, at: int = 0, remote_at: int = 0
) -> hixl.TransferOpDesc:
    return hixl.TransferOpDesc(local.ctypes.data + at, remote.addr + remote_at, nbytes)


def test_connect_to_where_a_hixl_backend_instance_listens_succeeds(served: Served) -> None:
    _, _, client, _ = served
    assert client.connect(PROMPT) == hixl.SUCCESS
    assert client.connect(PROMPT) == hixl.ALREADY_CONNECTED
    assert client.disconnect(PROMPT) == hixl.SUCCESS


@pytest.mark.parametrize("role", [LLMRole.PROMPT, LLMRole.DECODER])
def test_every_role_listens_on_the_hixl_backend(
    make: Make, instances: List[LLMDataDist], role: LLMRole
) -> None:
    """``llm.listenIpInfo`` is required of every role there (``v2/llm_datadist.py:456-459``,
    ``hixl_transfer_engine.cc:88-92``), and the engine listens on it whatever the role."""
    instances.append(_instance(role=role))
    assert make("10.0.0.2").connect(PROMPT) == hixl.SUCCESS


def test_an_instance_given_port_0_does_not_listen(make: Make, instances: List[LLMDataDist]) -> None:
    instances.append(_instance(listen="10.0.0.1:0", role=LLMRole.DECODER))
    assert make("10.0.0.2").connect("10.0.0.1:0") == hixl.FAILED  # nobody serves it


def test_an_instance_on_the_default_backend_serves_no_hixl_engine(
    make: Make, instances: List[LLMDataDist]
) -> None:
    """The HCCL backend (``CommTransferEngine``, ``transfer_engine.cc:30-35``) has no hixl engine: a
    connect to its listener finds none and is refused."""
    instances.append(_instance(backend=None))
    assert make("10.0.0.2").connect(PROMPT) == hixl.FAILED


def test_read_gets_the_instances_cache_bytes_and_leaves_them_as_they_were(served: Served) -> None:
    _, remote, client, local = served
    before = remote.view.copy()
    assert client.connect(PROMPT) == hixl.SUCCESS
    assert client.transfer_sync(PROMPT, hixl.READ, [_op(local, remote, 100, 10, 1000)]) == hixl.SUCCESS
    expected = np.full(NBYTES, 0xEE, dtype=np.uint8)
    expected[10:110] = before[1000:1100]
    assert np.array_equal(local, expected)
    assert np.array_equal(remote.view, before)


def test_write_lands_in_the_instances_cache(served: Served) -> None:
    _, remote, client, local = served
    local[:] = 7
    before = remote.view.copy()
    assert client.connect(PROMPT) == hixl.SUCCESS
    assert client.transfer_sync(PROMPT, hixl.WRITE, [_op(local, remote, 64, 0, 4000)]) == hixl.SUCCESS
    before[4000:4064] = 7
    assert np.array_equal(remote.view, before)


def test_async_transfers_move_the_bytes_too(served: Served) -> None:
    _, remote, client, local = served
    assert client.connect(PROMPT) == hixl.SUCCESS
    code, req = client.transfer_async(PROMPT, hixl.READ, [_op(local, remote, NBYTES)])
    assert code == hixl.SUCCESS
    while client.get_transfer_status(req) == (hixl.SUCCESS, hixl.TransferStatus.WAITING):
        pass
    assert np.array_equal(local, remote.view)


def test_a_range_outside_the_instances_registered_memory_is_param_invalid_and_writes_nothing(
    served: Served,
) -> None:
    """The pool (1 MiB) is registered whole; a range past its end is not (``hixl_mem_store.cc:259-279``)."""
    _, remote, client, local = served
    # the cache starts the pool: 16 bytes of this range lie past its end
    past = hixl.TransferOpDesc(local.ctypes.data, remote.addr + (1 << 20) - 16, 32)
    before, remote_before = local.copy(), remote.view.copy()
    assert client.connect(PROMPT) == hixl.SUCCESS
    assert client.transfer_sync(PROMPT, hixl.READ, [_op(local, remote, 16), past]) == hixl.PARAM_INVALID
    assert np.array_equal(local, before)
    local[:] = 1
    assert client.transfer_sync(PROMPT, hixl.WRITE, [_op(local, remote, 16), past]) == hixl.PARAM_INVALID
    assert np.array_equal(remote.view, remote_before)
    assert client.transfer_sync(PROMPT, hixl.READ, [_op(local, remote, 16)]) == hixl.SUCCESS  # still usable


def test_a_registered_cache_is_reachable_while_registered_and_only_if_remote_accessible(
    served: Served,
) -> None:
    """``register_cache`` ranges join the engine's registrations (``comm_mem_manager.cc:73-104``), not
    a ``remote_accessible=False`` one (``:75-78``), and leave at ``unregister_cache`` (``:106-125``)."""
    dd, _, client, local = served
    mine, hidden = np.arange(256, dtype=np.uint8), np.zeros(256, dtype=np.uint8)
    desc = CacheDesc(1, [256], DataType.DT_UINT8)
    cache = dd.cache_manager.register_cache(desc, [mine.ctypes.data])
    dd.cache_manager.register_cache(desc, [hidden.ctypes.data], remote_accessible=False)
    assert client.connect(PROMPT) == hixl.SUCCESS
    assert client.transfer_sync(PROMPT, hixl.READ, [_op(local, Remote(mine, mine.ctypes.data), 256)]) == 0
    assert np.array_equal(local[:256], mine)
    write = [_op(local, Remote(hidden, hidden.ctypes.data), 8)]
    assert client.transfer_sync(PROMPT, hixl.WRITE, write) == hixl.PARAM_INVALID
    assert not hidden.any()
    dd.cache_manager.unregister_cache(cache.cache_id)
    read = [_op(local, Remote(mine, mine.ctypes.data), 256)]
    assert client.transfer_sync(PROMPT, hixl.READ, read) == hixl.PARAM_INVALID


@pytest.mark.parametrize("options", [{}, AUTO])
def test_after_the_instance_finalizes_a_transfer_fails_as_to_a_finalized_hixl_peer(
    make: Make, served: Served, instances: List[LLMDataDist], options: Dict[str, str]
) -> None:
    """The code a hixl engine gives after its hixl peer finalized (``test_transfers``): ``FAILED``, no
    byte moved; a new connect is refused (``ctrl_msg_plugin.cc:70-86``)."""
    dd, remote, _, _ = served
    client = make("10.0.0.3", options)
    local = np.full(NBYTES, 0xEE, dtype=np.uint8)
    client.register_mem(hixl.MemDesc(local.ctypes.data, NBYTES), hixl.MEM_HOST)
    assert client.connect(PROMPT) == hixl.SUCCESS
    peer, other = make("10.0.0.1:26005", options), make("10.0.0.4", options)
    theirs = np.zeros(NBYTES, dtype=np.uint8)
    peer.register_mem(hixl.MemDesc(theirs.ctypes.data, NBYTES), hixl.MEM_HOST)
    other.register_mem(hixl.MemDesc(local.ctypes.data, NBYTES), hixl.MEM_HOST)
    assert other.connect("10.0.0.1:26005") == hixl.SUCCESS
    peer.finalize()
    to_peer = [_op(local, Remote(theirs, theirs.ctypes.data), 8)]
    hixl_peer_code = other.transfer_sync("10.0.0.1:26005", hixl.READ, to_peer)
    read = [_op(local, remote, 8)]
    dd.finalize()
    instances.remove(dd)
    assert client.transfer_sync(PROMPT, hixl.READ, read) == hixl_peer_code == hixl.FAILED
    assert np.all(local == 0xEE)
    client.disconnect(PROMPT)
    assert client.connect(PROMPT) == hixl.FAILED


def test_a_killed_instance_ends_the_connection_too(world: SimWorld, served: Served) -> None:
    _, remote, client, local = served
    assert client.connect(PROMPT) == hixl.SUCCESS
    world.faults.add(Fault.kill(1))
    world.faults.clear()
    assert client.transfer_sync(PROMPT, hixl.READ, [_op(local, remote, 8)]) == hixl.FAILED
    assert np.all(local == 0xEE)


def test_the_instances_unlink_leaves_a_hixl_clients_connection_alone(
    served: Served, instances: List[LLMDataDist]
) -> None:
    """``UnlinkClusters`` destroys only the instance's own entity for that cluster, whose finalize
    disconnects that entity's remote alone (``hixl_transfer_engine.cc:186-191``,
    ``hixl_entity.cc:76-82``)."""
    _, remote, client, local = served
    decode = _instance(2, "10.0.0.5:26000", role=LLMRole.DECODER)
    instances.append(decode)
    cluster = LLMClusterInfo()
    cluster.remote_cluster_id = 1
    cluster.append_local_ip_info("10.0.0.5", 26000)
    cluster.append_remote_ip_info("10.0.0.1", 26000)
    assert client.connect(PROMPT) == hixl.SUCCESS
    assert decode.link_clusters([cluster])[0] == LLMStatusCode.LLM_SUCCESS
    assert decode.unlink_clusters([cluster])[0] == LLMStatusCode.LLM_SUCCESS
    assert client.transfer_sync(PROMPT, hixl.READ, [_op(local, remote, 8)]) == hixl.SUCCESS
    assert np.array_equal(local[:8], remote.view[:8])


def test_a_partition_between_the_client_and_the_instance_times_the_transfer_out(
    world: SimWorld, served: Served
) -> None:
    """A rule names the instance by its cluster id: the engine serving it does not answer
    (``comm_channel.cc:514-531``)."""
    _, remote, client, local = served
    assert client.connect(PROMPT) == hixl.SUCCESS
    world.faults.add(Fault.partition("10.0.0.2", 1))
    start = world.now()
    assert client.transfer_sync(PROMPT, hixl.READ, [_op(local, remote, 8)], 500) == hixl.TIMEOUT
    assert world.now() - start == pytest.approx(0.5)
    assert np.all(local == 0xEE)
    assert client.disconnect(PROMPT) == hixl.SUCCESS
    assert client.connect(PROMPT, 200) == hixl.TIMEOUT
    world.faults.clear()
    assert client.connect(PROMPT) == hixl.SUCCESS
    assert client.transfer_sync(PROMPT, hixl.READ, [_op(local, remote, 8)]) == hixl.SUCCESS


def test_a_cut_between_the_client_and_the_instance_fails_the_connection(
    world: SimWorld, served: Served
) -> None:
    _, remote, client, local = served
    assert client.connect(PROMPT) == hixl.SUCCESS
    world.faults.add(Fault.cut_link(cluster="10.0.0.2", remote=1, start_s=world.now()))
    assert client.transfer_sync(PROMPT, hixl.READ, [_op(local, remote, 8)]) == hixl.FAILED


def test_a_hung_instance_times_the_connect_out(world: SimWorld, served: Served) -> None:
    """``Fault.hang(1)``: the instance's engine does not answer; the connect outlasts its timeout
    (``ctrl_msg_plugin.cc:79``)."""
    _, _, client, _ = served
    world.faults.add(Fault.hang(1))
    assert client.connect(PROMPT, 300) == hixl.TIMEOUT
    world.faults.clear()
    assert client.connect(PROMPT) == hixl.SUCCESS


def test_an_auto_connecting_engine_connects_to_the_instance_on_its_first_transfer(
    make: Make, served: Served
) -> None:
    _, remote, _, _ = served
    client = make("10.0.0.3", AUTO)
    local = np.zeros(NBYTES, dtype=np.uint8)
    client.register_mem(hixl.MemDesc(local.ctypes.data, NBYTES), hixl.MEM_HOST)
    assert client.transfer_sync(PROMPT, hixl.READ, [_op(local, remote, NBYTES)]) == hixl.SUCCESS
    assert np.array_equal(local, remote.view)
    assert client.connect(PROMPT) == hixl.ALREADY_CONNECTED


def test_a_cache_allocated_after_the_connect_is_reachable(served: Served) -> None:
    """It lies in the pool, registered whole at ``init`` (``data_cache_engine.cc:295-296``)."""
    dd, _, client, local = served
    assert client.connect(PROMPT) == hixl.SUCCESS
    cache = dd.cache_manager.allocate_cache(CacheDesc(1, [256], DataType.DT_UINT8))
    (view,) = tensor_views(cache)
    view[:] = 9
    read = [_op(local, Remote(view, cache.tensor_addrs[0]), 256)]
    assert client.transfer_sync(PROMPT, hixl.READ, read) == hixl.SUCCESS
    assert np.all(local[:256] == 9)
