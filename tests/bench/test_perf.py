"""The performance benchmark's parts (speed itself is never asserted here)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from datadist_sim._status_v1 import LLM_ERRORS
from datadist_sim.bench import main, perf, perf_scale
from datadist_sim.bench.perf_lean import LeanPull, validate_plain
from datadist_sim.bench.perf_setup import Figure, Pair, validate_like_pull_cache
from datadist_sim.llm_datadist import CacheDesc, CacheKey, CacheKeyByIdAndIndex, DataType, LLMException

DESC = CacheDesc(1, [1, 64], DataType.DT_FLOAT16)


def test_pair_links_one_decode_to_every_prompt() -> None:
    with Pair(prompts=20, backed=False) as pair:
        assert len(pair.prompts) == 20
        assert all(pair.world.is_linked(100_000, p + 1) for p in range(20))


@pytest.mark.parametrize(
    ("key", "batch_index", "error"),
    [("not a key", 0, TypeError), (None, -1, ValueError), (None, 2**32, ValueError)],
)
def test_baseline_rejects_what_pull_cache_rejects(key: object, batch_index: int, error: type) -> None:
    with Pair(backed=False) as pair:
        src, dst = pair.prompt_cm.allocate_cache(DESC), pair.decode_cm.allocate_cache(DESC)
        key = key if key is not None else CacheKeyByIdAndIndex(1, src.cache_id, 0)
        with pytest.raises(error):
            validate_like_pull_cache(key, dst, batch_index)
        with pytest.raises(error):
            pair.decode_cm.pull_cache(key, dst, batch_index)


@pytest.mark.parametrize("v1", [False, True])
@pytest.mark.parametrize(
    ("key", "batch_index", "size"), [("not a key", 0, -1), (None, -1, -1), (None, 2**32, -1), (None, 0, 0)]
)
def test_plain_checks_and_lean_model_reject_what_pull_cache_rejects(
    v1: bool, key: object, batch_index: int, size: int
) -> None:
    with Pair(backed=False, v1=v1) as pair:
        src, dst = pair.prompt_cm.allocate_cache(DESC), pair.decode_cm.allocate_cache(DESC)
        key = key if key is not None else CacheKeyByIdAndIndex(1, src.cache_id, 0)
        with pytest.raises((TypeError, ValueError, *LLM_ERRORS)):  # a KvCacheManager: the v1 class
            pair.decode_cm.pull_cache(key, dst, batch_index, size)
        with pytest.raises((TypeError, ValueError, LLMException)):
            validate_plain(key, dst, batch_index, size, v1)
        with pytest.raises((TypeError, ValueError, LLMException)):
            LeanPull(128, v1=v1).pull_cache(key, dst, batch_index, size)


@pytest.mark.parametrize("v1", [False, True])
def test_lean_model_moves_bytes_advances_its_clock_consumes_keys_and_traces_once(v1: bool) -> None:
    with Pair(backed=False, v1=v1) as pair:
        dst = pair.decode_cm.allocate_cache(DESC)
        lean = LeanPull(128, v1=v1)
        lean.src_caches[1][0][:] = 7
        lean.req_at[(1, 0)] = ("req", 5, 0)
        lean.key_table[("req", 5, 0)] = (1, 0)
        lean.pull_cache(CacheKeyByIdAndIndex(1, 1, 0), dst, 0)
        assert (lean.dst_caches[dst.cache_id] == 7).all()
        assert lean.now > 0
        assert not lean.key_table
        assert not lean.req_at
        assert len(lean.trace) == 1
        with pytest.raises(LLMException):
            lean.pull_cache(CacheKey(1, req_id=5), dst, 0)
        assert len(lean.trace) == 2


def test_baseline_accepts_what_pull_cache_accepts_and_packs_the_key() -> None:
    with Pair(backed=False) as pair:
        src, dst = pair.prompt_cm.allocate_cache(DESC), pair.decode_cm.allocate_cache(DESC)
        key = CacheKeyByIdAndIndex(1, src.cache_id, 0)
        assert validate_like_pull_cache(key, dst, 0) is not None
        pair.decode_cm.pull_cache(key, dst, 0)


def test_data_plane_pull_moves_the_same_bytes_as_numpy() -> None:
    (figure,) = perf.data_plane(mib=1, repeat=1)
    assert "bytes checked: True" in figure.case
    assert figure.baseline is not None
    assert figure.ratio is not None
    assert figure.ratio > 0


def test_live_keys_are_bound_and_each_pull_consumes_one() -> None:
    with Pair(backed=False, pool_bytes=1 << 30) as pair:
        keys = perf_scale._keyed(pair, 250)
        assert len({k.req_id for k in keys}) == 250
        dst = pair.decode_cm.allocate_cache(perf_scale.TINY)
        pair.decode_cm.pull_cache(keys[123], dst, 0)
        with pytest.raises(LLMException):
            pair.decode_cm.pull_cache(keys[123], dst, 0)
        pair.decode_cm.pull_cache(CacheKey(1, req_id=249), dst, 0)


def test_memory_per_live_key_is_measured_in_bytes() -> None:
    per_key = perf_scale.memory_per_live_key(300)
    assert 10 < per_key < 100_000


def test_table_marks_missed_targets() -> None:
    rows = [
        Figure("control", "pulls", 10.0, "pulls/s", target=">= 50", met=False),
        Figure("data", "copy", 1.0, "ms", 0.8, "numpy", 0.8, ">= 0.7", True),
    ]
    text = perf.table(rows)
    assert "| control | pulls | 10 pulls/s |  |  | >= 50 | NO |" in text
    assert "| data | copy | 1 ms | 0.8 ms (numpy) | 0.8 | >= 0.7 | yes |" in text


def test_bench_perf_command_prints_figures_and_writes_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(perf, "scaling", lambda quick: [Figure("scale", "stub", 1.0, "µs")])
    monkeypatch.setattr(perf, "paths", lambda quick: [Figure("paths", "stub", 1.0, "µs")])
    monkeypatch.setattr(perf, "cross_process", lambda quick: [Figure("crossproc", "stub", 1.0, "µs")])
    monkeypatch.setattr(perf, "hixl_perf", lambda quick: [Figure("hixl", "stub", 1.0, "µs")])
    assert main(["perf", "--quick", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "| control | v2 CacheManager: simulated pulls per CPU second |" in out
    assert "| control | v1 KvCacheManager: pull_cache of a 512 B cache by id |" in out
    assert "| data | pull_cache of 16 MiB (bytes checked: True) |" in out
    data = json.loads((tmp_path / "perf.json").read_text())
    assert [f["group"] for f in data["figures"]] == ["control"] * 8 + [
        "data",
        "paths",
        "scale",
        "crossproc",
        "hixl",
    ]


def test_cross_process_figures_time_a_fabric_pull_beside_a_ping_pong_and_a_raw_pointer_copy() -> None:
    from datadist_sim.bench import perf_fabric

    pull, ping, ratio, noop, noop_ratio, large, same, _ = perf_fabric._fabric_figures(1 << 20, 3, 5)
    assert pull > 0
    assert ping > 0
    assert ratio > 0  # the median of three rounds' ratios: one of them
    assert noop > 0
    assert noop_ratio > 0
    assert large > 0
    assert same  # the raw-pointer pull delivered the Prompt's bytes


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="processes cannot be held to CPUs here")
def test_a_placed_fabric_run_holds_each_process_to_its_cpus() -> None:
    """The round-trip target is read from a placed run: the fabric, the Decode process and the echo of
    its ping-pong must each have run where the placement says, as each saw it at the end."""
    from datadist_sim.bench import perf_fabric

    for where in perf_fabric.placements():
        run = perf_fabric._fabric_figures(1 << 20, 1, 5, placement=where)
        assert run.cpus == tuple(perf_fabric.cpu_list(cpus) for cpus in where[1:]), where.name
        assert run.pull > 0
        assert run.ping > 0


def test_placements_put_every_process_on_one_cpu_first_then_split_the_decode_process_off() -> None:
    from datadist_sim.bench import perf_fabric

    found = perf_fabric.placements()
    if not hasattr(os, "sched_setaffinity"):
        assert found == []
        return
    cpus = sorted(os.sched_getaffinity(0))
    assert found[0].fabric == found[0].decode == found[0].echo == {cpus[0]}
    if len(cpus) > 1:
        assert found[1].decode == {cpus[0]}
        assert found[1].fabric == found[1].echo == {cpus[1]}
    else:
        assert len(found) == 1
