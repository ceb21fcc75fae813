"""Fault rules on hixl engines: each fault gives the code hixl gives, on the virtual clock
(docs/hixl_engine_facts.md, "Faults"; ``_world/hixl_faults.py`` cites the vendor lines)."""

from __future__ import annotations

import re
from typing import Callable, Dict, Optional, Tuple

import numpy as np
import pytest

import datadist_sim.hixl as hixl
from datadist_sim import Fault, SimWorld
from datadist_sim._status import LLMStatusCode
from datadist_sim._status_hixl import HixlCode
from datadist_sim.pytest_plugin import assert_traced

from .conftest import CS, SERVER

Make = Callable[..., hixl.Hixl]
CLIENT = "127.0.0.2"
AUTO = {hixl.OPTION_AUTO_CONNECT: "1"}


def _pair(
    make: Make, options: Optional[Dict[str, str]] = None
) -> Tuple[hixl.Hixl, hixl.Hixl, np.ndarray, np.ndarray]:
    options = options or {}
    server, client = make(SERVER, options), make(CLIENT, options)
    remote = np.arange(4096, dtype=np.uint32).astype(np.uint8)
    local = np.full(4096, 0xEE, dtype=np.uint8)
    assert server.register_mem(hixl.MemDesc(remote.ctypes.data, 4096), hixl.MEM_DEVICE)[0] == hixl.SUCCESS
    assert client.register_mem(hixl.MemDesc(local.ctypes.data, 4096), hixl.MEM_HOST)[0] == hixl.SUCCESS
    return server, client, remote, local


def _read(local: np.ndarray, remote: np.ndarray) -> list:
    return [hixl.TransferOpDesc(local.ctypes.data, remote.ctypes.data, 4096)]


# -- the rules ------------------------------------------------------------------------------------


def test_a_hixl_rule_takes_hixl_codes_as_the_binding_gives_them_or_by_label() -> None:
    assert Fault.fail(hixl.TIMEOUT, op="hixl.connect").code is HixlCode.TIMEOUT
    assert Fault.fail("hixl.FAILED", op="hixl.connect").code is HixlCode.FAILED
    assert (
        Fault.fail(HixlCode.RESOURCE_EXHAUSTED, op="hixl.connect_async").code is HixlCode.RESOURCE_EXHAUSTED
    )


def test_a_code_the_hixl_operation_cannot_give_is_refused_naming_the_codes_it_gives() -> None:
    """``hixl.connect`` gives FAILED, TIMEOUT, ALREADY_CONNECTED, PARAM_INVALID (code_rows)."""
    with pytest.raises(
        ValueError, match=r"hixl\.connect cannot give hixl\.NOT_CONNECTED.*hixl\.FAILED, hixl\.TIMEOUT"
    ):
        Fault.fail(hixl.NOT_CONNECTED, op="hixl.connect")
    with pytest.raises(ValueError, match=r"cannot give LLM_TIMEOUT"):
        Fault.fail(LLMStatusCode.LLM_TIMEOUT, op="hixl.transfer_sync")
    with pytest.raises(ValueError, match=r"cannot give hixl\.TIMEOUT"):
        Fault.fail(hixl.TIMEOUT, op="pull_cache")


def test_transfer_async_has_no_timeout_so_a_timeout_rule_on_it_is_refused() -> None:
    """No timeout argument (``hixl_py.cc:348-349``); TransferStatus.TIMEOUT has no producer."""
    with pytest.raises(ValueError, match=r"hixl\.transfer_async cannot time out"):
        Fault.timeout(op="hixl.transfer_async")


# -- call faults ----------------------------------------------------------------------------------


def test_a_fail_rule_gives_its_hixl_code_and_the_trace_names_the_engine(world: SimWorld, make: Make) -> None:
    _pair(make)
    client = make("127.0.0.3")
    world.faults.add(Fault.fail(hixl.TIMEOUT, op="hixl.connect", cluster="127.0.0.3"))
    assert client.connect(SERVER) == hixl.TIMEOUT
    assert client.connect(SERVER) == hixl.TIMEOUT
    assert_traced(world, op="hixl.connect", outcome=hixl.TIMEOUT, cluster="127.0.0.3", count=2)


def test_a_rule_for_another_engine_leaves_this_one_alone(world: SimWorld, make: Make) -> None:
    _, client, _, _ = _pair(make)
    world.faults.add(Fault.fail(hixl.FAILED, op="hixl.connect", cluster="10.9.9.9"))
    assert client.connect(SERVER) == hixl.SUCCESS


@pytest.mark.parametrize("options", [{}, CS])
def test_a_timeout_that_did_not_land_waits_out_the_call_timeout_moves_nothing_and_spoils_the_connection(
    world: SimWorld, make: Make, options: Dict[str, str]
) -> None:
    """Stream sync past the timeout is TIMEOUT (comm_channel.cc:514-531; hixl_cs_client.cc:964-970);
    the connection is unusable (FAILED) until made again (comm_channel.cc:209-228; hixl_cs_client.cc:
    988-991)."""
    _, client, remote, local = _pair(make, options)
    assert client.connect(SERVER) == hixl.SUCCESS
    world.faults.add(Fault.timeout(op="hixl.transfer_sync", first=1))
    start = world.now()
    assert client.transfer_sync(SERVER, hixl.READ, _read(local, remote), 2500) == hixl.TIMEOUT
    assert world.now() - start == pytest.approx(2.5)
    assert (local == 0xEE).all()
    assert client.transfer_sync(SERVER, hixl.READ, _read(local, remote)) == hixl.FAILED
    assert client.connect(SERVER) == hixl.ALREADY_CONNECTED
    assert client.disconnect(SERVER) == hixl.SUCCESS
    assert client.connect(SERVER) == hixl.SUCCESS
    assert client.transfer_sync(SERVER, hixl.READ, _read(local, remote)) == hixl.SUCCESS
    assert np.array_equal(local, remote)


def test_a_timeout_that_landed_delivered_its_bytes_all_the_same(world: SimWorld, make: Make) -> None:
    _, client, remote, local = _pair(make)
    assert client.connect(SERVER) == hixl.SUCCESS
    world.faults.add(Fault.timeout(op="hixl.transfer_sync", landed=True))
    assert client.transfer_sync(SERVER, hixl.READ, _read(local, remote)) == hixl.TIMEOUT
    assert np.array_equal(local, remote)


def test_with_auto_connect_a_failed_transfer_drops_the_connection_and_the_next_call_connects_again(
    world: SimWorld, make: Make
) -> None:
    """``adxl_inner_engine.cc:408-415``; ``hixl_engine.cc:205-210``."""
    _, client, remote, local = _pair(make, AUTO)
    world.faults.add(Fault.timeout(op="hixl.transfer_sync", first=1))
    assert client.transfer_sync(SERVER, hixl.READ, _read(local, remote)) == hixl.TIMEOUT
    assert client.transfer_sync(SERVER, hixl.READ, _read(local, remote)) == hixl.SUCCESS


def test_poison_under_a_transfer_fails_it_and_moves_nothing(world: SimWorld, make: Make) -> None:
    _, client, remote, local = _pair(make)
    assert client.connect(SERVER) == hixl.SUCCESS
    world.faults.add(Fault.poison(op="hixl.transfer_sync", first=1))
    assert client.transfer_sync(SERVER, hixl.READ, _read(local, remote)) == hixl.FAILED
    assert (local == 0xEE).all()


def test_a_delay_past_the_timeout_is_a_timeout(world: SimWorld, make: Make) -> None:
    _, client, remote, local = _pair(make)
    assert client.connect(SERVER) == hixl.SUCCESS
    world.faults.add(Fault.delay(5.0, op="hixl.transfer_sync", first=1))
    assert client.transfer_sync(SERVER, hixl.READ, _read(local, remote), 1000) == hixl.TIMEOUT


# -- world faults ---------------------------------------------------------------------------------


@pytest.mark.parametrize("fault", ["partition", "hang"])
def test_a_peer_that_does_not_answer_times_out_connect_transfer_and_notify(
    world: SimWorld, make: Make, fault: str
) -> None:
    """connect past its timeout TIMEOUT (ctrl_msg_plugin.cc:79); a transfer's stream sync TIMEOUT; a
    notify's acknowledgement never comes, TIMEOUT (adxl_inner_engine.cc:614-623)."""
    _, client, remote, local = _pair(make)
    other = make("127.0.0.4")
    assert client.connect(SERVER) == hixl.SUCCESS
    rule = Fault.partition(CLIENT, SERVER) if fault == "partition" else Fault.hang(SERVER)
    world.faults.add(rule)
    start = world.now()
    assert client.send_notify(SERVER, hixl.NotifyDesc("n", "m"), 700) == hixl.TIMEOUT
    assert world.now() - start == pytest.approx(0.7)
    start = world.now()
    assert client.transfer_sync(SERVER, hixl.READ, _read(local, remote), 1500) == hixl.TIMEOUT
    assert world.now() - start == pytest.approx(1.5)
    start = world.now()
    assert other.connect(SERVER, 800) == (hixl.TIMEOUT if fault == "hang" else hixl.SUCCESS)
    world.faults.remove(rule)
    assert client.disconnect(SERVER) == hixl.SUCCESS
    assert client.connect(SERVER) == hixl.SUCCESS
    assert client.transfer_sync(SERVER, hixl.READ, _read(local, remote)) == hixl.SUCCESS


def test_a_killed_peer_refuses_new_connections_and_fails_transfers_on_old_ones(
    world: SimWorld, make: Make
) -> None:
    """Nobody serves its name: connect FAILED at once (ctrl_msg_plugin.cc:71-85); a transfer over a
    connection made before fails, FAILED."""
    _, client, remote, local = _pair(make)
    other = make("127.0.0.4")
    assert client.connect(SERVER) == hixl.SUCCESS
    world.faults.add(Fault.kill(SERVER))
    assert_traced(world, op="hixl.engine.kill", cluster=SERVER)
    assert other.connect(SERVER) == hixl.FAILED
    assert client.transfer_sync(SERVER, hixl.READ, _read(local, remote)) == hixl.FAILED
    assert (local == 0xEE).all()


@pytest.mark.parametrize("options", [{}, CS])
def test_an_async_transfer_under_a_partition_is_accepted_and_ends_failed(
    world: SimWorld, make: Make, options: Dict[str, str]
) -> None:
    """No timeout of its own; the error flag makes it FAILED (hixl_cs_client.cc:1106-1113), and the
    connection is unusable afterwards."""
    _, client, remote, local = _pair(make, options)
    assert client.connect(SERVER) == hixl.SUCCESS
    world.faults.add(Fault.partition(CLIENT, SERVER, heal_after_s=0.5))
    code, req = client.transfer_async(SERVER, hixl.READ, _read(local, remote))
    assert code == hixl.SUCCESS
    assert req != 0
    statuses = []
    for _ in range(1000):
        status = client.get_transfer_status(req)
        statuses.append(status)
        if status[1] != hixl.TransferStatus.WAITING:
            break
    assert statuses[-1][1] == hixl.TransferStatus.FAILED
    assert (local == 0xEE).all()
    assert client.transfer_sync(SERVER, hixl.READ, _read(local, remote)) == hixl.FAILED


def test_a_timed_cut_between_two_engines_spoils_their_connection(world: SimWorld, make: Make) -> None:
    _, client, remote, local = _pair(make)
    assert client.connect(SERVER) == hixl.SUCCESS
    world.faults.add(Fault.cut_link(cluster=CLIENT, remote=SERVER, start_s=world.now()))
    assert client.transfer_sync(SERVER, hixl.READ, _read(local, remote)) == hixl.FAILED


def test_an_exhausted_pool_refuses_async_connects_until_it_heals(world: SimWorld, make: Make) -> None:
    """A full queue is RESOURCE_EXHAUSTED (connect_pool_executor.cc:83-102; hixl_impl.cc:314-318)."""
    _, client, _, _ = _pair(make)
    rule = world.faults.add(Fault.exhaust_pool(CLIENT))
    assert client.connect_async(SERVER) == hixl.RESOURCE_EXHAUSTED
    world.faults.remove(rule)
    assert client.connect_async(SERVER) == hixl.SUCCESS


def test_without_rules_a_hixl_call_does_no_fault_work(world: SimWorld, make: Make) -> None:
    """The fast path: an idle plan and no failed connection return at the hook's first line."""
    _, client, remote, local = _pair(make)
    assert client.connect(SERVER) == hixl.SUCCESS
    assert world.faults.idle
    assert client.transfer_sync(SERVER, hixl.READ, _read(local, remote)) == hixl.SUCCESS
    assert world.faults.fired_total == 0


# -- error-path coverage --------------------------------------------------------------------------


def test_coverage_counts_hixl_codes_apart_against_the_codes_the_hixl_engine_gives(
    world: SimWorld, make: Make
) -> None:
    from datadist_sim._coverage import CodeCoverage

    coverage = CodeCoverage().start()
    try:
        _, client, remote, local = _pair(make)
        assert client.connect(SERVER) == hixl.SUCCESS
        world.faults.add(Fault.timeout(op="hixl.transfer_sync", first=1))
        assert client.transfer_sync(SERVER, hixl.READ, _read(local, remote)) == hixl.TIMEOUT
        assert client.transfer_sync(SERVER, hixl.READ, _read(local, remote)) == hixl.FAILED
    finally:
        coverage.stop()
    assert coverage.hixl_received() == ["TIMEOUT", "FAILED"]
    assert coverage.calls == 0  # nothing counted as an LLMStatusCode call
    assert not coverage.exceptions
    report = coverage.report()
    assert re.search(r"hixl\.TIMEOUT\s+103901\s+1\s+hixl\.transfer_sync 1\n", report)
    reachable = coverage.hixl_reachable()
    assert "NOTIFY_FAILED" not in reachable  # no producer in the source
    assert f"hixl error-path coverage: 2 of {len(reachable)} codes" in report
    assert coverage.meets(2)  # hixl codes count towards --datadist-coverage-fail-under
    assert not coverage.meets(3)
    again = CodeCoverage.from_dict(coverage.as_dict())
    assert again.hixl_report() == coverage.hixl_report()


# -- scenarios ------------------------------------------------------------------------------------


def test_the_bundled_hixl_scenario_times_out_reconnects_and_is_reproducible() -> None:
    from datadist_sim.scenarios.runner import run, self_check

    report = run("hixl_partition_heal", seed=4)
    assert report.delivered == report.requests
    per_op = report.summary.per_op
    assert per_op["hixl.transfer_sync"].get("TIMEOUT", 0) >= 1
    assert per_op["hixl.disconnect"].get("SUCCESS", 0) >= 1  # the careful client made it again
    assert report.never_fired == []
    assert self_check("hixl_partition_heal", seed=4)


def test_the_hypothesis_strategies_draw_hixl_rules_with_hixl_codes_only() -> None:
    from hypothesis import given, settings

    from datadist_sim.faults.files import rule_from_spec
    from datadist_sim.strategies import rule_specs

    @settings(max_examples=200, deadline=None)
    @given(
        rule_specs(
            ops=["hixl.transfer_sync", "hixl.connect", "hixl.connect_async"],
            clusters=[CLIENT, SERVER],
            modes=["hixl-engine"],
        )
    )
    def check(spec: Dict[str, object]) -> None:
        rule = rule_from_spec(spec)  # the plan accepts it
        if rule.action == "fail":
            assert isinstance(rule.code, HixlCode)

    check()


def test_an_llm_code_injected_with_any_code_reaches_a_hixl_client_as_its_hixl_twin(
    world: SimWorld, make: Make
) -> None:
    """Outside the engine's behaviour (``any_code``), reported as the vendor pairs the codes
    (``adxl_utils.cc:50-63``): ``LLM_NOT_YET_LINK`` is ``NOT_CONNECTED``, an unpaired one ``FAILED``."""
    _pair(make)
    client = make("127.0.0.3")
    world.faults.add(Fault.fail(LLMStatusCode.LLM_NOT_YET_LINK, op="hixl.connect", first=1, any_code=True))
    assert client.connect(SERVER) == hixl.NOT_CONNECTED
    world.faults.add(Fault.fail(LLMStatusCode.LLM_LINK_FAILED, op="hixl.connect", first=1, any_code=True))
    assert client.connect(SERVER) == hixl.FAILED


def test_an_async_connect_to_a_partitioned_peer_ends_connect_failed(world: SimWorld, make: Make) -> None:
    """The pool's connect outlasts its timeout (``ctrl_msg_plugin.cc:70-86``): ``CONNECT_FAILED``
    (``hixl_impl.cc:150-157``)."""
    _, client, _, _ = _pair(make)
    world.faults.add(Fault.partition(CLIENT, SERVER))
    assert client.connect_async(SERVER, 300) == hixl.SUCCESS
    states = []
    for _ in range(5000):  # each poll of a task in flight lets a round trip pass
        _, state = client.get_async_connect_status(SERVER)
        states.append(state)
        if state in (hixl.AsyncConnectStatus.CONNECTED, hixl.AsyncConnectStatus.CONNECT_FAILED):
            break
    assert states[-1] == hixl.AsyncConnectStatus.CONNECT_FAILED
    assert hixl.AsyncConnectStatus.CONNECTING in states


@pytest.mark.parametrize(("options", "then"), [(AUTO, hixl.NOT_CONNECTED), ({**AUTO, **CS}, hixl.FAILED)])
def test_with_auto_connect_a_killed_peer_is_failed_then_not_connected_on_comm_and_failed_on_hixl_cs(
    world: SimWorld, make: Make, options: Dict[str, str], then: int
) -> None:
    """The failed transfer drops the connection; the next one connects again and is refused: comm
    ignores the connect's result and answers NOT_CONNECTED (``adxl_inner_engine.cc:486-491``), hixl_cs
    returns the connect's FAILED (``hixl_engine.cc:199-201``)."""
    _, client, remote, local = _pair(make, options)
    assert client.transfer_sync(SERVER, hixl.READ, _read(local, remote)) == hixl.SUCCESS
    world.faults.add(Fault.kill(SERVER))
    assert client.transfer_sync(SERVER, hixl.READ, _read(local, remote)) == hixl.FAILED
    assert client.transfer_sync(SERVER, hixl.READ, _read(local, remote)) == then


def test_a_code_injected_with_any_code_that_has_no_llm_twin_reaches_the_common_call_as_itself(
    world: SimWorld, make: Make
) -> None:
    """``NOTIFY_FAILED`` has no ``LLMStatusCode`` twin: the plain positional ``transfer_sync`` (the
    face's quick path) reports the rule's own code, as every other call does."""
    _, client, remote, local = _pair(make)
    assert client.connect(SERVER) == hixl.SUCCESS
    world.faults.add(Fault.fail(hixl.NOTIFY_FAILED, op="hixl.transfer_sync", any_code=True))
    assert client.transfer_sync(SERVER, hixl.READ, _read(local, remote)) == hixl.NOTIFY_FAILED
    assert (local == 0xEE).all()
