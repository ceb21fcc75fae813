"""``datadist-sim exec`` (a program run with the fake installed), ``bench`` wiring and ``-v``."""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import types
from pathlib import Path
from typing import List

import pytest

from datadist_sim.cli import main

PY = sys.executable
CLIENT = """
import sys
import datadist_sim
import llm_datadist

dd = llm_datadist.LLMDataDist(llm_datadist.LLMRole.PROMPT, 3)
dd.init({"ge.exec.deviceId": "0", "llm.listenIpInfo": "10.0.0.1:26000"})
print("face", llm_datadist.__name__, "seed", datadist_sim.default_world().seed)
sys.exit(int(sys.argv[1]))
"""


@pytest.fixture
def client(tmp_path: Path) -> str:
    path = tmp_path / "client.py"
    path.write_text(CLIENT)
    return str(path)


def test_exec_runs_an_unmodified_program_on_the_fake_and_returns_its_exit_code(
    client: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "trace.jsonl"
    assert main(["exec", "--seed", "11", "--trace", str(trace), "--", PY, client, "5"]) == 5
    assert capfd.readouterr().out.split() == ["face", "datadist_sim.llm_datadist", "seed", "11"]
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    assert {"op": "init", "outcome": "LLM_SUCCESS", "cluster_id": 3}.items() <= events[-1].items()


def test_a_program_that_never_imports_the_fake_is_left_alone(capfd: pytest.CaptureFixture[str]) -> None:
    probe = "import sys; print(sorted(n for n in sys.modules if 'datadist' in n))"
    assert main(["exec", "--", PY, "-c", probe]) == 0
    assert capfd.readouterr().out.strip() == "[]"


def test_exec_runs_the_sitecustomize_it_shadows(
    client: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("print('their sitecustomize ran')\n")
    monkeypatch.setenv("PYTHONPATH", str(site))
    assert main(["exec", "--", PY, client, "0"]) == 0
    assert capfd.readouterr().out.splitlines()[0] == "their sitecustomize ran"


def test_exec_refuses_to_shadow_a_real_llm_datadist_without_force(
    client: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    real = tmp_path / "real" / "llm_datadist"
    real.mkdir(parents=True)
    (real / "__init__.py").write_text("")
    monkeypatch.setenv("PYTHONPATH", str(real.parent))
    assert main(["exec", "--", PY, client, "0"]) == 3
    assert "a real llm_datadist is importable" in capfd.readouterr().err
    assert main(["exec", "--force", "--", PY, client, "0"]) == 0
    captured = capfd.readouterr()
    assert "face datadist_sim.llm_datadist" in captured.out
    assert "shadows the real llm_datadist" in captured.err


def test_verbose_turns_on_the_datadist_sim_logger_in_the_program(capfd: pytest.CaptureFixture[str]) -> None:
    probe = "import logging, llm_datadist; print(logging.getLogger('datadist_sim').getEffectiveLevel())"
    assert main(["-v", "exec", "--", PY, "-c", probe]) == 0
    assert capfd.readouterr().out.strip() == "10"
    assert main(["exec", "--", PY, "-c", probe]) == 0
    assert capfd.readouterr().out.strip() == "30"


@pytest.mark.skipif(os.name != "posix", reason="signals as exit status are POSIX")
def test_exec_maps_death_by_signal_to_128_plus_the_signal() -> None:
    kill = "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"
    assert main(["exec", "--", PY, "-c", kill]) == 128 + signal.SIGTERM


def test_exec_of_a_missing_program_is_127(capfd: pytest.CaptureFixture[str]) -> None:
    assert main(["exec", "--", "datadist-sim-no-such-program"]) == 127
    assert "command not found" in capfd.readouterr().err


def test_exec_without_a_program_is_a_usage_error(capfd: pytest.CaptureFixture[str]) -> None:
    assert main(["exec"]) == 2
    assert "name a program" in capfd.readouterr().err


def test_bench_hands_every_argument_to_the_benchmarks(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: List[List[str]] = []

    def fake_main(argv: List[str]) -> int:
        seen.append(argv)
        return 4

    monkeypatch.setitem(sys.modules, "datadist_sim.bench", types.SimpleNamespace(main=fake_main))
    assert main(["bench", "retry", "--json", "--help"]) == 4
    assert seen == [["retry", "--json", "--help"]]


def test_bench_without_the_benchmarks_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "datadist_sim.bench", None)
    assert main(["bench", "retry"]) == 2
    assert "benchmarks not available" in capsys.readouterr().err


@pytest.mark.skipif(os.name != "posix", reason="uses sh")
def test_every_python_the_program_starts_gets_the_fake_and_its_own_trace_file(
    client: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    script = f"{PY} {client} 0 && {PY} {client} 0"
    trace = tmp_path / "trace-{pid}.jsonl"
    assert main(["exec", "--seed", "4", "--trace", str(trace), "--", "sh", "-c", script]) == 0
    assert capfd.readouterr().out.splitlines() == ["face datadist_sim.llm_datadist seed 4"] * 2
    assert len(list(tmp_path.glob("trace-*.jsonl"))) == 2


LINK_NOWHERE = Path(__file__).parent / "programs" / "link_nowhere.py"
"""The same program ``crossproc/test_exec_coverage`` runs through a fabric."""


@pytest.mark.skipif(os.name != "posix", reason="uses sh")
def test_exec_coverage_adds_up_the_codes_of_every_process_of_the_program(
    capfd: pytest.CaptureFixture[str],
) -> None:
    script = f"{PY} {LINK_NOWHERE} && {PY} {LINK_NOWHERE}"
    assert main(["exec", "--coverage", "--", "sh", "-c", script]) == 0
    captured = capfd.readouterr()
    assert captured.out.splitlines() == ["LLM_LINK_FAILED"] * 2
    assert re.search(r"LLM_LINK_FAILED\s+1343270921\s+2\s+link_clusters 2", captured.err), captured.err
    assert "over 6 API calls" in captured.err  # init, link_clusters, finalize in each process
    # measured against the codes GE's engine gives (KvCacheManager mode, faults.engine_codes)
    assert "engine modes used: v2-kv (2 instances)" in captured.err
    assert "1 of 18 codes the engine gives in v2-kv mode reached client code" in captured.err


def test_exec_coverage_fail_under_turns_a_successful_program_into_exit_1(
    capfd: pytest.CaptureFixture[str],
) -> None:
    assert main(["exec", "--coverage-fail-under", "2", "--", PY, str(LINK_NOWHERE)]) == 1
    assert "(required: 2; NOT met)" in capfd.readouterr().err
    assert main(["exec", "--coverage-fail-under", "1", "--", PY, str(LINK_NOWHERE)]) == 0
    assert "(required: 1; met)" in capfd.readouterr().err


EXITS_BY_OS_EXIT = """
import os
import llm_datadist

dd = llm_datadist.LLMDataDist(llm_datadist.LLMRole.PROMPT, 3)
dd.init({"ge.exec.deviceId": "0", "llm.listenIpInfo": "10.0.0.1:26000"})
os._exit(0)  # as a multiprocessing worker leaves: no atexit handlers run
"""


def test_exec_trace_is_complete_when_exec_returns_even_after_os_exit(tmp_path: Path) -> None:
    program = tmp_path / "quits.py"
    program.write_text(EXITS_BY_OS_EXIT)
    trace = tmp_path / "t-{pid}.jsonl"
    assert main(["exec", "--trace", str(trace), "--", PY, str(program)]) == 0
    (written,) = tmp_path.glob("t-*.jsonl")
    assert written.name != "t-{pid}.jsonl"
    assert written.name[2:-6].isdigit()
    events = [json.loads(line) for line in written.read_text().splitlines()]
    assert [(e["op"], e["outcome"]) for e in events if e["kind"] == "call"] == [("init", "LLM_SUCCESS")]


def test_run_expands_pid_in_its_trace_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "uce", "--trace", str(tmp_path / "t-{pid}.jsonl")]) in (0, 1)
    assert [p.name for p in tmp_path.iterdir()] == [f"t-{os.getpid()}.jsonl"]
    assert f"t-{os.getpid()}.jsonl" in capsys.readouterr().out


def test_fabric_expands_pid_in_its_trace_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["fabric", "--trace", str(tmp_path / "f-{pid}.jsonl"), "--idle-exit", "0.1"]
    before = signal.getsignal(signal.SIGTERM)
    try:
        assert main([*argv, "--socket-dir", str(tmp_path / "sock")]) == 0
    finally:
        signal.signal(signal.SIGTERM, before)  # the fabric installs its own handler in this process
    assert capsys.readouterr().out.startswith("DATADIST_SIM_FABRIC=")
    assert (tmp_path / f"f-{os.getpid()}.jsonl").is_file()
    assert not (tmp_path / "f-{pid}.jsonl").exists()


def test_after_an_in_process_fabric_ends_the_drop_in_world_is_a_fresh_one(tmp_path: Path) -> None:
    from datadist_sim.llm_datadist import LLMDataDist, LLMRole

    argv = ["fabric", "--trace", str(tmp_path / "f.jsonl"), "--idle-exit", "0.1", "--quiet"]
    before = signal.getsignal(signal.SIGTERM)
    try:
        assert main([*argv, "--socket-dir", str(tmp_path / "sock")]) == 0
    finally:
        signal.signal(signal.SIGTERM, before)
    written = (tmp_path / "f.jsonl").read_text()
    dd = LLMDataDist(LLMRole.PROMPT, 7)
    dd.init({"ge.exec.deviceId": "0", "llm.EnableCacheManager": "1"})  # traced: the old file is closed
    dd.finalize()
    assert (tmp_path / "f.jsonl").read_text() == written


def test_output_into_a_closed_pipe_ends_quietly_with_141() -> None:
    import subprocess

    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader has gone, as `head` goes after its lines
    try:
        done = subprocess.run(
            [PY, "-m", "datadist_sim", "codes"], stdout=write_end, stderr=subprocess.PIPE, timeout=60
        )
    finally:
        os.close(write_end)
    assert done.returncode == 141
    assert done.stderr == b""


def test_shortened_trace_arguments_show_an_ellipsis() -> None:
    from datadist_sim.llm_datadist._engine import short

    assert short(list(range(10))) == "[0, 1, 2, 3, …6 more]"
    assert short({i: i for i in range(5)}) == "{0: 0, 1: 1, 2: 2, …2 more}"
    assert short("x" * 80).endswith("…")
    assert len(short("x" * 80)) == 48
    assert short([1, 2]) == "[1, 2]"
    assert short({1: 2}) == "{1: 2}"


FORKS = """
import os
import llm_datadist

dd = llm_datadist.LLMDataDist(llm_datadist.LLMRole.PROMPT, 3)
pid = os.fork()
if pid == 0:
    dd.init({"ge.exec.deviceId": "0", "llm.listenIpInfo": "10.0.0.1:26000"})
    os._exit(0)
os.waitpid(pid, 0)
print(pid)
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_worker_writes_its_own_pid_trace_file(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    program = tmp_path / "forks.py"
    program.write_text(FORKS)
    assert main(["exec", "--trace", str(tmp_path / "t-{pid}.jsonl"), "--", PY, str(program)]) == 0
    child = int(capfd.readouterr().out.split()[-1])
    written = tmp_path / f"t-{child}.jsonl"
    events = [json.loads(line) for line in written.read_text().splitlines()]
    assert [e["op"] for e in events if e["kind"] == "call"] == ["init"]
    assert len(list(tmp_path.glob("t-*.jsonl"))) == 2  # the parent's own file besides


def test_exec_lets_a_connectors_own_torch_npu_stub_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """A connector's CPU-test stub of torch_npu that defines ``torch.npu`` only where torch has none
    imports under exec as it does without it (the stand-in steps aside)."""
    from tests.test_torch_npu import FAKE_TORCH, STUB_TORCH_NPU

    for name, body in (("torch", FAKE_TORCH), ("torch_npu", STUB_TORCH_NPU)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(body)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.delenv("DATADIST_SIM_TORCH_NPU", raising=False)
    program = (
        "import llm_datadist, torch, torch_npu\nstream = torch.npu.Stream()\nprint(type(stream).__name__)\n"
    )
    assert main(["exec", "--", PY, "-c", program]) == 0
    assert capfd.readouterr().out.strip() == "Stream"
