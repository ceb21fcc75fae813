"""The fault plan: what each rule matches, when it fires, what it does, and that it heals."""

from __future__ import annotations

from typing import Callable, List, Tuple

import numpy as np
import pytest
from tests.data.conftest import D_ID, P_ID, make, pair, v1_options
from tests.data.test_cache_manager_v2 import desc, fill, views
from tests.fabric.conftest import DECODE_IP, PROMPT_IP, info

from datadist_sim import Fault, SimWorld, tensor_views
from datadist_sim._status_v1 import LLM_ERRORS, as_code
from datadist_sim.llm_datadist.configs import LLMRole
from datadist_sim.llm_datadist.status import LLMStatusCode as S
from datadist_sim.llm_datadist.v2.llm_datadist import LLMDataDist
from datadist_sim.llm_datadist.v2.llm_types import Cache, CacheKey


def code_of(call: Callable[[], object]) -> S:
    """The status code a call ends with: its LLMException's (either package's, read by name), or
    LLM_SUCCESS."""
    try:
        call()
    except LLM_ERRORS as exc:
        return as_code(exc.status_code)
    return S.LLM_SUCCESS


def _linked_v2() -> Tuple[LLMDataDist, LLMDataDist]:
    return pair(v2=True)


def _source(p: LLMDataDist, world: SimWorld, req_ids: range = range(1, 2)) -> Cache:
    cache = p.cache_manager.allocate_cache(desc(batch=len(req_ids)), [CacheKey(P_ID, r) for r in req_ids])
    fill(world, cache)
    return cache


def _pull(d: LLMDataDist, dst: Cache, req_id: int = 1) -> S:
    return code_of(lambda: d.cache_manager.pull_cache(CacheKey(P_ID, req_id), dst))


# -- which calls a rule fires on -----------------------------------------------------------------


def _codes_under(world: SimWorld, rule: Fault, calls: int) -> List[str]:
    """Pull ``calls`` keys one by one under ``rule``; "ok" for a pull that worked, else the code name."""
    p, d = _linked_v2()
    _source(p, world, range(1, calls + 1))
    dst = d.cache_manager.allocate_cache(desc(batch=calls))
    world.faults.add(rule)
    out = []
    for r in range(1, calls + 1):
        code = code_of(lambda r=r: d.cache_manager.pull_cache(CacheKey(P_ID, r), dst, batch_index=r - 1))  # type: ignore[misc]
        out.append("ok" if code is S.LLM_SUCCESS else code.name)
    return out


def test_first_n_fails_the_first_n_calls_only(world: SimWorld) -> None:
    rule = Fault.fail(S.LLM_NOT_YET_LINK, op="pull_cache", first=2)
    assert _codes_under(world, rule, 4) == ["LLM_NOT_YET_LINK", "LLM_NOT_YET_LINK", "ok", "ok"]
    assert world.faults.fired(rule) == 2


def test_after_n_fails_every_call_after_the_nth(world: SimWorld) -> None:
    rule = Fault.fail("LLM_TIMEOUT", op="pull_cache", after=2)
    assert _codes_under(world, rule, 4) == ["ok", "ok", "LLM_TIMEOUT", "LLM_TIMEOUT"]


def test_nth_fails_only_that_call(world: SimWorld) -> None:
    assert _codes_under(world, Fault.fail("NOT_YET_LINK", op="pull_cache", nth=3), 4) == [
        "ok",
        "ok",
        "LLM_NOT_YET_LINK",
        "ok",
    ]


def test_sequence_gives_outcomes_call_by_call(world: SimWorld) -> None:
    rule = Fault.fail(S.LLM_NOT_YET_LINK, op="pull_cache", sequence=(True, True, False))
    assert _codes_under(world, rule, 4) == ["LLM_NOT_YET_LINK", "LLM_NOT_YET_LINK", "ok", "ok"]


def test_rule_for_another_op_or_cluster_does_not_fire(world: SimWorld) -> None:
    other_op = Fault.fail(S.LLM_NOT_YET_LINK, op="pull_blocks")
    assert _codes_under(world, other_op, 2) == ["ok", "ok"]
    assert world.faults.fired(other_op) == 0


def test_rule_matches_remote_and_req_id(world: SimWorld) -> None:
    rule = Fault.fail(S.LLM_NOT_YET_LINK, op="pull_cache", remote=P_ID, req_id=2)
    assert _codes_under(world, rule, 3) == ["ok", "LLM_NOT_YET_LINK", "ok"]


def test_window_of_simulated_time(world: SimWorld) -> None:
    p, d = _linked_v2()
    _source(p, world, range(1, 4))
    dst = d.cache_manager.allocate_cache(desc(batch=3))
    start = world.now()
    world.faults.add(Fault.fail(S.LLM_NOT_YET_LINK, op="pull_cache", start_s=start + 1.0, end_s=start + 2.0))
    assert _pull(d, dst, 1) is S.LLM_SUCCESS
    world.elapse(1.5)
    assert (
        code_of(lambda: d.cache_manager.pull_cache(CacheKey(P_ID, 2), dst, batch_index=1))
        is S.LLM_NOT_YET_LINK
    )
    world.elapse(1.0)
    assert code_of(lambda: d.cache_manager.pull_cache(CacheKey(P_ID, 2), dst, batch_index=1)) is S.LLM_SUCCESS


def _pattern(seed: int) -> List[str]:
    world = SimWorld(seed=seed)
    with world.activate():
        return _codes_under(world, Fault.fail(S.LLM_NOT_YET_LINK, op="pull_cache", probability=0.5), 24)


def test_probability_is_seeded() -> None:
    first, again, other = _pattern(7), _pattern(7), _pattern(8)
    assert first == again
    assert first != other
    assert 0 < first.count("LLM_NOT_YET_LINK") < 24


# -- what call actions do ------------------------------------------------------------------------


def test_a_failed_pull_leaves_the_destination_and_the_key(world: SimWorld) -> None:
    p, d = _linked_v2()
    _source(p, world)
    dst = d.cache_manager.allocate_cache(desc(batch=1))
    with world.faults.injected(Fault.fail(S.LLM_NOT_YET_LINK, op="pull_cache")):
        assert _pull(d, dst) is S.LLM_NOT_YET_LINK
    assert not any(v.any() for v in views(world, dst))
    assert _pull(d, dst) is S.LLM_SUCCESS


def test_delay_adds_simulated_time(world: SimWorld) -> None:
    p, d = _linked_v2()
    _source(p, world, range(1, 3))
    dst = d.cache_manager.allocate_cache(desc(batch=2))
    before = world.now()
    assert _pull(d, dst, 1) is S.LLM_SUCCESS
    plain = world.now() - before
    world.faults.add(Fault.delay(0.25, op="pull_cache"))
    before = world.now()
    assert code_of(lambda: d.cache_manager.pull_cache(CacheKey(P_ID, 2), dst, batch_index=1)) is S.LLM_SUCCESS
    assert world.now() - before == pytest.approx(plain + 0.25)


@pytest.mark.parametrize(("v2", "code"), [(True, S.LLM_TIMEOUT), (False, S.LLM_WAIT_PROCESS_TIMEOUT)])
def test_delay_past_sync_kv_timeout_times_out_and_breaks_the_link(world: SimWorld, v2: bool, code: S) -> None:
    p, d = pair(v2=v2)
    pm = p.cache_manager if v2 else p.kv_cache_manager
    dm = d.cache_manager if v2 else d.kv_cache_manager
    src = pm.allocate_cache(desc(batch=1), [CacheKey(P_ID, 1)])
    for view in tensor_views(src):
        view[...] = 1
    dst = dm.allocate_cache(desc(batch=1))
    world.faults.add(Fault.delay(2.0, op="pull_cache", first=1))
    before = world.now()
    assert code_of(lambda: dm.pull_cache(CacheKey(P_ID, 1), dst)) is code
    assert world.now() - before == pytest.approx(1.0)  # sync_kv_timeout, the default 1000 ms
    # v2: the link is gone; v1 keeps the entry and the next pull goes unanswered (vendor_facts.md)
    later = S.LLM_NOT_YET_LINK if v2 else S.LLM_WAIT_PROCESS_TIMEOUT
    assert code_of(lambda: dm.pull_cache(CacheKey(P_ID, 1), dst)) is later
    assert not any(v.any() for v in tensor_views(dst))


def _relink(d: LLMDataDist) -> None:
    cluster = info(P_ID, 26000, remote_ip=PROMPT_IP, local_ip=DECODE_IP)
    d.unlink_clusters([cluster], force=True)
    ret, _ = d.link_clusters([cluster], 5000)
    assert ret is S.LLM_SUCCESS


def test_timeout_that_landed_delivered_the_bytes_and_consumed_the_key(world: SimWorld) -> None:
    p, d = _linked_v2()
    src = _source(p, world)
    dst = d.cache_manager.allocate_cache(desc(batch=1))
    world.faults.add(Fault.timeout(landed=True, op="pull_cache", first=1))
    assert _pull(d, dst) is S.LLM_TIMEOUT
    assert all(np.array_equal(a, b) for a, b in zip(views(world, src), views(world, dst)))
    _relink(d)
    assert _pull(d, dst) is S.LLM_KV_CACHE_NOT_EXIST


def test_timeout_that_did_not_land_moved_nothing_and_kept_the_key(world: SimWorld) -> None:
    p, d = _linked_v2()
    _source(p, world)
    dst = d.cache_manager.allocate_cache(desc(batch=1))
    world.faults.add(Fault.timeout(landed=False, op="pull_cache", first=1))
    assert _pull(d, dst) is S.LLM_TIMEOUT
    assert not any(v.any() for v in views(world, dst))
    _relink(d)
    assert _pull(d, dst) is S.LLM_SUCCESS


def test_indeterminate_timeout_is_decided_by_the_seed() -> None:
    def landed(seed: int) -> List[bool]:
        world = SimWorld(seed=seed)
        out = []
        with world.activate():
            p, d = _linked_v2()
            _source(p, world, range(1, 9))
            world.faults.add(Fault.timeout(landed=None, op="pull_cache"))
            for r in range(1, 9):
                dst = d.cache_manager.allocate_cache(desc(batch=1))
                code_of(lambda r=r, dst=dst: d.cache_manager.pull_cache(CacheKey(P_ID, r), dst))  # type: ignore[misc]
                out.append(bool(any(v.any() for v in views(world, dst))))
                d.cache_manager.deallocate_cache(dst)
                d.unlink_clusters([info(P_ID, 26000, remote_ip=PROMPT_IP, local_ip=DECODE_IP)], force=True)
                d.link_clusters([info(P_ID, 26000, remote_ip=PROMPT_IP, local_ip=DECODE_IP)], 5000)
        return out

    first = landed(5)
    assert first == landed(5)
    assert True in first
    assert False in first


def test_cut_link_mid_pull_keeps_old_bytes_and_fails_until_relinked(world: SimWorld) -> None:
    p, d = _linked_v2()
    _source(p, world)
    dst = d.cache_manager.allocate_cache(desc(batch=1))
    world.faults.add(Fault.cut_link(op="pull_cache", nth=1))
    assert _pull(d, dst) is S.LLM_TIMEOUT
    assert not any(v.any() for v in views(world, dst))
    assert _pull(d, dst) is S.LLM_NOT_YET_LINK
    _relink(d)
    assert _pull(d, dst) is S.LLM_SUCCESS


def test_cut_link_at_a_time_breaks_both_ends(world: SimWorld) -> None:
    p, d = _linked_v2()
    _source(p, world)
    dst = d.cache_manager.allocate_cache(desc(batch=1))
    world.faults.add(Fault.cut_link(cluster=D_ID, remote=P_ID, start_s=world.now() + 0.5))
    world.elapse(0.5)
    assert _pull(d, dst) is S.LLM_NOT_YET_LINK


def test_poison_rule_is_suspect_remote_error_then_heals(world: SimWorld) -> None:
    p, d = _linked_v2()
    _source(p, world)
    dst = d.cache_manager.allocate_cache(desc(batch=1))
    world.faults.add(Fault.poison(op="pull_cache", nth=1, heal_after_s=0.01))
    assert _pull(d, dst) is S.LLM_SUSPECT_REMOTE_ERROR
    assert world.memory.poisoned
    world.elapse(0.02)
    assert _pull(d, dst) is S.LLM_SUCCESS
    assert not world.memory.poisoned


def test_poison_on_the_callers_side_is_device_mem_error(world: SimWorld) -> None:
    p, d = _linked_v2()
    _source(p, world)
    dst = d.cache_manager.allocate_cache(desc(batch=1))
    world.faults.add(Fault.poison(side="local", op="pull_cache", nth=1))
    assert _pull(d, dst) is S.LLM_DEVICE_MEM_ERROR
    ((low, _high),) = world.memory.poisoned
    assert low in dst.tensor_addrs
    with pytest.raises(ValueError, match="side"):
        Fault.poison(side="both")


def test_door_rules_act_on_plain_calls(world: SimWorld) -> None:
    p, _ = _linked_v2()
    with world.faults.injected(Fault.fail(S.LLM_OUT_OF_MEMORY, op="allocate_cache", cluster=P_ID)):
        assert code_of(lambda: p.cache_manager.allocate_cache(desc())) is S.LLM_OUT_OF_MEMORY
    before = world.now()
    with world.faults.injected(Fault.delay(3.0, op="allocate_cache")):
        p.cache_manager.allocate_cache(desc())
    assert world.now() - before == pytest.approx(3.0)


def test_argument_errors_come_before_faults(world: SimWorld) -> None:
    p, _ = _linked_v2()
    rule = Fault.fail(S.LLM_OUT_OF_MEMORY, op="allocate_cache")
    world.faults.add(rule)
    with pytest.raises(TypeError):
        p.cache_manager.allocate_cache("not a desc")  # type: ignore[arg-type]
    assert world.faults.fired(rule) == 0


def test_link_rule_reports_its_code_for_that_cluster(world: SimWorld) -> None:
    _, d = pair(v2=True, link=False)
    world.faults.add(Fault.fail(S.LLM_LINK_FAILED, op="link_clusters", remote=P_ID, first=1))
    cluster = info(P_ID, 26000, remote_ip=PROMPT_IP, local_ip=DECODE_IP)
    assert d.link_clusters([cluster], 5000) == (S.LLM_LINK_FAILED, [S.LLM_LINK_FAILED])
    assert not world.is_linked(D_ID, P_ID)
    assert d.link_clusters([cluster], 5000) == (S.LLM_SUCCESS, [S.LLM_SUCCESS])


# -- world actions -------------------------------------------------------------------------------


def test_partition_fails_link_setup_times_out_transfers_and_heals(world: SimWorld) -> None:
    p, d = _linked_v2()
    _source(p, world)
    dst = d.cache_manager.allocate_cache(desc(batch=1))
    world.faults.add(Fault.partition(P_ID, D_ID, heal_after_s=10.0))
    assert _pull(d, dst) is S.LLM_TIMEOUT
    cluster = info(P_ID, 26000, remote_ip=PROMPT_IP, local_ip=DECODE_IP)
    d.unlink_clusters([cluster], force=True)
    assert d.link_clusters([cluster], 2000)[0] is S.LLM_LINK_FAILED
    world.elapse(10.0)
    assert d.link_clusters([cluster], 2000)[0] is S.LLM_SUCCESS
    assert _pull(d, dst) is S.LLM_SUCCESS


def test_hang_times_out_link_setup_and_v1_heartbeat(world: SimWorld) -> None:
    p = make(LLMRole.PROMPT, P_ID, v1_options(f"{PROMPT_IP}:26000"))
    d = make(LLMRole.DECODER, D_ID, v1_options())
    cluster = info(P_ID, 26000, remote_ip=PROMPT_IP, local_ip=DECODE_IP)
    assert d.link_clusters([cluster], 5000)[0] is S.LLM_SUCCESS
    rule = world.faults.add(Fault.hang(P_ID))
    assert code_of(lambda: d.check_link_status(P_ID)) is S.LLM_WAIT_PROCESS_TIMEOUT
    d.unlink_clusters([cluster], force=True)
    assert d.link_clusters([cluster], 1000) == (S.LLM_LINK_FAILED, [S.LLM_WAIT_PROCESS_TIMEOUT])
    world.faults.remove(rule)
    assert d.link_clusters([cluster], 1000)[0] is S.LLM_SUCCESS
    assert p.cluster_id == P_ID


def test_kill_reclaims_memory_and_peers_see_link_failures(world: SimWorld) -> None:
    p, d = _linked_v2()
    _source(p, world)
    dst = d.cache_manager.allocate_cache(desc(batch=1))
    held = world.memory.backed_bytes
    world.faults.add(Fault.kill(P_ID))
    assert P_ID in world.killed
    assert world.node(P_ID) is None
    assert world.memory.backed_bytes < held
    before = world.now()
    assert _pull(d, dst) is S.LLM_TIMEOUT
    assert world.now() - before == pytest.approx(1.0)
    assert _pull(d, dst) is S.LLM_NOT_YET_LINK
    assert code_of(lambda: p.cache_manager.allocate_cache(desc())) is S.LLM_FAILED
    cluster = info(P_ID, 26000, remote_ip=PROMPT_IP, local_ip=DECODE_IP)
    d.unlink_clusters([cluster], force=True)
    assert d.link_clusters([cluster], 1000)[0] is S.LLM_LINK_FAILED
    assert not any(v.any() for v in views(world, dst))


def test_kill_on_a_call_fires_during_that_call(world: SimWorld) -> None:
    p, d = _linked_v2()
    _source(p, world, range(1, 3))
    dst = d.cache_manager.allocate_cache(desc(batch=2))
    world.faults.add(Fault.kill(P_ID, op="pull_cache", nth=2))
    assert _pull(d, dst, 1) is S.LLM_SUCCESS
    assert code_of(lambda: d.cache_manager.pull_cache(CacheKey(P_ID, 2), dst, batch_index=1)) is S.LLM_TIMEOUT
    assert P_ID in world.killed


def test_cap_pool_limits_allocations_until_removed(world: SimWorld) -> None:
    p, _ = _linked_v2()
    rule = world.faults.add(Fault.cap_pool(P_ID, 0))
    assert code_of(lambda: p.cache_manager.allocate_cache(desc())) is S.LLM_OUT_OF_MEMORY
    world.faults.remove(rule)
    p.cache_manager.allocate_cache(desc())


def test_exhaust_pool_in_v1_is_device_out_of_memory_and_heals(world: SimWorld) -> None:
    p = make(LLMRole.PROMPT, P_ID, v1_options(f"{PROMPT_IP}:26000"))
    p.kv_cache_manager.allocate_cache(desc())
    world.faults.add(Fault.exhaust_pool(P_ID, heal_after_s=1.0))
    assert code_of(lambda: p.kv_cache_manager.allocate_cache(desc())) is S.LLM_DEVICE_OUT_OF_MEMORY
    world.elapse(1.0)
    p.kv_cache_manager.allocate_cache(desc())


# -- managing rules ------------------------------------------------------------------------------


def test_injected_scope_removes_its_rules(world: SimWorld) -> None:
    rule = Fault.fail(S.LLM_LINK_BUSY, op="pull_cache")
    with world.faults.injected(rule):
        assert world.faults.rules == [rule]
    assert world.faults.rules == []


def test_bad_rules_and_bad_plan_calls_are_refused(world: SimWorld) -> None:
    with pytest.raises(ValueError, match="action"):
        Fault("explode")
    with pytest.raises(ValueError, match="probability"):
        Fault.fail(S.LLM_FAILED, probability=1.5)
    with pytest.raises(ValueError, match="first"):
        Fault.fail(S.LLM_FAILED, first=-1)
    with pytest.raises(ValueError, match="unknown status code"):
        Fault.fail("LLM_NOPE")
    with pytest.raises(ValueError, match="partition"):
        Fault("partition", cluster=1)
    with pytest.raises(TypeError, match="Fault"):
        world.faults.add("fail")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not in this plan"):
        world.faults.remove(Fault.hang(1))


def test_repr_shows_what_differs_from_the_defaults() -> None:
    assert repr(Fault.fail("TIMEOUT", op="pull_cache", first=2)) == (
        "Fault.fail(code=LLM_TIMEOUT, op=('pull_cache',), first=2)"
    )
