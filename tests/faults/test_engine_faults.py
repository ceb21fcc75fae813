"""A fault rule injects only what the real engine could give the call in the caller's mode
(``faults.engine_codes``): a code no mode can give is a ValueError when the rule is made, one the
caller's mode cannot give is a ValueError when that mode is known at ``add`` and is refused (not
injected, and said) when it is known only at the call; ``any_code=True`` injects it anyway."""

from __future__ import annotations

import pytest
from tests.data.conftest import D_ID, P_ID, pair
from tests.data.test_cache_manager_v2 import desc, fill
from tests.faults.test_fault_plan import code_of

from datadist_sim import Fault, SimWorld
from datadist_sim.faults.files import rule_from_spec
from datadist_sim.llm_datadist.status import LLMStatusCode as S
from datadist_sim.llm_datadist.v2.llm_types import CacheKey

# -- when the rule is made ------------------------------------------------------------------------


def test_a_code_no_mode_gives_the_operation_is_refused_naming_what_it_gives() -> None:
    # hixl cache_manager.cc:171-212: CacheManager's allocate has no timeout; GE's gives WAIT_PROC_TIMEOUT.
    with pytest.raises(ValueError, match="allocate_cache cannot give LLM_TIMEOUT") as err:
        Fault.fail("LLM_TIMEOUT", op="allocate_cache")
    text = str(err.value)
    assert text.startswith("allocate_cache cannot give LLM_TIMEOUT in any mode; it gives LLM_OUT_OF_MEMORY")
    assert "(v2, hixl)" in text
    assert "LLM_DEVICE_OUT_OF_MEMORY" in text
    assert "any_code=True" in text


def test_query_register_mem_status_cannot_be_made_to_fail_with_llm_failed() -> None:
    # hixl comm_link_manager.cc:428-443: only LLM_NOT_YET_LINK, for an unknown comm id.
    with pytest.raises(ValueError, match="it gives LLM_NOT_YET_LINK, LLM_PARAM_INVALID \\(v2\\)"):
        Fault.fail("LLM_FAILED", op="query_register_mem_status")
    Fault.fail("LLM_NOT_YET_LINK", op="query_register_mem_status")


def test_a_timeout_of_an_operation_that_never_times_out_is_refused() -> None:
    with pytest.raises(ValueError, match="query_register_mem_status cannot time out in any mode"):
        Fault.timeout(op="query_register_mem_status")


def test_every_operation_a_rule_names_must_be_able_to_give_its_code() -> None:
    with pytest.raises(ValueError, match="link cannot give LLM_TIMEOUT in any mode"):
        Fault.fail("LLM_TIMEOUT", op=["pull_cache", "link"])


def test_any_code_lets_a_user_inject_it_anyway(world: SimWorld) -> None:
    rule = Fault.fail("LLM_TIMEOUT", op="allocate_cache", any_code=True)
    assert "any_code=True" in repr(rule)
    p, _ = pair(v2=True)
    world.faults.add(rule)
    assert code_of(lambda: p.cache_manager.allocate_cache(desc(), [CacheKey(P_ID, 1)])) is S.LLM_TIMEOUT


def test_a_scenario_file_says_any_code_as_a_rule_key() -> None:
    spec = {"action": "fail", "op": "allocate_cache", "code": "LLM_TIMEOUT", "any_code": True}
    assert rule_from_spec(spec).any_code is True
    with pytest.raises(ValueError, match="cannot give LLM_TIMEOUT"):
        rule_from_spec({k: v for k, v in spec.items() if k != "any_code"})


# -- when the caller's mode is known ------------------------------------------------------------------


def test_a_rule_naming_a_caller_already_up_is_checked_against_its_mode(world: SimWorld) -> None:
    pair(v2=True)
    rule = Fault.fail("LLM_LINK_BUSY", op="pull_cache", cluster=D_ID)  # v1 gives it, v2 never does
    with pytest.raises(ValueError, match=f"cluster {D_ID}: pull_cache cannot give LLM_LINK_BUSY in v2 mode"):
        world.faults.add(rule)
    assert world.faults.rules == []


def test_a_rule_matching_a_caller_whose_mode_cannot_give_the_code_is_not_injected(world: SimWorld) -> None:
    p, d = pair(v2=True)
    src = p.cache_manager.allocate_cache(desc(batch=2), [CacheKey(P_ID, 1), CacheKey(P_ID, 2)])
    fill(world, src)
    dst = d.cache_manager.allocate_cache(desc(batch=2))
    rule = world.faults.add(Fault.fail("LLM_LINK_BUSY", op="pull_cache"))
    assert code_of(lambda: d.cache_manager.pull_cache(CacheKey(P_ID, 1), dst, batch_index=0)) is S.LLM_SUCCESS
    assert code_of(lambda: d.cache_manager.pull_cache(CacheKey(P_ID, 2), dst, batch_index=1)) is S.LLM_SUCCESS
    assert world.faults.fired(rule) == 0
    assert world.faults.refused(rule) == [
        "pull_cache cannot give LLM_LINK_BUSY in v2 mode; it gives LLM_TIMEOUT, LLM_NOT_YET_LINK, "
        "LLM_KV_CACHE_NOT_EXIST, LLM_SUSPECT_REMOTE_ERROR, LLM_DEVICE_MEM_ERROR, LLM_FAILED, "
        "LLM_PARAM_INVALID (v2)"
    ]
    said = [e for e in world.trace if e.outcome == "refused"]
    assert len(said) == 1
    assert said[0].op == "fault.fail"
    assert "v2 mode" in said[0].detail


def test_the_same_rule_fires_for_a_caller_whose_mode_gives_the_code(world: SimWorld) -> None:
    p, d = pair(v2=False)
    kv_p, kv_d = p.kv_cache_manager, d.kv_cache_manager
    kv_p.allocate_cache(desc(batch=1), [CacheKey(P_ID, 1)])
    dst = kv_d.allocate_cache(desc(batch=1))
    rule = world.faults.add(Fault.fail("LLM_LINK_BUSY", op="pull_cache"))
    assert code_of(lambda: kv_d.pull_cache(CacheKey(P_ID, 1), dst)) is S.LLM_LINK_BUSY
    assert world.faults.fired(rule) == 1
    assert world.faults.refused(rule) == []


def test_a_door_timeout_gives_the_operations_code_in_its_mode(world: SimWorld) -> None:
    # GE: a flow call past its timeout is LLM_WAIT_PROC_TIMEOUT (llm_flow_service.cc:135-187).
    p, _ = pair(v2=False)
    world.faults.add(Fault.timeout(op="allocate_cache"))
    got = code_of(lambda: p.kv_cache_manager.allocate_cache(desc(), [CacheKey(P_ID, 1)]))
    assert got is S.LLM_WAIT_PROCESS_TIMEOUT


def test_a_door_timeout_the_mode_cannot_give_is_refused(world: SimWorld) -> None:
    p, _ = pair(v2=True)
    rule = world.faults.add(Fault.timeout(op="allocate_cache"))
    assert code_of(lambda: p.cache_manager.allocate_cache(desc(), [CacheKey(P_ID, 1)])) is S.LLM_SUCCESS
    assert world.faults.refused(rule) == [
        "allocate_cache cannot time out in v2 mode; it gives LLM_OUT_OF_MEMORY, LLM_FEATURE_NOT_ENABLED, "
        "LLM_FAILED, LLM_PARAM_INVALID (v2)"
    ]


def test_a_scenario_report_says_why_a_rule_never_fired(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from datadist_sim.scenarios.runner import run

    path = tmp_path / "busy_v2.toml"
    path.write_text(
        '[workload]\nrequests = 2\n[[rules]]\naction = "fail"\nop = "pull_cache"\ncode = "LINK_BUSY"\n'
    )
    report = run(str(path), seed=0)
    assert report.never_fired == [
        "Fault.fail(code=LLM_LINK_BUSY, op=('pull_cache',)) (refused: pull_cache cannot give LLM_LINK_BUSY "
        "in v2 mode; it gives LLM_TIMEOUT, LLM_NOT_YET_LINK, LLM_KV_CACHE_NOT_EXIST, "
        "LLM_SUSPECT_REMOTE_ERROR, LLM_DEVICE_MEM_ERROR, LLM_FAILED, LLM_PARAM_INVALID (v2))"
    ]
    assert "LLM_LINK_BUSY" not in report.codes()


# -- the mode a trace shows, for explore -------------------------------------------------------------


def test_the_trace_says_each_instances_mode(world: SimWorld) -> None:
    from datadist_sim.faults.engine_codes import EngineMode, trace_modes

    pair(v2=True)
    assert trace_modes(world.trace) == {P_ID: EngineMode.V2, D_ID: EngineMode.V2}


def test_the_trace_says_the_kv_cache_manager_mode(world: SimWorld) -> None:
    from datadist_sim.faults.engine_codes import EngineMode, trace_modes

    pair(v2=False)
    assert trace_modes(world.trace) == {P_ID: EngineMode.V2_KV, D_ID: EngineMode.V2_KV}


def test_explores_baseline_draws_codes_from_each_clusters_mode() -> None:
    from datadist_sim._world.trace import TraceEvent
    from datadist_sim.explore.schedule import Baseline, at_call
    from datadist_sim.faults.engine_codes import EngineMode

    events = [
        TraceEvent(0.0, 1, "node.init", "ok", "Prompt v2"),
        TraceEvent(0.0, 2, "node.init", "ok", "Decoder v1"),
        TraceEvent(0.1, 1, "allocate_cache", "LLM_SUCCESS", kind="call"),
        TraceEvent(0.2, 2, "allocate_cache", "LLM_SUCCESS", kind="call"),
    ]
    baseline = Baseline.from_trace(events, 1.0)
    assert baseline.modes == {1: EngineMode.V2, 2: EngineMode.V2_KV}
    first, second = (next(iter(at_call("fail", site, baseline))) for site in baseline.calls)
    assert first["code"] == "LLM_OUT_OF_MEMORY"  # CacheManager's pool (hixl cache_manager.cc:184-189)
    assert second["code"] == "LLM_DEVICE_OUT_OF_MEMORY"  # GE udf cache_manager.cpp:68
    assert list(at_call("timeout", baseline.calls[0], baseline)) == []  # no timeout in v2
    assert [r["action"] for r in at_call("timeout", baseline.calls[1], baseline)] == ["timeout"]


# -- the README's fault table says the code each mode gives ---------------------------------------------


def _readme_row(action: str) -> list:  # type: ignore[type-arg]
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    row = next(line for line in readme.splitlines() if line.startswith(f"| `{action}("))
    return [cell.strip() for cell in row.strip("|").split("|")]


@pytest.mark.parametrize(("fault", "column"), [("hang", 2), ("partition", 2), ("hang", 3), ("partition", 3)])
def test_the_readme_says_what_a_link_set_up_gives_under_each_fault_in_each_mode(
    world: SimWorld, fault: str, column: int
) -> None:
    from tests.fabric.conftest import DECODE_IP, PROMPT_IP, info

    _, d = pair(link=False, v2=column == 2)
    world.faults.add(Fault.hang(P_ID) if fault == "hang" else Fault.partition(P_ID, D_ID))
    ret, rets = d.link_clusters([info(P_ID, 26000, remote_ip=PROMPT_IP, local_ip=DECODE_IP)], 2000)
    cell = _readme_row(fault)[column]
    link_part = cell.split(";")[0]
    assert ret.name in link_part
    assert rets[0].name in link_part
