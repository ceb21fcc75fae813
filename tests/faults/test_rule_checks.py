"""Mistakes in fault rules are errors naming the field (and the closest valid name), and a run says
which of its rules never fired."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path
from typing import Any, Dict, Set

import pytest

import datadist_sim.llm_datadist
import datadist_sim.llm_datadist_v1
from datadist_sim import Fault, scenarios
from datadist_sim.cli import main
from datadist_sim.faults.checks import API_OPS
from datadist_sim.llm_datadist._engine import api_call
from datadist_sim.scenarios.runner import run

_WRAPPER_CODE = api_call(lambda self: None).__code__


def _face_ops() -> Set[str]:
    """The names of every method of the face that ``api_call`` wraps."""
    ops: Set[str] = set()
    for package in (datadist_sim.llm_datadist, datadist_sim.llm_datadist_v1):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            module = importlib.import_module(info.name)
            for _, cls in inspect.getmembers(module, inspect.isclass):
                for name, member in vars(cls).items():
                    while member is not None:  # through outer wrappers (the v1 package's errors)
                        if getattr(member, "__code__", None) is _WRAPPER_CODE:
                            ops.add(name)
                            break
                        member = getattr(member, "__wrapped__", None)
    return ops


def _hixl_ops() -> Set[str]:
    """``hixl.<method>`` for every method of ``hixl.Hixl`` the face traces (all but the life ones'
    failures, which are traced too)."""
    from datadist_sim.hixl._engine import Hixl

    return {f"hixl.{name}" for name in vars(Hixl) if not name.startswith("_")}


def test_the_operations_a_rule_may_name_are_exactly_the_traced_public_methods() -> None:
    assert _face_ops() | _hixl_ops() == API_OPS


def test_a_misspelt_op_is_an_error_naming_the_closest_operation() -> None:
    with pytest.raises(
        ValueError, match=r"op 'pul_cache' names no API operation \(did you mean 'pull_cache'\?\)"
    ):
        Fault.timeout(op="pul_cache")
    with pytest.raises(ValueError, match="'link_clusters'"):
        Fault.fail("LLM_FAILED", op=["pull_cache", "link_cluster"])


def test_a_misspelt_action_and_side_name_the_closest_valid_name() -> None:
    with pytest.raises(ValueError, match=r"action 'timout'.*'timeout'"):
        Fault("timout")
    with pytest.raises(ValueError, match=r"side 'remot'.*'remote'"):
        Fault.poison(side="remot", op="pull_cache")


@pytest.mark.parametrize(
    ("when", "field"),
    [
        ({"nth": 0}, "nth"),
        ({"first": 0}, "first"),
        ({"first": -2}, "first"),
        ({"after": -1}, "after"),
        ({"start_s": -0.5}, "start_s"),
        ({"end_s": -1.0}, "end_s"),
        ({"heal_after_s": -1.0}, "heal_after_s"),
        ({"start_s": 2.0, "end_s": 1.0}, "end_s"),
        ({"start_s": 1.0, "end_s": 1.0}, "end_s"),
    ],
)
def test_a_count_or_window_that_can_never_fire_is_an_error_naming_the_field(
    when: Dict[str, Any], field: str
) -> None:
    with pytest.raises(ValueError, match=rf"^{field} must"):
        Fault.timeout(op="pull_cache", **when)


def test_counts_and_windows_that_can_fire_are_accepted() -> None:
    rule = Fault.timeout(op="pull_cache", nth=1, after=0, start_s=0.0, end_s=0.5, heal_after_s=0.0)
    assert (rule.nth, rule.after, rule.end_s) == (1, 0, 0.5)
    assert Fault.delay(0.0, op="link_clusters", first=1).first == 1


def test_a_misspelt_status_code_names_the_closest_one() -> None:
    with pytest.raises(
        ValueError, match=r"unknown status code 'LLM_LINK_BUSSY' \(did you mean 'LLM_LINK_BUSY'\?\)"
    ):
        Fault.fail("LLM_LINK_BUSSY")


def test_a_scenario_rule_with_a_misspelt_op_fails_at_load_naming_rule_and_field(tmp_path: Path) -> None:
    path = tmp_path / "typo.toml"
    path.write_text(
        '[[rules]]\naction = "timeout"\nop = "pull_cache"\n\n'
        '[[rules]]\naction = "timeout"\nop = "pul_cache"\n'
    )
    with pytest.raises(
        ValueError, match=r"rule 2: op 'pul_cache' names no API operation \(did you mean 'pull_cache'\?\)"
    ):
        scenarios.load(path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[[rules]]\naction = "timeout"\nop = "pull_cache"\nnht = 2\n', r"rule key 'nht'.*'nth'"),
        ('[[rules]]\naction = "timeout"\nop = "pull_cache"\nnth = 0\n', r"rule 1: nth must be an int >= 1"),
        ("[workload]\nrequest = 3\n", r"workload key 'request'.*'requests'"),
        ('descripton = "x"\n', r"top-level key 'descripton'.*'description'"),
    ],
)
def test_a_scenario_file_mistake_names_the_closest_valid_key(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        scenarios.load(path)


NEVER_FIRES = """
expect = ["LLM_SUCCESS"]
[workload]
requests = 3
[[rules]]
action = "fail"
code = "LLM_LINK_BUSY"
op = "pull_cache"
start_s = 500.0
[[rules]]
action = "delay"
seconds = 0.001
op = "pull_cache"
"""


def test_a_run_names_each_rule_that_never_fired(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "late.toml"
    path.write_text(NEVER_FIRES)
    report = run(scenarios.load(path))
    assert report.never_fired == ["Fault.fail(code=LLM_LINK_BUSY, op=('pull_cache',), start_s=500.0)"]
    assert main(["run", str(path)]) == 0
    out = capsys.readouterr().out
    assert "rule never fired: Fault.fail(code=LLM_LINK_BUSY, op=('pull_cache',), start_s=500.0)" in out
    assert "rule never fired: Fault.delay" not in out


LOSES = """
expect = ["LLM_SUCCESS"]
[workload]
requests = 4
[[rules]]
action = "fail"
code = "LLM_FAILED"
op = "pull_cache"
nth = 2
"""


def test_run_exits_1_when_requests_were_lost_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "loses.toml"
    path.write_text(LOSES)
    assert main(["run", str(path)]) == 1
    assert "result: FAILED: 1 of 4 requests lost" in capsys.readouterr().out
    path.write_text("may_lose = true\n" + LOSES)
    assert main(["run", str(path)]) == 0
    assert "result: passed" in capsys.readouterr().out


def test_run_says_which_promised_code_is_missing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "promise.toml"
    path.write_text('expect = ["LLM_LINK_BUSY"]\n[workload]\nrequests = 2\n')
    assert main(["run", str(path)]) == 1
    assert "result: FAILED: promised code(s) not seen: LLM_LINK_BUSY" in capsys.readouterr().out


def test_a_timeout_has_one_landed_default_in_code_scenarios_and_docs() -> None:
    default = inspect.signature(Fault.timeout).parameters["landed"].default
    assert default is False
    assert Fault("timeout").landed is default
    assert scenarios.rule_from_spec({"action": "timeout", "op": "pull_cache"}).landed is default
    assert (
        scenarios.rule_from_spec({"action": "timeout", "op": "pull_cache", "landed": "coin"}).landed is None
    )
    root = Path(__file__).resolve().parents[2]
    readme = (root / "README.md").read_text(encoding="utf-8")
    scenario_doc = (root / "sim" / "README.md").read_text(encoding="utf-8")
    assert "`landed=False` (the default)" in readme
    assert "`false`, the default" in scenario_doc
    for doc in (readme, scenario_doc):
        assert "consumed the Prompt's key" in doc
