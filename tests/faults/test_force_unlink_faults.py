"""Fault rules on a ``force=True`` ``unlink_clusters``: the force form meets only the codes it can give in
the caller's mode (``FORCE_SPECS`` in ``faults/code_rows.py``); a rule with any other code is refused on
it (not fired, said in the trace and by ``FaultPlan.refused``, naming force) while it still fires on a
plain unlink. Each test names the vendor condition it checks (hicann/hixl at 9ed283b, GE = hicann/ge at
ffdcbc9f7)."""

from __future__ import annotations

from tests.data.conftest import D_ID, P_ID, pair
from tests.fabric.conftest import DECODE_IP, PROMPT_IP, info
from tests.fabric.test_hixl_backend import hixl_pair, to_prompt

from datadist_sim import Fault, SimWorld
from datadist_sim._world.trace import TraceEvent
from datadist_sim.explore.schedule import Baseline, systematic
from datadist_sim.explore.schedule import codes_for as schedule_codes
from datadist_sim.faults import engine_codes
from datadist_sim.llm_datadist.status import LLMStatusCode as S


def _cluster() -> object:
    return info(P_ID, 26000, remote_ip=PROMPT_IP, local_ip=DECODE_IP)


def _refused_in_trace(world: SimWorld) -> list[str]:
    return [e.detail for e in world.trace if e.outcome == "refused"]


# -- v2, default backend ----------------------------------------------------------------------------


def test_a_force_unlink_v2_refuses_llm_timeout_as_it_connects_to_nobody(world: SimWorld) -> None:
    # link_msg_handler.cc:426-439: only a non-force unlink connects to the peer, the one step that can
    # time out (msg_handler_plugin.cc:71-72); a force unlink cannot give LLM_TIMEOUT.
    _, d = pair(v2=True)
    rule = world.faults.add(Fault.fail(S.LLM_TIMEOUT, op="unlink_clusters"))
    assert d.unlink_clusters([_cluster()], 1000, force=True) == (S.LLM_SUCCESS, [S.LLM_SUCCESS])
    assert world.faults.fired(rule) == 0
    assert world.faults.refused(rule) == [
        "unlink_clusters with force=True cannot give LLM_TIMEOUT in v2 mode; it gives LLM_UNLINK_FAILED, "
        "LLM_FAILED, LLM_PARAM_INVALID (v2)"
    ]
    said = _refused_in_trace(world)
    assert len(said) == 1
    assert "force=True" in said[0]
    assert world.links() == [(P_ID, D_ID)]  # only this end went, as a force unlink does


def test_the_same_rule_still_fires_on_a_plain_unlink_v2(world: SimWorld) -> None:
    # link_msg_handler.cc:430 with msg_handler_plugin.cc:71-72: the plain unlink's connect can time out.
    _, d = pair(v2=True)
    rule = world.faults.add(Fault.fail(S.LLM_TIMEOUT, op="unlink_clusters", first=1))
    assert d.unlink_clusters([_cluster()], 1000) == (S.LLM_TIMEOUT, [S.LLM_TIMEOUT])
    assert world.faults.fired(rule) == 1
    assert world.faults.refused(rule) == []
    assert world.is_linked(D_ID, P_ID)


def test_a_force_unlink_v2_can_still_fail_its_entity_teardown_and_drops_its_end(world: SimWorld) -> None:
    # comm_entity.cc:282-303: the entity's stream abort or destroy failing is LLM_UNLINK_FAILED, returned by
    # DestroyEntity (comm_entity_manager.cc:48-49), which has destroyed the entity anyway (:50-56).
    _, d = pair(v2=True)
    rule = world.faults.add(Fault.fail(S.LLM_UNLINK_FAILED, op="unlink_clusters", first=1))
    assert d.unlink_clusters([_cluster()], 1000, force=True) == (S.LLM_UNLINK_FAILED, [S.LLM_UNLINK_FAILED])
    assert world.faults.fired(rule) == 1
    assert world.faults.refused(rule) == []
    assert world.links() == [(P_ID, D_ID)]
    assert d.unlink_clusters([_cluster()], 1000, force=True) == (S.LLM_SUCCESS, [S.LLM_SUCCESS])


def test_any_code_injects_a_code_the_force_unlink_cannot_give_v2(world: SimWorld) -> None:
    # any_code=True is outside the engine's behaviour by the user's choice (engine_codes.OUTSIDE).
    _, d = pair(v2=True)
    rule = world.faults.add(Fault.fail(S.LLM_TIMEOUT, op="unlink_clusters", first=1, any_code=True))
    assert d.unlink_clusters([_cluster()], 1000, force=True) == (S.LLM_TIMEOUT, [S.LLM_TIMEOUT])
    assert world.faults.fired(rule) == 1
    assert world.faults.refused(rule) == []
    assert world.is_linked(D_ID, P_ID)


# -- KvCacheManager mode ----------------------------------------------------------------------------


def test_a_force_unlink_in_kv_mode_refuses_notify_prompt_unlink_failed(world: SimWorld) -> None:
    # GE udf link_req_handler.cpp:460-464: a force unlink skips NotifyPromptUnlink, the only source of
    # kFsmNotifyPromptUnlinkFailed (:413-454, and :540-546 for an unlink still telling the Prompt).
    _, d = pair(v2=False)
    rule = world.faults.add(Fault.fail(S.LLM_NOTIFY_PROMPT_UNLINK_FAILED, op="unlink_clusters"))
    assert d.unlink_clusters([_cluster()], 1000, force=True) == (S.LLM_SUCCESS, [S.LLM_SUCCESS])
    assert world.faults.fired(rule) == 0
    (reason,) = world.faults.refused(rule)
    assert reason.startswith(
        "unlink_clusters with force=True cannot give LLM_NOTIFY_PROMPT_UNLINK_FAILED in v2-kv mode"
    )
    assert any("force=True" in said for said in _refused_in_trace(world))
    assert world.links() == [(P_ID, D_ID)]


def test_the_same_rule_still_fires_on_a_plain_unlink_in_kv_mode(world: SimWorld) -> None:
    # GE udf link_req_handler.cpp:413-454: a plain unlink tells the Prompt, which can fail.
    _, d = pair(v2=False)
    rule = world.faults.add(Fault.fail(S.LLM_NOTIFY_PROMPT_UNLINK_FAILED, op="unlink_clusters", first=1))
    assert d.unlink_clusters([_cluster()], 1000) == (S.LLM_UNLINK_FAILED, [S.LLM_NOTIFY_PROMPT_UNLINK_FAILED])
    assert world.faults.fired(rule) == 1
    assert world.faults.refused(rule) == []


def test_a_force_unlink_in_kv_mode_can_fail_closing_its_conn_after_the_entry_went(world: SimWorld) -> None:
    # GE udf link_req_handler.cpp:511-512, 518-523: the entry is deleted, then closing the HCCL conn fails
    # kFsmUnlinkFailed; GE link_manager.cc:336-339 makes the overall code LLM_UNLINK_FAILED.
    _, d = pair(v2=False)
    rule = world.faults.add(Fault.fail(S.LLM_UNLINK_FAILED, op="unlink_clusters", first=1))
    assert d.unlink_clusters([_cluster()], 1000, force=True) == (S.LLM_UNLINK_FAILED, [S.LLM_UNLINK_FAILED])
    assert world.faults.fired(rule) == 1
    assert world.links() == [(P_ID, D_ID)]


def test_a_force_unlink_in_kv_mode_still_waits_for_its_flow_and_can_time_out(world: SimWorld) -> None:
    # GE link_manager.cc:316-331: the host's feed and fetch of the unlink run out their timeout
    # (LLM_WAIT_PROC_TIMEOUT, :327, :235-238) whatever force is.
    _, d = pair(v2=False)
    rule = world.faults.add(Fault.timeout(op="unlink_clusters", first=1))
    assert d.unlink_clusters([_cluster()], 1000, force=True) == (
        S.LLM_UNLINK_FAILED,
        [S.LLM_WAIT_PROCESS_TIMEOUT],
    )
    assert world.faults.fired(rule) == 1
    assert world.is_linked(D_ID, P_ID)


# -- v2, hixl backend -------------------------------------------------------------------------------


def test_a_force_unlink_on_the_hixl_backend_meets_the_plain_unlinks_codes(world: SimWorld) -> None:
    # hixl_transfer_engine.cc:193-195: force is ignored; the entity's teardown (hixl_entity.cc:76-82,
    # called with force false by comm_entity_manager.cc:48) gives hixl codes, never LLM_UNLINK_FAILED.
    _, d = hixl_pair()
    assert d.link_clusters([to_prompt()], 1000) == (S.LLM_SUCCESS, [S.LLM_SUCCESS])
    refused = world.faults.add(Fault.fail(S.LLM_UNLINK_FAILED, op="unlink_clusters"))
    failed = world.faults.add(Fault.fail(S.LLM_FAILED, op="unlink_clusters", first=1))
    assert d.unlink_clusters([to_prompt()], 1000, force=True) == (S.LLM_FAILED, [S.LLM_FAILED])
    assert world.faults.fired(failed) == 1
    assert world.faults.fired(refused) == 0
    assert world.faults.refused(refused) == [
        "unlink_clusters with force=True cannot give LLM_UNLINK_FAILED in hixl mode; it gives LLM_FAILED, "
        "LLM_PARAM_INVALID (hixl)"
    ]
    # LLM_FAILED is the entity's Finalize failing, and the entity goes all the same
    # (comm_entity_manager.cc:48-56); unlinking it again finds none, a success (:58-61).
    assert world.links() == []
    assert d.unlink_clusters([to_prompt()], 1000, force=True) == (S.LLM_SUCCESS, [S.LLM_SUCCESS])


# -- the table --------------------------------------------------------------------------------------


def test_each_force_row_gives_only_codes_of_the_plain_row() -> None:
    # A rule is drawn (explore, strategies) from the plain row and matches both forms, so the force form
    # must give a subset; the codes above are the ones the sources above take away.
    for op in engine_codes.FORCE_OPS:
        for mode in engine_codes.modes():
            plain, forced = engine_codes.row(op, mode), engine_codes.row(op, mode, force=True)
            assert set(forced.codes) <= set(plain.codes), (op, mode)
            assert forced.args_only <= plain.args_only, (op, mode)
    gone = {
        mode.value: set(engine_codes.codes_for("unlink_clusters", mode))
        - engine_codes.codes_for("unlink_clusters", mode, force=True)
        for mode in engine_codes.modes()
    }
    assert gone == {
        "v2": {S.LLM_TIMEOUT},
        "hixl": set(),
        "v2-kv": {S.LLM_NOTIFY_PROMPT_UNLINK_FAILED},
        "v1": {S.LLM_NOTIFY_PROMPT_UNLINK_FAILED},
        "hixl-engine": set(),
    }
    assert engine_codes.timeout_code("unlink_clusters", "v2", force=True) is None
    assert engine_codes.timeout_code("unlink_clusters", "v1", force=True) is S.LLM_WAIT_PROCESS_TIMEOUT
    # an operation with no force form answers with its plain row
    assert engine_codes.row("pull_cache", "v2", force=True) == engine_codes.row("pull_cache", "v2")


def test_explore_draws_at_a_force_unlink_only_what_the_force_form_can_give() -> None:
    # link_msg_handler.cc:426-439: a v2 force unlink contacts no peer, so it has no timeout to run out and
    # never gives LLM_TIMEOUT; explore reads force from the traced arguments, by name or by position.
    events = [
        TraceEvent(0.0, D_ID, "node.init", "ok", detail="decoder v2"),
        TraceEvent(
            0.1, D_ID, "unlink_clusters", "LLM_SUCCESS", args="[LLMClusterInfo(remote=1)], 1000", kind="call"
        ),
        TraceEvent(
            0.2,
            D_ID,
            "unlink_clusters",
            "LLM_SUCCESS",
            args="[LLMClusterInfo(remote=1)], force=True",
            kind="call",
        ),
        TraceEvent(
            0.3,
            D_ID,
            "unlink_clusters",
            "LLM_SUCCESS",
            args="[LLMClusterInfo(remote=1)], 1000, True",
            kind="call",
        ),
    ]
    base = Baseline.from_trace(events, 0.3)
    assert [site.force for site in base.calls] == [False, True, True]
    timeouts = [s[0]["nth"] for s in systematic(base, ("timeout",)) if len(s) == 1]
    assert timeouts == [1]
    assert "LLM_TIMEOUT" in schedule_codes("unlink_clusters", engine_codes.EngineMode.V2)
    assert "LLM_TIMEOUT" not in schedule_codes("unlink_clusters", engine_codes.EngineMode.V2, force=True)
