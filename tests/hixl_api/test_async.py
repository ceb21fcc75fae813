"""Asynchronous connects and transfers on the simulated clock (docs/hixl_engine_facts.md, sections 3
and 4; vendor lines are hicann/hixl 9ed283b)."""

from __future__ import annotations

from typing import Callable, List

import numpy as np

import datadist_sim.hixl as hixl
from datadist_sim import SimWorld

from .conftest import CS, NOBODY, OTHER, SERVER

Make = Callable[..., hixl.Hixl]
S = hixl.AsyncConnectStatus
T = hixl.TransferStatus


def _states(engine: hixl.Hixl, remote: str, until: List[hixl.AsyncConnectStatus]) -> List[S]:
    """The distinct states a polling client sees, until one of ``until``."""
    seen: List[S] = []
    for _ in range(10_000):
        status, state = engine.get_async_connect_status(remote)
        assert status == hixl.SUCCESS
        if not seen or seen[-1] != state:
            seen.append(state)
        if state in until:
            return seen
    raise AssertionError(f"stuck at {seen}")


def test_connect_async_moves_pending_connecting_connected(make: Make) -> None:
    """``connect_pool_executor.cc:96, 181-182``, ``hixl_impl.cc:150-157``: the engine's order; then
    the connection is there (``ALREADY_CONNECTED``)."""
    make(SERVER)
    client = make()
    assert client.connect_async(SERVER) == hixl.SUCCESS
    assert _states(client, SERVER, [S.CONNECTED, S.CONNECT_FAILED]) == [
        S.CONNECT_PENDING,
        S.CONNECTING,
        S.CONNECTED,
    ]
    assert client.connect(SERVER) == hixl.ALREADY_CONNECTED


def test_connect_async_to_nobody_is_success_then_connect_failed(make: Make) -> None:
    """The submit succeeds; the failure shows in the status (``hixl_impl.cc:150-157``)."""
    client = make()
    assert client.connect_async(NOBODY) == hixl.SUCCESS
    assert _states(client, NOBODY, [S.CONNECTED, S.CONNECT_FAILED])[-1] == S.CONNECT_FAILED
    assert client.get_all_async_connect_status() == (hixl.SUCCESS, {NOBODY: S.CONNECT_FAILED})


def test_disconnect_async_moves_pending_disconnecting_and_the_entry_goes(make: Make) -> None:
    """``hixl_impl.cc:164-169``, ``connect_pool_executor.cc:121-123``: the entry is removed, so it reads
    ``NOT_CONNECT`` and ``get_all_async_connect_status`` leaves it out (``:135-140``)."""
    make(SERVER)
    client = make()
    client.connect_async(SERVER)
    _states(client, SERVER, [S.CONNECTED])
    assert client.disconnect_async(SERVER) == hixl.SUCCESS
    assert _states(client, SERVER, [S.NOT_CONNECT]) == [S.DISCONNECT_PENDING, S.DISCONNECTING, S.NOT_CONNECT]
    assert client.get_all_async_connect_status() == (hixl.SUCCESS, {})
    assert client.disconnect(SERVER) == hixl.NOT_CONNECTED


def test_a_later_disconnect_wins_the_status_over_a_running_connect(make: Make) -> None:
    """``connect_pool_executor.cc:104-126``: while the entry says ``DISCONNECT_PENDING`` the connect's
    own states are not written; the remote's tasks run one at a time, in order."""
    make(SERVER)
    client = make()
    client.connect_async(SERVER)
    client.disconnect_async(SERVER)
    assert _states(client, SERVER, [S.NOT_CONNECT]) == [S.DISCONNECT_PENDING, S.DISCONNECTING, S.NOT_CONNECT]
    assert client.disconnect(SERVER) == hixl.NOT_CONNECTED


def _pool(make: Make, workers: int) -> hixl.Hixl:
    config = f'{{"connect_pool.thread_num": {workers}}}'
    return make(options={hixl.OPTION_GLOBAL_RESOURCE_CONFIG: config})


def test_tasks_for_other_remotes_run_beside_each_other_up_to_the_workers(make: Make) -> None:
    """``connect_pool_executor.cc:39-51, 177-186``: 2 workers by default, at most one task per remote at
    a time; with ``connect_pool.thread_num`` 1 the second remote waits for the first."""
    make(SERVER)
    make(OTHER)
    two, one = _pool(make, 2), _pool(make, 1)
    for client in (two, one):
        client.connect_async(SERVER)
        client.connect_async(OTHER)
        _states(client, SERVER, [S.CONNECTING])
    assert two.get_async_connect_status(OTHER) == (hixl.SUCCESS, S.CONNECTING)
    assert one.get_async_connect_status(OTHER) == (hixl.SUCCESS, S.CONNECT_PENDING)
    assert _states(one, OTHER, [S.CONNECTED]) == [S.CONNECT_PENDING, S.CONNECTING, S.CONNECTED]


def test_a_remotes_tasks_run_one_at_a_time_in_order(make: Make) -> None:
    """``connect_pool_executor.cc:177-186``: a disconnect queued behind a running connect of the same
    remote waits for it, even with a worker free."""
    make(SERVER)
    client = make()
    client.connect_async(SERVER)
    _states(client, SERVER, [S.CONNECTING])
    client.disconnect_async(SERVER)
    assert _states(client, SERVER, [S.NOT_CONNECT]) == [S.DISCONNECT_PENDING, S.DISCONNECTING, S.NOT_CONNECT]


def test_sync_connect_leaves_the_async_table_alone(make: Make) -> None:
    """The table records only asynchronous requests (section 4)."""
    make(SERVER)
    client = make()
    assert client.connect(SERVER) == hixl.SUCCESS
    assert client.get_async_connect_status(SERVER) == (hixl.SUCCESS, S.NOT_CONNECT)
    assert client.get_all_async_connect_status() == (hixl.SUCCESS, {})


def test_a_full_connect_queue_is_resource_exhausted(make: Make) -> None:
    """``connect_pool_executor.cc:83-102``: tasks not yet started beyond the capacity are refused;
    ``hixl_impl.cc:314, 329``: a timeout <= 0 is ``PARAM_INVALID``."""
    config = '{"connect_pool.thread_num": 1, "connect_pool.task_queue_capacity": 1}'
    client = make(options={hixl.OPTION_GLOBAL_RESOURCE_CONFIG: config})
    assert client.connect_async(SERVER, 0) == hixl.PARAM_INVALID
    assert client.disconnect_async(SERVER, -1) == hixl.PARAM_INVALID
    assert client.connect_async(SERVER) == hixl.SUCCESS
    assert client.connect_async(OTHER) == hixl.RESOURCE_EXHAUSTED


def test_finalize_drops_queued_tasks(make: Make) -> None:
    """``connect_pool_executor.cc:62-81``: queued tasks never run."""
    make(SERVER)
    client = make()
    client.connect_async(SERVER)
    client.finalize()
    assert client.initialize("127.0.0.1:0") == hixl.SUCCESS
    assert client.get_all_async_connect_status() == (hixl.SUCCESS, {})
    assert client.connect(SERVER) == hixl.SUCCESS


def _connected(make: Make, options: dict) -> tuple:
    server, client = make(SERVER, options), make(options=options)
    remote, local = np.arange(256, dtype=np.uint8), np.zeros(256, np.uint8)
    server.register_mem(hixl.MemDesc(remote.ctypes.data, 256), hixl.MEM_HOST)
    client.register_mem(hixl.MemDesc(local.ctypes.data, 256), hixl.MEM_HOST)
    assert client.connect(SERVER) == hixl.SUCCESS
    return client, remote, local


def _read(client: hixl.Hixl, local: np.ndarray, remote: np.ndarray, at: int, user_data: int = 0) -> int:
    args = hixl.TransferArgs()
    args.user_data = user_data
    desc = hixl.TransferOpDesc(local.ctypes.data + at, remote.ctypes.data + at, 16)
    status, req = client.transfer_async(SERVER, hixl.READ, [desc], args)
    assert status == hixl.SUCCESS
    return req


def test_transfer_async_waits_then_completes_once(make: Make, world: SimWorld) -> None:
    """Requests are numbered from 1 (``adxl_inner_engine.cc:527-528``); ``WAITING`` until the modelled
    end, then ``COMPLETED`` once; then the request is unknown: ``PARAM_INVALID`` with ``FAILED``
    (``adxl_inner_engine.cc:557-562, 585-595``). ``req`` 0 is ``FAILED`` (``hixl_impl.cc:388``)."""
    client, remote, local = _connected(make, {})
    req = _read(client, local, remote, 0)
    assert req == 1
    assert client.get_transfer_status(req) == (hixl.SUCCESS, T.WAITING)
    seen = [client.get_transfer_status(req) for _ in range(3)]
    assert (hixl.SUCCESS, T.COMPLETED) in seen
    assert seen[-1] == (hixl.PARAM_INVALID, T.FAILED)
    assert np.array_equal(local[:16], remote[:16])
    assert client.get_transfer_status(0) == (hixl.FAILED, T.FAILED)


def test_comm_has_no_get_all_transfer_status(make: Make) -> None:
    """``comm_engine.cc:90-94``: ``UNSUPPORTED``, ``[]``."""
    client, remote, local = _connected(make, {})
    _read(client, local, remote, 0)
    assert client.get_all_transfer_status() == (hixl.UNSUPPORTED, [])


def test_a_request_whose_connection_went_comm_not_connected_hixl_cs_unknown(make: Make) -> None:
    """comm: ``NOT_CONNECTED`` and forgotten (``adxl_inner_engine.cc:563-572``); hixl_cs: a disconnect
    erases the client's requests (``client_manager.cc:168-179``), so ``PARAM_INVALID``."""
    client, remote, local = _connected(make, {})
    req = _read(client, local, remote, 0)
    client.disconnect(SERVER)
    assert client.get_transfer_status(req) == (hixl.NOT_CONNECTED, T.FAILED)
    assert client.get_transfer_status(req) == (hixl.PARAM_INVALID, T.FAILED)


def test_hixl_cs_get_all_transfer_status_in_submission_order_with_user_data(make: Make) -> None:
    """``hixl_engine.cc:263-309``, ``client_manager.cc:141-166``: ``max_query_count`` 0 queries
    nothing; the walk stops at ``max_query_count`` results; ``skip_waiting`` leaves waiting ones out
    and outstanding; an ended request is reported once."""
    client, remote, local = _connected(make, CS)
    reqs = [_read(client, local, remote, 16 * i, user_data=100 + i) for i in range(3)]
    assert client.get_all_transfer_status(hixl.GetTransferStatusArgs(max_query_count=0)) == (hixl.SUCCESS, [])
    status, results = client.get_all_transfer_status(hixl.GetTransferStatusArgs(max_query_count=2))
    assert status == hixl.SUCCESS
    assert [(r.req, r.user_data, r.status) for r in results] == [
        (reqs[0], 100, T.WAITING),
        (reqs[1], 101, T.WAITING),
    ]
    assert client.get_all_transfer_status(hixl.GetTransferStatusArgs(skip_waiting=True)) == (hixl.SUCCESS, [])
    finished: List[tuple] = []
    for _ in range(100):
        finished += [(r.req, r.user_data, r.status) for r in client.get_all_transfer_status()[1]]
        if len({f[0] for f in finished if f[2] == T.COMPLETED}) == 3:
            break
    completed = [f for f in finished if f[2] == T.COMPLETED]
    assert completed == [(r, 100 + i, T.COMPLETED) for i, r in enumerate(reqs)]
    assert client.get_all_transfer_status() == (hixl.SUCCESS, [])
