"""Rank-table ``link`` / ``unlink`` / ``query_register_mem_status`` (reference §5.9)."""

from __future__ import annotations

import json

import pytest

from datadist_sim._world.world import SimWorld
from datadist_sim.llm_datadist.status import LLMException, LLMStatusCode
from datadist_sim.llm_datadist.v2.llm_types import RegisterMemStatus

from .conftest import decoder, prompt

S = LLMStatusCode
RANK_TABLE = json.dumps(
    {
        "version": "1.2",
        "server_count": "2",
        "status": "completed",
        "server_list": [
            {
                "server_id": f"s{rank}",
                "device": [{"device_id": "0", "device_ip": f"10.0.0.{rank + 1}", "rank_id": str(rank)}],
            }
            for rank in range(2)
        ],
    }
)


def _poll(dd: object, comm_id: int, limit: int = 1000) -> list[RegisterMemStatus]:
    seen = []
    for _ in range(limit):
        status = dd.query_register_mem_status(comm_id)  # type: ignore[attr-defined]
        seen.append(status)
        if status is not RegisterMemStatus.PREPARING:
            return seen
    raise AssertionError("never left PREPARING")


def test_both_sides_link_and_polling_reaches_ok_without_wall_sleep(world: SimWorld) -> None:
    p, d = prompt(1, v2=True), decoder(2, v2=True)
    p_id = p.link("link", {1: 0, 2: 1}, RANK_TABLE)
    d_id = d.link("link", {1: 0, 2: 1}, RANK_TABLE)
    assert (p_id, d_id) == (1, 1)
    assert _poll(d, d_id) == [RegisterMemStatus.PREPARING, RegisterMemStatus.OK]
    assert p.query_register_mem_status(p_id) is RegisterMemStatus.OK
    assert world.is_linked(1, 2)
    d.unlink(d_id)
    p.unlink(p_id)
    assert world.links() == []


def test_a_peer_that_never_comes_leaves_the_comm_failed_after_link_total_time(world: SimWorld) -> None:
    d = decoder(2, v2=True, **{"llm.LinkTotalTime": "3"})
    comm_id = d.link("lonely", {1: 0, 2: 1}, RANK_TABLE)
    seen = _poll(d, comm_id)
    assert seen[-1] is RegisterMemStatus.FAILED
    assert world.now() >= 3.0


def test_members_that_disagree_on_rank_info_leave_it_failed(world: SimWorld) -> None:
    p, d = prompt(1, v2=True), decoder(2, v2=True)
    p.link("c", {1: 0, 2: 1}, RANK_TABLE)
    comm_id = d.link("c", {2: 0, 1: 1}, RANK_TABLE)
    assert d.query_register_mem_status(comm_id) is RegisterMemStatus.FAILED


def test_unknown_comm_id_is_not_yet_link(world: SimWorld) -> None:
    d = decoder(2, v2=True)
    for call in (lambda: d.unlink(42), lambda: d.query_register_mem_status(42)):
        with pytest.raises(LLMException) as exc:
            call()
        assert exc.value.status_code is S.LLM_NOT_YET_LINK


def test_link_in_kv_cache_manager_mode_is_param_invalid(world: SimWorld) -> None:
    with pytest.raises(LLMException, match="link") as exc:
        decoder(2).link("c", {1: 0, 2: 1}, RANK_TABLE)
    assert exc.value.status_code is S.LLM_PARAM_INVALID


@pytest.mark.parametrize(
    ("name", "ranks", "error"),
    [
        (None, {1: 0, 2: 1}, TypeError),
        ("", {1: 0, 2: 1}, LLMException),
        ("x" * 128, {1: 0, 2: 1}, LLMException),
        ("c", {1: 0}, LLMException),
        ("c", {1: 1, 2: 0}, LLMException),
        ("c", {1: 0, 2: 1, 3: 2, 4: 3, 5: 4}, LLMException),
        ("c", {1: "0"}, TypeError),
        ("c", {-1: 0, 2: 1}, ValueError),
        ("c", {1: 0, 2: 2**32}, ValueError),
    ],
)
def test_link_arguments_are_checked(world: SimWorld, name: object, ranks: object, error: type) -> None:
    with pytest.raises(error):
        decoder(2, v2=True).link(name, ranks, RANK_TABLE)  # type: ignore[arg-type]


def test_caller_missing_from_rank_info_is_param_invalid(world: SimWorld) -> None:
    with pytest.raises(LLMException) as exc:
        decoder(2, v2=True).link("c", {1: 0, 3: 1}, RANK_TABLE)
    assert exc.value.status_code is S.LLM_PARAM_INVALID


def test_unparsable_rank_table_is_link_failed(world: SimWorld) -> None:
    with pytest.raises(LLMException) as exc:
        decoder(2, v2=True).link("c", {1: 0, 2: 1}, "not json")
    assert exc.value.status_code is S.LLM_LINK_FAILED


def _table_without(field: str, **changes: object) -> str:
    table = json.loads(RANK_TABLE)
    table.pop(field, None)
    table.update(changes)
    return json.dumps(table)


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (_table_without("status"), 'no "status"'),
        (_table_without("status", status=1), '"status" is not a string'),
        (_table_without("version"), 'no "version"'),
        (_table_without("version", version="2.0"), "'2.0' is not supported"),
        (_table_without("server_list"), 'no "server_list"'),
        (_table_without("server_list", server_list=[]), '"server_list" is empty'),
        ("[1, 2]", "not a JSON object"),
    ],
    ids=["no-status", "status-not-str", "no-version", "unknown-version", "no-server-list", "empty", "array"],
)
def test_rank_table_hccl_refuses_is_link_failed_naming_the_field(
    world: SimWorld, table: str, message: str
) -> None:
    d = decoder(2, v2=True)
    with pytest.raises(LLMException, match=message) as exc:
        d.link("c", {1: 0, 2: 1}, table)
    assert exc.value.status_code is S.LLM_LINK_FAILED
    assert world.comms._by_id.get(2, {}) == {}


@pytest.mark.parametrize("version", ["1.0", "1.2"])
def test_rank_table_with_status_version_and_servers_is_accepted(world: SimWorld, version: str) -> None:
    d = decoder(2, v2=True)
    assert d.link("c", {1: 0, 2: 1}, _table_without("version", version=version)) == 1


def test_switch_role_with_a_comm_link_is_exist_link(world: SimWorld) -> None:
    from datadist_sim.llm_datadist.configs import LLMRole

    p, d = prompt(1, v2=True), decoder(2, v2=True)
    p.link("c", {1: 0, 2: 1}, RANK_TABLE)
    d.link("c", {1: 0, 2: 1}, RANK_TABLE)
    with pytest.raises(LLMException) as exc:
        d.switch_role(LLMRole.PROMPT, {"llm.listenIpInfo": "10.0.0.2:1"})
    assert exc.value.status_code is S.LLM_EXIST_LINK


def test_a_member_that_slept_and_woke_links_anew_with_the_member_that_stayed(world: SimWorld) -> None:
    """A rank-table communicator does not survive a member's ``finalize``: the woken member's ``link``
    opens a new one, PREPARING until the other member leaves its old one and joins, and both are
    then linked again. Nothing of the old communicator is reused."""
    p, d = prompt(1, v2=True), decoder(2, v2=True)
    p.link("link", {1: 0, 2: 1}, RANK_TABLE)
    old = d.link("link", {1: 0, 2: 1}, RANK_TABLE)
    assert _poll(d, old)[-1] is RegisterMemStatus.OK
    p.finalize()
    p.init({"ge.exec.deviceId": "0", "llm.EnableCacheManager": "1", "llm.listenIpInfo": "192.168.1.1:26000"})
    assert not world.is_linked(1, 2)
    p_new = p.link("link", {1: 0, 2: 1}, RANK_TABLE)
    assert p.query_register_mem_status(p_new) is RegisterMemStatus.PREPARING  # the other member is not in
    d.unlink(old)
    d_new = d.link("link", {1: 0, 2: 1}, RANK_TABLE)
    assert _poll(d, d_new)[-1] is RegisterMemStatus.OK
    assert _poll(p, p_new)[-1] is RegisterMemStatus.OK
    assert world.is_linked(1, 2)
    d.unlink(d_new)
    p.unlink(p_new)
    assert world.links() == []


def _own_device_first(own_rank: int, *, indent: int = 0, **device_changes: str) -> str:
    """The table a connector on one host builds for one member: its own server and device listed first,
    written with its own formatting; ``device_changes`` alter the other member's device."""
    table = json.loads(RANK_TABLE)
    servers = table["server_list"]
    servers.sort(key=lambda server: server["device"][0]["rank_id"] != str(own_rank))
    servers[1]["device"][0].update(device_changes)
    return json.dumps({k: table[k] for k in reversed(list(table))}, indent=indent or None)


def test_members_whose_tables_list_the_same_ranks_in_their_own_order_link(world: SimWorld) -> None:
    """HCCL reads each member's own table and sorts the ranks by rank id; hixl compares no strings
    (docs/vendor_facts.md, "Connectors and defects"). Tables that differ only in order and layout
    describe one communicator."""
    p, d = prompt(1, v2=True), decoder(2, v2=True)
    p_id = p.link("own-first", {1: 0, 2: 1}, _own_device_first(0))
    d_id = d.link("own-first", {1: 0, 2: 1}, _own_device_first(1, indent=2))
    assert _poll(d, d_id)[-1] is RegisterMemStatus.OK
    assert p.query_register_mem_status(p_id) is RegisterMemStatus.OK
    assert world.is_linked(1, 2)


@pytest.mark.parametrize(
    "change", [{"device_ip": "10.0.0.9"}, {"device_id": "3"}, {"rank_id": "5"}], ids=lambda c: next(iter(c))
)
def test_members_whose_tables_place_a_rank_differently_leave_it_failed(
    world: SimWorld, change: dict[str, str]
) -> None:
    p, d = prompt(1, v2=True), decoder(2, v2=True)
    p.link("c", {1: 0, 2: 1}, RANK_TABLE)
    comm_id = d.link("c", {1: 0, 2: 1}, _own_device_first(1, **change))
    assert d.query_register_mem_status(comm_id) is RegisterMemStatus.FAILED
    assert not world.is_linked(1, 2)
