"""``datadist-sim run SCENARIO --client package.module:function``: the user's own client under a scenario."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from datadist_sim.cli import main

CLIENT = """
import json

import llm_datadist
from llm_datadist import CacheDesc, CacheKey, DataType, LLMClusterInfo, LLMException, LLMRole, LLMStatusCode

SEEN = []


def _options(listen=""):
    opts = {"ge.exec.deviceId": "0", "llm.EnableCacheManager": "1",
            "llm.MemPoolConfig": json.dumps({"memory_size": 1 << 20})}
    if listen:
        opts["llm.listenIpInfo"] = listen
    return opts


def _pull_once(world, retry_busy):
    SEEN.append(llm_datadist.__name__)
    prompt = llm_datadist.LLMDataDist(LLMRole.PROMPT, 1)
    prompt.init(_options("10.0.0.1:26000"))
    decode = llm_datadist.LLMDataDist(LLMRole.DECODER, 2)
    decode.init(_options())
    info = LLMClusterInfo()
    info.remote_cluster_id = 1
    info.append_local_ip_info("192.168.0.1", 0)
    info.append_remote_ip_info("10.0.0.1", 26000)
    ret, _ = decode.link_clusters([info], 1000)
    assert ret == LLMStatusCode.LLM_SUCCESS, ret
    desc = CacheDesc(1, [1, 8], DataType.DT_FLOAT16)
    key = CacheKey(prompt_cluster_id=1, req_id=7)
    prompt.cache_manager.allocate_cache(desc, [key])
    dst = decode.cache_manager.allocate_cache(desc)
    for attempt in range(3):
        try:
            decode.cache_manager.pull_cache(key, dst, batch_index=0)
            return
        except LLMException as exc:
            if not (retry_busy and exc.status_code == LLMStatusCode.LLM_TIMEOUT):
                raise
            world.clock.sleep(0.01)
    raise AssertionError("still timing out after 3 tries")


def careful(world):
    _pull_once(world, retry_busy=True)


def naive(world):
    _pull_once(world, retry_busy=False)
"""

# A code a v2 pull can give (faults/engine_codes: LLM_LINK_BUSY is not one, so a rule naming it would be
# refused for this CacheManager-mode client and nothing would fire).
BUSY_ONCE = """
expect = ["LLM_TIMEOUT"]
[[rules]]
action = "fail"
code = "LLM_TIMEOUT"
op = "pull_cache"
nth = 1
[[rules]]
action = "kill"
cluster = 99
start_s = 1000.0
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user's project directory: their client module and a scenario, the current directory."""
    (tmp_path / "h17_user_client.py").write_text(CLIENT)
    (tmp_path / "busy_once.toml").write_text(BUSY_ONCE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "h17_user_client", raising=False)
    return tmp_path


def test_run_client_drives_the_users_function_on_the_fake_and_passes(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "busy_once.toml", "--client", "h17_user_client:careful", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["passed"] is True
    assert out["per_op"]["pull_cache"] == {
        "LLM_TIMEOUT": 1,
        "LLM_SUCCESS": 1,
    }  # its calls, not the workload's
    assert out["never_fired"] == ["Fault.kill(cluster=99, start_s=1000.0)"]
    assert sys.modules["h17_user_client"].SEEN == [
        "datadist_sim.llm_datadist"
    ]  # `import llm_datadist`: the fake


def test_run_client_exits_1_and_shows_the_failure_when_the_function_raises(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "busy_once.toml", "--client", "h17_user_client:naive"]) == 1
    out = capsys.readouterr().out
    assert "client h17_user_client:naive: RAISED" in out
    assert "LLM_TIMEOUT" in out.split("the client raised:")[1]
    assert "rule never fired: Fault.kill(cluster=99, start_s=1000.0)" in out


def test_run_client_self_check_compares_two_runs_of_the_users_function(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["run", "busy_once.toml", "--client", "h17_user_client:careful", "--self-check", "--seed", "5"]
    assert main([*argv, "--trace", "t.jsonl"]) == 0
    assert "self-check (same seed twice, traces compared): identical" in capsys.readouterr().out
    assert '"op": "pull_cache"' in (project / "t.jsonl").read_text()


def test_run_client_that_cannot_be_imported_is_a_usage_error(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "flaky_link", "--client", "h17_user_client:nope"]) == 2
    assert "has no attribute 'nope'" in capsys.readouterr().err
    assert main(["run", "flaky_link", "--client", "no_such_module_h17:f"]) == 2


def test_run_takes_the_seed_of_a_scenario_file_unless_given_one(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "seeded.toml").write_text("seed = 77\n" + BUSY_ONCE)
    assert main(["run", "seeded.toml", "--client", "h17_user_client:careful", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["seed"] == 77
    assert main(["run", "seeded.toml", "--client", "h17_user_client:careful", "--json", "--seed", "5"]) == 0
    assert json.loads(capsys.readouterr().out)["seed"] == 5
    assert main(["run", "uce", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["seed"] == 0


def test_run_client_exits_1_when_no_fault_fired_and_the_promised_code_never_came(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """README, "Faults, scenarios and the trace": run exits 1 when a promised code did not appear; with
    --client that holds when nothing fired (the run tested nothing), here a rule for another cluster."""
    (project / "elsewhere.toml").write_text(
        BUSY_ONCE.replace('op = "pull_cache"', 'op = "pull_cache"\ncluster = 42')
    )
    assert main(["run", "elsewhere.toml", "--client", "h17_user_client:careful"]) == 1
    out = capsys.readouterr().out
    assert "no fault fired and the promised codes never reached the client" in out
    assert main(["run", "elsewhere.toml", "--client", "h17_user_client:careful", "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["untested"] is True
