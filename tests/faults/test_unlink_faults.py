"""Fault rules on ``unlink_clusters``: they fire on each remote cluster's entry, with the codes the
unlink can give in the caller's mode (``faults/code_rows.py``), and leave the link as it was.

The rows: v2 ``LLM_UNLINK_FAILED`` / ``LLM_TIMEOUT`` when the connect to the peer fails or times out,
before the entity is destroyed (hixl ``link_msg_handler.cc:426-431, 444``, ``msg_handler_plugin.cc:71-72``);
KvCacheManager mode per-cluster codes and ``LLM_UNLINK_FAILED`` overall (GE ``link_manager.cc:327-339``);
the hixl backend destroys its own entity and contacts nobody (``hixl_transfer_engine.cc:186-191``).
"""

from __future__ import annotations

from tests.data.conftest import D_ID, P_ID, pair
from tests.fabric.conftest import DECODE_IP, PROMPT_IP, info
from tests.fabric.test_hixl_backend import hixl_pair, to_prompt

from datadist_sim import Fault, SimWorld
from datadist_sim.llm_datadist.status import LLMStatusCode as S


def _cluster() -> object:
    return info(P_ID, 26000, remote_ip=PROMPT_IP, local_ip=DECODE_IP)


def test_a_fail_rule_on_unlink_gives_its_code_and_keeps_the_link_v2(world: SimWorld) -> None:
    _, d = pair(v2=True)
    rule = world.faults.add(Fault.fail(S.LLM_UNLINK_FAILED, op="unlink_clusters", first=1))
    assert d.unlink_clusters([_cluster()], 1000) == (S.LLM_UNLINK_FAILED, [S.LLM_UNLINK_FAILED])
    assert world.faults.fired(rule) == 1
    assert world.is_linked(D_ID, P_ID)
    assert d.unlink_clusters([_cluster()], 1000) == (S.LLM_SUCCESS, [S.LLM_SUCCESS])
    assert not world.is_linked(D_ID, P_ID)


def test_a_delay_on_unlink_lengthens_it_and_past_the_timeout_is_llm_timeout_v2(world: SimWorld) -> None:
    _, d = pair(v2=True)
    world.faults.add(Fault.delay(0.5, op="unlink_clusters", first=1))
    before = world.now()
    assert d.unlink_clusters([_cluster()], 200) == (S.LLM_TIMEOUT, [S.LLM_TIMEOUT])
    assert world.now() - before >= 0.2
    assert world.is_linked(D_ID, P_ID)
    world.faults.add(Fault.delay(0.5, op="unlink_clusters", first=1))
    before = world.now()
    assert d.unlink_clusters([_cluster()], 1000) == (S.LLM_SUCCESS, [S.LLM_SUCCESS])
    assert world.now() - before >= 0.5
    assert not world.is_linked(D_ID, P_ID)


def test_a_timeout_rule_on_unlink_times_it_out_but_not_a_force_unlink_v2(world: SimWorld) -> None:
    _, d = pair(v2=True)
    rule = world.faults.add(Fault.timeout(op="unlink_clusters"))
    assert d.unlink_clusters([_cluster()], 1000) == (S.LLM_TIMEOUT, [S.LLM_TIMEOUT])
    assert world.faults.fired(rule) == 1
    assert world.is_linked(D_ID, P_ID)
    # a force unlink contacts no peer: there is no wait to run out
    assert d.unlink_clusters([_cluster()], 1000, force=True) == (S.LLM_SUCCESS, [S.LLM_SUCCESS])
    assert world.faults.fired(rule) == 1


def test_unlink_rules_in_kv_cache_manager_mode_give_its_codes_per_cluster(world: SimWorld) -> None:
    _, d = pair(v2=False)
    world.faults.add(Fault.fail(S.LLM_NOTIFY_PROMPT_UNLINK_FAILED, op="unlink_clusters", first=1))
    assert d.unlink_clusters([_cluster()], 1000) == (
        S.LLM_UNLINK_FAILED,
        [S.LLM_NOTIFY_PROMPT_UNLINK_FAILED],
    )
    assert world.is_linked(D_ID, P_ID)
    world.faults.add(Fault.timeout(op="unlink_clusters", first=1))
    assert d.unlink_clusters([_cluster()], 1000) == (S.LLM_UNLINK_FAILED, [S.LLM_WAIT_PROCESS_TIMEOUT])
    assert world.is_linked(D_ID, P_ID)
    assert d.unlink_clusters([_cluster()], 1000) == (S.LLM_SUCCESS, [S.LLM_SUCCESS])


def test_a_hixl_backend_unlink_meets_only_the_codes_its_engine_gives(world: SimWorld) -> None:
    _, d = hixl_pair()
    assert d.link_clusters([to_prompt()], 1000) == (S.LLM_SUCCESS, [S.LLM_SUCCESS])
    refused = world.faults.add(Fault.fail(S.LLM_UNLINK_FAILED, op="unlink_clusters"))
    failed = world.faults.add(Fault.fail(S.LLM_FAILED, op="unlink_clusters", first=1))
    assert d.unlink_clusters([to_prompt()], 1000) == (S.LLM_FAILED, [S.LLM_FAILED])
    assert world.faults.fired(refused) == 0
    assert world.faults.refused(refused)
    assert world.faults.fired(failed) == 1
    # LLM_FAILED is the entity's Finalize failing, and the entity goes all the same
    # (comm_entity_manager.cc:48-56); unlinking it again finds none, a success (:58-61).
    assert world.links() == []
    assert d.unlink_clusters([to_prompt()], 1000) == (S.LLM_SUCCESS, [S.LLM_SUCCESS])


def test_a_hixl_backend_unlink_never_gives_llm_timeout(world: SimWorld) -> None:
    # The engine's disconnect has no path to hixl TIMEOUT (docs/vendor_facts.md, "hixl-backend unlink
    # against a hung peer"): a rule asking for it is refused, and a timeout rule does not match.
    _, d = hixl_pair()
    assert d.link_clusters([to_prompt()], 1000) == (S.LLM_SUCCESS, [S.LLM_SUCCESS])
    refused = world.faults.add(Fault.fail(S.LLM_TIMEOUT, op="unlink_clusters"))
    timed = world.faults.add(Fault.timeout(op="unlink_clusters"))
    assert d.unlink_clusters([to_prompt()], 1000) == (S.LLM_SUCCESS, [S.LLM_SUCCESS])
    assert world.faults.fired(refused) == 0
    assert world.faults.refused(refused)
    assert world.faults.fired(timed) == 0
    assert world.links() == []


def test_a_world_rule_watching_unlink_fires_at_the_unlink(world: SimWorld) -> None:
    _, d = pair(v2=True)
    rule = world.faults.add(Fault.kill(P_ID, op="unlink_clusters"))
    assert d.unlink_clusters([_cluster()], 1000) == (S.LLM_UNLINK_FAILED, [S.LLM_UNLINK_FAILED])
    assert world.faults.fired(rule) == 1
    assert P_ID in world.killed
