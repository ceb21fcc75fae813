"""The status-code matrix: every ``LLMStatusCode`` member, emitted by the fake through the public face.

One test per code, named after it. Each docstring names the documented condition and where it is
documented (§ = /work/shared/reference/llm_datadist_api.md, "status table" = status_codes.txt). A code
the real library documents under a condition gets that condition; a code only hardware or a fault can
cause gets a fault (``world.faults`` or the simulated memory's UCE poison); the legacy model-mode codes
get the closest condition of the current API under ``SimConfig(legacy_codes=True)``, and the same call
in a default world shows the code the current API gives there. the README's status-code section is the table.
"""

from __future__ import annotations

import gc
import threading
import time
from pathlib import Path
from typing import Any, Callable, List, Tuple

import pytest
from tests.data.conftest import D_ID, MIB, P_ID, make, pair, pool, v1_options
from tests.fabric.conftest import DECODE_IP, PROMPT_IP, decoder, info, prompt

from datadist_sim import Fault, SimWorld
from datadist_sim._status_v1 import LLM_ERRORS, as_code
from datadist_sim._world import caches
from datadist_sim.llm_datadist import (
    CacheDesc,
    CacheKey,
    DataType,
    LayerSynchronizer,
    LLMRole,
    LLMStatusCode,
    TransferConfig,
)
from datadist_sim.llm_datadist.status import code_2_status

from .conftest import GateClock, fresh

S = LLMStatusCode
NO_REQ = 2**64 - 1


def code_of(call: Callable[[], object]) -> LLMStatusCode:
    """The status code of the ``LLMException`` the call raises: ``llm_datadist``'s, or for a
    ``KvCacheManager`` the v1 package's (its code read by name)."""
    with pytest.raises(LLM_ERRORS) as exc:
        call()
    return as_code(exc.value.status_code)


def desc(batch: int = 2, seq: int = 8) -> CacheDesc:
    return CacheDesc(2, [batch, seq, 16], DataType.DT_FLOAT16)


def link_info(port: int = 26000) -> object:
    return info(P_ID, port, remote_ip=PROMPT_IP, local_ip=DECODE_IP)


def managers(p: Any, d: Any, v2: bool) -> Tuple[Any, Any]:
    attr = "cache_manager" if v2 else "kv_cache_manager"
    return getattr(p, attr), getattr(d, attr)


class Ready(LayerSynchronizer):
    """Every layer is computed already."""

    def synchronize_layer(self, layer_index: int, timeout_in_millis: object) -> bool:
        return True


def keyed_pair(v2: bool = True, **extra: str) -> Tuple[Any, Any, Any]:
    """A linked Prompt/Decode pair, a Prompt cache holding request 1, and a Decode destination."""
    p, d = pair(v2=v2, **extra)
    pm, dm = managers(p, d, v2)
    pm.allocate_cache(desc(batch=1), [CacheKey(P_ID, 1)])
    dst = dm.allocate_cache(desc(batch=1))
    return pm, dm, dst


def in_flight(clock: GateClock, call: Callable[[], object]) -> Tuple[threading.Thread, List[object]]:
    """Start ``call`` on a thread and return once it is held mid-transfer by the gate clock."""
    out: List[object] = []

    def run() -> None:
        try:
            out.append(call())
        except LLM_ERRORS as exc:
            out.append(as_code(exc.status_code))

    clock.arm()
    worker = threading.Thread(target=run)
    worker.start()
    assert clock.entered.wait(30), "the first call never reached its transfer"
    return worker, out


def legacy_or(legacy_code: LLMStatusCode, default_code: LLMStatusCode) -> Any:
    """Run a test with ``legacy_codes`` on (expecting ``legacy_code``) and off (``default_code``)."""
    return pytest.mark.parametrize(
        ("legacy", "expected"), [(True, legacy_code), (False, default_code)], ids=["legacy", "default"]
    )


def finish(clock: GateClock, worker: threading.Thread) -> None:
    clock.release.set()
    worker.join(30)
    assert not worker.is_alive()


# -- success and general failure -----------------------------------------------------------------


def test_LLM_SUCCESS(world: SimWorld) -> None:
    """Success: ``link_clusters`` returns ``(LLM_SUCCESS, [LLM_SUCCESS])`` (§5.4) and a finished
    ``CacheTask.synchronize()`` returns ``LLM_SUCCESS`` (§6 CacheTask, §12)."""
    p, d = pair(v2=True, link=False)
    assert d.link_clusters([link_info()], 5000) == (S.LLM_SUCCESS, [S.LLM_SUCCESS])
    src = p.cache_manager.allocate_cache(desc())
    dst = d.cache_manager.allocate_cache(desc(batch=1))
    task = p.cache_manager.transfer_cache_async(src, Ready(), [TransferConfig(D_ID, dst.tensor_addrs)])
    assert task.synchronize() is S.LLM_SUCCESS


def test_LLM_FAILED() -> None:
    """A second initialised ``LLMDataDist`` in one process: ``LLMException(LLM_FAILED)``, "Cannot init
    multiple LLMDataDists" (§5.2, §2.4); the simulator enforces it under
    ``SimConfig(one_instance_per_process=True)``."""
    with fresh(one_instance_per_process=True):
        make(LLMRole.PROMPT, P_ID, v1_options(f"{PROMPT_IP}:26000"))
        assert code_of(lambda: make(LLMRole.DECODER, D_ID, v1_options())) is S.LLM_FAILED


def test_LLM_PARAM_INVALID(world: SimWorld) -> None:
    """A cache key already bound to another live cache is ``LLM_PARAM_INVALID`` (§7.1), as is a pull
    from the caller's own cluster (§7.1 local checks)."""
    p, d = pair(v2=True)
    p.cache_manager.allocate_cache(desc(), [CacheKey(P_ID, 1)])
    assert code_of(lambda: p.cache_manager.allocate_cache(desc(), [CacheKey(P_ID, 1)])) is S.LLM_PARAM_INVALID
    dst = d.cache_manager.allocate_cache(desc())
    assert code_of(lambda: d.cache_manager.pull_cache(CacheKey(D_ID, 1), dst)) is S.LLM_PARAM_INVALID


# -- timeouts ------------------------------------------------------------------------------------


def test_LLM_WAIT_PROCESS_TIMEOUT(world: SimWorld) -> None:
    """A v1 (KvCacheManager) pull that takes longer than ``sync_kv_timeout`` is
    ``LLM_WAIT_PROCESS_TIMEOUT`` (§7.2, §12); the timeout is spent in simulated time."""
    world.config.bandwidth_bytes_per_s = 1e6  # 1 MiB takes about 1 s; the limit is 0.1 s
    p, d = pair(v2=False, **{"llm.SyncKvCacheWaitTime": "100"})
    p.kv_cache_manager.allocate_cache(CacheDesc(1, [1, MIB], DataType.DT_UINT8), [CacheKey(P_ID, 1)])
    dst = d.kv_cache_manager.allocate_cache(CacheDesc(1, [1, MIB], DataType.DT_UINT8))
    start = world.now()
    assert (
        code_of(lambda: d.kv_cache_manager.pull_cache(CacheKey(P_ID, 1), dst)) is S.LLM_WAIT_PROCESS_TIMEOUT
    )
    assert world.now() - start == pytest.approx(0.1)


def test_LLM_TIMEOUT(world: SimWorld) -> None:
    """A v2 (CacheManager) pull that takes longer than ``sync_kv_timeout`` is ``LLM_TIMEOUT`` (§7.1,
    §12); the timeout is spent in simulated time."""
    world.config.bandwidth_bytes_per_s = 1e6
    p, d = pair(v2=True, **{"llm.SyncKvCacheWaitTime": "100"})
    p.cache_manager.allocate_cache(CacheDesc(1, [1, MIB], DataType.DT_UINT8), [CacheKey(P_ID, 1)])
    dst = d.cache_manager.allocate_cache(CacheDesc(1, [1, MIB], DataType.DT_UINT8))
    start = world.now()
    assert code_of(lambda: d.cache_manager.pull_cache(CacheKey(P_ID, 1), dst)) is S.LLM_TIMEOUT
    assert world.now() - start == pytest.approx(0.1)


# -- keys and requests ---------------------------------------------------------------------------


def test_LLM_KV_CACHE_NOT_EXIST(world: SimWorld) -> None:
    """A pull by a key the Prompt does not hold is ``LLM_KV_CACHE_NOT_EXIST``, including a second pull
    of a key the first pull consumed (§7.1; status table: "check whether duplicate pull operations
    exist")."""
    _, dm, dst = keyed_pair()
    assert code_of(lambda: dm.pull_cache(CacheKey(P_ID, 7), dst)) is S.LLM_KV_CACHE_NOT_EXIST
    dm.pull_cache(CacheKey(P_ID, 1), dst)
    assert code_of(lambda: dm.pull_cache(CacheKey(P_ID, 1), dst)) is S.LLM_KV_CACHE_NOT_EXIST


def test_LLM_REPEAT_REQUEST() -> None:
    """Status table "Duplicate request: check whether duplicate calls exist": the same pull (same key,
    same destination) issued again while the first is still in flight is ``LLM_REPEAT_REQUEST``; the
    first completes. (§12 files the code under legacy; this is the simulator's current-API condition.)"""
    clock = GateClock()
    with fresh(clock):
        _, dm, dst = keyed_pair()

        def pull() -> None:
            dm.pull_cache(CacheKey(P_ID, 1), dst)

        worker, first = in_flight(clock, pull)
        try:
            assert code_of(pull) is S.LLM_REPEAT_REQUEST
        finally:
            finish(clock, worker)
        assert first == [None], "the first pull succeeds"


# -- links ---------------------------------------------------------------------------------------


def test_LLM_NOT_YET_LINK(world: SimWorld) -> None:
    """A pull from a cluster with no link is ``LLM_NOT_YET_LINK`` (§7.1 local checks, §12)."""
    p, d = pair(v2=True, link=False)
    p.cache_manager.allocate_cache(desc(), [CacheKey(P_ID, 1)])
    dst = d.cache_manager.allocate_cache(desc())
    assert code_of(lambda: d.cache_manager.pull_cache(CacheKey(P_ID, 1), dst)) is S.LLM_NOT_YET_LINK


def test_LLM_ALREADY_LINK(world: SimWorld) -> None:
    """Linking a cluster that is already linked reports ``LLM_ALREADY_LINK`` (§5.4 v2: the entity for
    the peer exists; the overall code is the last failure), returned, not raised."""
    _, d = pair(v2=True)
    assert d.link_clusters([link_info()], 5000) == (S.LLM_ALREADY_LINK, [S.LLM_ALREADY_LINK])


def test_LLM_LINK_FAILED(world: SimWorld) -> None:
    """A link to an endpoint where nobody listens (the TCP connect fails) returns ``LLM_LINK_FAILED``
    for that cluster and overall, after the call's timeout (§5.4, §12; status table)."""
    _, d = pair(v2=True, link=False)
    start = world.now()
    assert d.link_clusters([link_info(26001)], 2000) == (S.LLM_LINK_FAILED, [S.LLM_LINK_FAILED])
    assert world.now() - start == pytest.approx(2.0)


def test_LLM_UNLINK_FAILED(world: SimWorld) -> None:
    """A non-force v2 unlink whose connect to the server fails (the Prompt is gone) returns
    ``LLM_UNLINK_FAILED`` (§5.5 v2, §12); a force unlink then clears the local end (§5.5)."""
    p, d = pair(v2=True)
    p.finalize()
    assert d.unlink_clusters([link_info()], 1000) == (S.LLM_UNLINK_FAILED, [S.LLM_UNLINK_FAILED])
    assert d.unlink_clusters([link_info()], 1000, force=True) == (S.LLM_SUCCESS, [S.LLM_SUCCESS])


def test_LLM_NOTIFY_PROMPT_UNLINK_FAILED(world: SimWorld) -> None:
    """A v1 Decoder unlink that cannot notify the Prompt (it is gone) gives
    ``LLM_NOTIFY_PROMPT_UNLINK_FAILED`` for the cluster and ``LLM_UNLINK_FAILED`` overall (§5.5 v1,
    §12; status table)."""
    p, d = pair(v2=False)
    p.finalize()
    ret = d.unlink_clusters([link_info()], 1000)
    assert ret == (S.LLM_UNLINK_FAILED, [S.LLM_NOTIFY_PROMPT_UNLINK_FAILED])


def test_LLM_CLUSTER_NUM_EXCEED_LIMIT(world: SimWorld) -> None:
    """More than 16 clusters in one v1 ``link_clusters``/``unlink_clusters`` call returns
    ``LLM_CLUSTER_NUM_EXCEED_LIMIT`` with no per-cluster codes (§5.4, §5.5, §11)."""
    d = decoder(100)
    clusters = [info(i, 26000 + i) for i in range(17)]
    assert d.link_clusters(clusters) == (S.LLM_CLUSTER_NUM_EXCEED_LIMIT, [])
    assert d.unlink_clusters(clusters) == (S.LLM_CLUSTER_NUM_EXCEED_LIMIT, [])


def test_LLM_PROCESSING_LINK(world: SimWorld) -> None:
    """A v1 link issued while another link of the instance is still running returns
    ``LLM_PROCESSING_LINK`` (§5.4 v1, §11, §12). The first link is held by a Prompt slow to answer
    (``world.pause``); a zero-second delay rule marks the moment it holds the link mutex."""
    prompt(0)
    prompt(2, 26002)
    d = decoder(1)
    world.config.pause_wall_limit_s = 30.0
    marker = world.faults.add(Fault.delay(0.0, op="link_clusters", remote=0))
    results: List[object] = []
    with world.pause(0):
        worker = threading.Thread(target=lambda: results.append(d.link_clusters([info(0)])))
        worker.start()
        deadline = time.monotonic() + 30  # hang guard only
        while world.faults.fired(marker) == 0:
            assert time.monotonic() < deadline, "the first link never started"
            time.sleep(0.001)
        assert d.link_clusters([info(2, 26002)]) == (S.LLM_PROCESSING_LINK, [])
    worker.join(30)
    assert results == [(S.LLM_SUCCESS, [S.LLM_SUCCESS])]


def test_LLM_EXIST_LINK(world: SimWorld) -> None:
    """``switch_role`` while links remain raises ``LLM_EXIST_LINK`` (§5.7; status table)."""
    _, d = pair(v2=True)
    assert code_of(lambda: d.switch_role(LLMRole.PROMPT, {"llm.listenIpInfo": f"{DECODE_IP}:27000"})) is (
        S.LLM_EXIST_LINK
    )


def test_LLM_FEATURE_NOT_ENABLED(world: SimWorld) -> None:
    """v1 ``switch_role`` without ``enable_switch_role`` at init raises ``LLM_FEATURE_NOT_ENABLED``
    (§5.7; status table)."""
    d = decoder(1)
    assert code_of(lambda: d.switch_role(LLMRole.PROMPT, {"llm.listenIpInfo": f"{DECODE_IP}:27000"})) is (
        S.LLM_FEATURE_NOT_ENABLED
    )


@pytest.mark.parametrize("v2", [False, True], ids=["v1_check_link_status", "v2_unlink"])
def test_LLM_LINK_BUSY(v2: bool) -> None:
    """``LLM_LINK_BUSY`` (§11, status table): v1 ``check_link_status`` concurrent with ``pull_cache``
    (raised), and v2 ``unlink`` concurrent with ``pull_cache`` (returned per cluster), with the pull
    held in flight by the gate clock; the pull itself completes."""
    clock = GateClock()
    with fresh(clock):
        p, d = pair(v2=v2)
        pm, dm = managers(p, d, v2)
        pm.allocate_cache(desc(batch=1), [CacheKey(P_ID, 1)])
        dst = dm.allocate_cache(desc(batch=1))
        worker, first = in_flight(clock, lambda: dm.pull_cache(CacheKey(P_ID, 1), dst))
        try:
            if v2:
                assert d.unlink_clusters([link_info()], 1000) == (S.LLM_LINK_BUSY, [S.LLM_LINK_BUSY])
            else:
                assert code_of(lambda: d.check_link_status(P_ID)) is S.LLM_LINK_BUSY
        finally:
            finish(clock, worker)
        assert first == [None]


def test_LLM_LINK_BUSY_by_fault_rule(world: SimWorld) -> None:
    """GE's engine gives ``LLM_LINK_BUSY`` to a pull whose link another request holds (GE udf
    ``llm_comm_entity.cpp:737-755``), so a client's handling of it is also tested by a rule:
    ``Fault.fail(LLM_LINK_BUSY, op="pull_cache", first=1)`` fails the first pull and the retry succeeds.
    hixl's CacheManager engine has no path that gives it: there the rule is refused unless it says
    ``any_code=True`` (outside the engine's behaviour)."""
    _, dm, dst = keyed_pair(v2=False)
    world.faults.add(Fault.fail(S.LLM_LINK_BUSY, op="pull_cache", first=1))
    assert code_of(lambda: dm.pull_cache(CacheKey(P_ID, 1), dst)) is S.LLM_LINK_BUSY
    dm.pull_cache(CacheKey(P_ID, 1), dst)


# -- memory --------------------------------------------------------------------------------------


def test_LLM_DEVICE_OUT_OF_MEMORY(world: SimWorld) -> None:
    """A v1 (KvCacheManager) allocation the device pool cannot hold raises
    ``LLM_DEVICE_OUT_OF_MEMORY`` (§8 allocate_cache, §12; status table)."""
    _, d = pair(v2=False, link=False)  # pool: 64 MiB x llm.MemUtilization 0.95
    too_big = CacheDesc(1, [1, 64 * MIB], DataType.DT_UINT8)
    assert code_of(lambda: d.kv_cache_manager.allocate_cache(too_big)) is S.LLM_DEVICE_OUT_OF_MEMORY


def test_LLM_OUT_OF_MEMORY(world: SimWorld) -> None:
    """A v2 (CacheManager) allocation the memory pool cannot hold raises ``LLM_OUT_OF_MEMORY``
    (§7.1, §9 allocate_cache; status table: "only in CacheManager mode")."""
    _, d = pair(v2=True, link=False)  # pool: 64 MiB
    too_big = CacheDesc(1, [1, 65 * MIB], DataType.DT_UINT8)
    assert code_of(lambda: d.cache_manager.allocate_cache(too_big)) is S.LLM_OUT_OF_MEMORY


def test_LLM_DEVICE_MEM_ERROR(world: SimWorld) -> None:
    """A UCE in the caller's own memory fails the transfer that touches it with
    ``LLM_DEVICE_MEM_ERROR`` (status table; §12 doc-only, "reserved"). Only hardware causes it: the
    fault plan poisons the Decode destination (``side="local"``), and so does ``world.memory.poison``;
    healed, the pull goes through."""
    _, dm, dst = keyed_pair()
    rule = world.faults.add(Fault.poison(side="local", op="pull_cache"))
    assert code_of(lambda: dm.pull_cache(CacheKey(P_ID, 1), dst)) is S.LLM_DEVICE_MEM_ERROR
    world.faults.remove(rule)
    world.memory.poison(dst.tensor_addrs[0], 8)
    assert code_of(lambda: dm.pull_cache(CacheKey(P_ID, 1), dst)) is S.LLM_DEVICE_MEM_ERROR
    world.memory.heal()
    dm.pull_cache(CacheKey(P_ID, 1), dst)


def test_LLM_SUSPECT_REMOTE_ERROR(world: SimWorld) -> None:
    """A UCE in the peer's memory is ``LLM_SUSPECT_REMOTE_ERROR`` on the side that reads it (status
    table; §12). The fault plan's ``Fault.poison(op="pull_cache")`` poisons the Prompt memory the pull
    reads; the key is not consumed, and removing the rule heals the memory."""
    _, dm, dst = keyed_pair()
    rule = world.faults.add(Fault.poison(op="pull_cache"))
    assert code_of(lambda: dm.pull_cache(CacheKey(P_ID, 1), dst)) is S.LLM_SUSPECT_REMOTE_ERROR
    world.faults.remove(rule)
    dm.pull_cache(CacheKey(P_ID, 1), dst)


# -- the code nobody produces --------------------------------------------------------------------


def test_LLM_UNKNOWN_ERROR(world: SimWorld) -> None:
    """``LLM_UNKNOWN_ERROR`` (-1) exists for users; the real ``code_2_status`` maps every integer it
    does not know, -1 included, to ``LLM_FAILED`` (§2.1), so no raised exception and no
    ``link_clusters`` result carries it. It appears only where the simulator hands a code over without
    ``code_2_status``: a ``CacheTask`` result, here from a fault rule on ``transfer_cache_async``. (The
    real task maps its layer results through ``code_2_status`` as well, so there it would read
    ``LLM_FAILED``: this one path is a simulator artefact, kept so the code can be seen at all.) No
    engine gives the code, so the rules say ``any_code=True``."""
    assert code_2_status(int(S.LLM_UNKNOWN_ERROR)) is S.LLM_FAILED
    p, d = pair(v2=True)
    p.cache_manager.allocate_cache(desc(), [CacheKey(P_ID, 1)])
    dst = d.cache_manager.allocate_cache(desc())
    with world.faults.injected(Fault.fail(S.LLM_UNKNOWN_ERROR, op="pull_cache", any_code=True)):
        assert code_of(lambda: d.cache_manager.pull_cache(CacheKey(P_ID, 1), dst)) is S.LLM_FAILED
    src = p.cache_manager.allocate_cache(desc())
    with world.faults.injected(Fault.fail(S.LLM_UNKNOWN_ERROR, op="transfer_cache_async", any_code=True)):
        task = p.cache_manager.transfer_cache_async(src, Ready(), [TransferConfig(D_ID, dst.tensor_addrs)])
        assert task.synchronize() is S.LLM_UNKNOWN_ERROR
        assert task.get_results() == [S.LLM_UNKNOWN_ERROR]


# -- legacy model-mode codes (SimConfig(legacy_codes=True)) ---------------------------------------


@legacy_or(S.LLM_ENGINE_FINALIZED, S.LLM_FAILED)
def test_LLM_ENGINE_FINALIZED(legacy: bool, expected: LLMStatusCode) -> None:
    """Legacy model mode's "engine finalized" (§10, §12 legacy): closest current condition, a call on a
    manager after its ``LLMDataDist.finalize()`` (§5.3). With ``legacy_codes`` it is
    ``LLM_ENGINE_FINALIZED``; by default the engine is simply not initialised: ``LLM_FAILED`` (§12).
    Plain calls and transfers agree."""
    with fresh(legacy_codes=legacy):
        p, d = pair(v2=True)
        p.cache_manager.allocate_cache(desc(batch=1), [CacheKey(P_ID, 1)])
        cm = d.cache_manager
        dst = cm.allocate_cache(desc(batch=1))
        d.finalize()
        assert code_of(lambda: cm.allocate_cache(desc())) is expected
        assert code_of(lambda: cm.pull_cache(CacheKey(P_ID, 1), dst)) is expected


def test_LLM_ENGINE_FINALIZED_is_not_what_a_killed_cluster_gives(legacy_world: SimWorld) -> None:
    """A process killed by a fault never finalized: its calls stay ``LLM_FAILED`` even with
    ``legacy_codes``."""
    p, d = pair(v2=True)
    p.cache_manager.allocate_cache(desc(batch=1), [CacheKey(P_ID, 1)])
    cm = d.cache_manager
    dst = cm.allocate_cache(desc(batch=1))
    legacy_world.faults.add(Fault.kill(D_ID))
    assert code_of(lambda: cm.allocate_cache(desc())) is S.LLM_FAILED
    assert code_of(lambda: cm.pull_cache(CacheKey(P_ID, 1), dst)) is S.LLM_FAILED


@legacy_or(S.LLM_PREFIX_ALREADY_EXIST, S.LLM_PARAM_INVALID)
def test_LLM_PREFIX_ALREADY_EXIST(legacy: bool, expected: LLMStatusCode) -> None:
    """Legacy "a prefix with the same prefix id was already loaded; release it first" (§10): closest
    current condition, a prefix key (``CacheKey.prefix_id``) bound to a second cache while the first
    holds it. By default that is any key already bound: ``LLM_PARAM_INVALID`` (§7.1); a request key
    bound twice stays ``LLM_PARAM_INVALID`` either way."""
    with fresh(legacy_codes=legacy):
        p, _ = pair(v2=True, link=False)
        cm = p.cache_manager
        prefix = CacheKey(P_ID, NO_REQ, prefix_id=7)
        cm.allocate_cache(desc(batch=1), [prefix])
        assert code_of(lambda: cm.allocate_cache(desc(batch=1), [prefix])) is expected
        cm.allocate_cache(desc(batch=1), [CacheKey(P_ID, 1)])
        assert code_of(lambda: cm.allocate_cache(desc(batch=1), [CacheKey(P_ID, 1)])) is S.LLM_PARAM_INVALID


@legacy_or(S.LLM_PREFIX_NOT_EXIST, S.LLM_KV_CACHE_NOT_EXIST)
def test_LLM_PREFIX_NOT_EXIST(legacy: bool, expected: LLMStatusCode) -> None:
    """Legacy "the request's prefix id was never loaded" (§10): closest current condition, a pull by a
    prefix key the Prompt does not hold. By default a missing key of any kind is
    ``LLM_KV_CACHE_NOT_EXIST`` (§7.1). Once loaded, the prefix pulls, and is not consumed (§10)."""
    with fresh(legacy_codes=legacy):
        p, d = pair(v2=True)
        prefix = CacheKey(P_ID, NO_REQ, prefix_id=9)
        dst = d.cache_manager.allocate_cache(desc(batch=1))
        assert code_of(lambda: d.cache_manager.pull_cache(prefix, dst)) is expected
        p.cache_manager.allocate_cache(desc(batch=1), [prefix])
        d.cache_manager.pull_cache(prefix, dst)
        d.cache_manager.pull_cache(prefix, dst)


@legacy_or(S.LLM_REQUEST_ALREADY_COMPLETED, S.LLM_KV_CACHE_NOT_EXIST)
def test_LLM_REQUEST_ALREADY_COMPLETED(legacy: bool, expected: LLMStatusCode) -> None:
    """Legacy "request already completed" (§12 legacy): closest current condition, a pull of a request
    key that an earlier pull consumed (§7.1: a successful pull removes the key). By default that is
    ``LLM_KV_CACHE_NOT_EXIST``. A key never bound stays ``LLM_KV_CACHE_NOT_EXIST``, and a key bound
    again is a new request that pulls."""
    with fresh(legacy_codes=legacy):
        pm, dm, dst = keyed_pair()
        dm.pull_cache(CacheKey(P_ID, 1), dst)
        assert code_of(lambda: dm.pull_cache(CacheKey(P_ID, 1), dst)) is expected
        assert code_of(lambda: dm.pull_cache(CacheKey(P_ID, 2), dst)) is S.LLM_KV_CACHE_NOT_EXIST
        pm.allocate_cache(desc(batch=1), [CacheKey(P_ID, 1)])
        dm.pull_cache(CacheKey(P_ID, 1), dst)


def test_LLM_REQUEST_ALREADY_COMPLETED_is_remembered_for_the_last_requests_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The Prompt remembers a bounded number of consumed request keys (``COMPLETED_KEPT``), so a long
    legacy run does not grow without end; an older one reads as never bound."""
    monkeypatch.setattr(caches, "COMPLETED_KEPT", 1)
    with fresh(legacy_codes=True):
        p, d = pair(v2=True)
        p.cache_manager.allocate_cache(desc(batch=2), [CacheKey(P_ID, 1), CacheKey(P_ID, 2)])
        dst = d.cache_manager.allocate_cache(desc(batch=1))
        d.cache_manager.pull_cache(CacheKey(P_ID, 1), dst)
        d.cache_manager.pull_cache(CacheKey(P_ID, 2), dst)
        second = code_of(lambda: d.cache_manager.pull_cache(CacheKey(P_ID, 2), dst))
        first = code_of(lambda: d.cache_manager.pull_cache(CacheKey(P_ID, 1), dst))
        assert (first, second) == (S.LLM_KV_CACHE_NOT_EXIST, S.LLM_REQUEST_ALREADY_COMPLETED)


@legacy_or(S.LLM_SEQ_LENOVERLIMIT, S.LLM_PARAM_INVALID)
def test_LLM_SEQ_LENOVERLIMIT(legacy: bool, expected: LLMStatusCode) -> None:
    """Legacy "sequence length over the limit" (§12 legacy): closest current condition, a pull whose
    length runs past the per-request slice of the source or the destination — here a Prompt request of
    16 positions into a Decode cache of 8 (the limit is the destination's sequence dimension). By
    default the pull's size check gives ``LLM_PARAM_INVALID``. A ``size`` that fits pulls."""
    with fresh(legacy_codes=legacy):
        p, d = pair(v2=True)
        p.cache_manager.allocate_cache(desc(batch=1, seq=16), [CacheKey(P_ID, 1)])
        dst = d.cache_manager.allocate_cache(desc(batch=1, seq=8))
        assert code_of(lambda: d.cache_manager.pull_cache(CacheKey(P_ID, 1), dst)) is expected
        d.cache_manager.pull_cache(CacheKey(P_ID, 1), dst, size=8 * 16 * 2)


@legacy_or(S.LLM_NO_FREE_BLOCK, S.LLM_OUT_OF_MEMORY)
def test_LLM_NO_FREE_BLOCK(legacy: bool, expected: LLMStatusCode) -> None:
    """Legacy "no free block" (§12 legacy): closest current condition, ``allocate_blocks_cache`` from a
    pool that cannot give even one page (here a full 1 MiB pool; ``Fault.exhaust_pool`` does the
    same). By default a pool that cannot hold the cache is ``LLM_OUT_OF_MEMORY`` (§9)."""
    with fresh(legacy_codes=legacy) as w:
        _, d = pair(v2=True, link=False, **{"llm.MemPoolConfig": pool(MIB)})
        cm = d.cache_manager
        full = cm.allocate_cache(CacheDesc(1, [1, MIB], DataType.DT_UINT8))
        blocks = CacheDesc(1, [4, 1024], DataType.DT_UINT8)
        assert code_of(lambda: cm.allocate_blocks_cache(blocks)) is expected
        cm.deallocate_cache(full)
        rule = w.faults.add(Fault.exhaust_pool(D_ID))
        assert code_of(lambda: cm.allocate_blocks_cache(blocks)) is expected
        w.faults.remove(rule)
        cm.allocate_blocks_cache(blocks)


@legacy_or(S.LLM_BLOCKS_OUT_OF_MEMORY, S.LLM_OUT_OF_MEMORY)
def test_LLM_BLOCKS_OUT_OF_MEMORY(legacy: bool, expected: LLMStatusCode) -> None:
    """Legacy "blocks out of memory" (§12 legacy): closest current condition, ``allocate_blocks_cache``
    larger than what the pool has free while it does have free pages (here 2 MiB of blocks from an
    empty 1 MiB pool). By default ``LLM_OUT_OF_MEMORY`` (§9). A plain cache stays ``LLM_OUT_OF_MEMORY``."""
    with fresh(legacy_codes=legacy):
        _, d = pair(v2=True, link=False, **{"llm.MemPoolConfig": pool(MIB)})
        cm = d.cache_manager
        too_many = CacheDesc(1, [2048, 1024], DataType.DT_UINT8)
        assert code_of(lambda: cm.allocate_blocks_cache(too_many)) is expected
        too_big = CacheDesc(1, [1, 2 * MIB], DataType.DT_UINT8)
        assert code_of(lambda: cm.allocate_cache(too_big)) is S.LLM_OUT_OF_MEMORY


def test_legacy_codes_in_KvCacheManager_mode() -> None:
    """The legacy conditions hold in v1 (KvCacheManager) mode too, where model mode came from: prefix
    bound twice, prefix not loaded, request already pulled, sequence over the slice, blocks beyond the
    pool, no free page at all, and a call after finalize."""
    with fresh(legacy_codes=True) as w:
        p, d = pair(v2=False)
        pm, dm = p.kv_cache_manager, d.kv_cache_manager
        prefix = CacheKey(P_ID, NO_REQ, prefix_id=3)
        assert code_of(lambda: dm.pull_cache(prefix, dm.allocate_cache(desc(batch=1)))) is (
            S.LLM_PREFIX_NOT_EXIST
        )
        # one v1 call puts all its keys in the table its last key picks, so a prefix gets its own call
        pm.allocate_cache(desc(batch=1), [prefix])
        pm.allocate_cache(desc(batch=1), [CacheKey(P_ID, 1)])
        assert code_of(lambda: pm.allocate_cache(desc(batch=1), [prefix])) is S.LLM_PREFIX_ALREADY_EXIST
        dst = dm.allocate_cache(desc(batch=1))
        dm.pull_cache(CacheKey(P_ID, 1), dst)
        assert code_of(lambda: dm.pull_cache(CacheKey(P_ID, 1), dst)) is S.LLM_REQUEST_ALREADY_COMPLETED
        short = dm.allocate_cache(desc(batch=1, seq=4))
        assert code_of(lambda: dm.pull_cache(prefix, short)) is S.LLM_SEQ_LENOVERLIMIT
        too_many = CacheDesc(1, [1024, 64 * 1024], DataType.DT_UINT8)  # 64 MiB > 64 MiB x 0.95
        assert code_of(lambda: dm.allocate_blocks_cache(too_many)) is S.LLM_BLOCKS_OUT_OF_MEMORY
        gc.collect()  # caches the failed calls above left to their tracebacks free themselves first
        with w.faults.injected(Fault.exhaust_pool(D_ID)):
            assert code_of(lambda: dm.allocate_blocks_cache(desc(batch=4))) is S.LLM_NO_FREE_BLOCK
        d.finalize()
        assert code_of(lambda: dm.allocate_cache(desc())) is S.LLM_ENGINE_FINALIZED


# -- the matrix is complete ----------------------------------------------------------------------


def test_every_status_code_has_a_test_named_after_it() -> None:
    missing = [code.name for code in LLMStatusCode if not callable(globals().get(f"test_{code.name}"))]
    assert missing == []


def test_the_matrix_document_has_a_row_per_code_with_its_value_and_test() -> None:
    doc = Path(__file__).resolve().parents[2] / "README.md"
    rows = [
        line.split("|") for line in doc.read_text(encoding="utf-8").splitlines() if line.startswith("| `LLM_")
    ]
    by_name = {cells[1].strip().strip("`"): cells for cells in rows}
    assert sorted(by_name) == sorted(code.name for code in LLMStatusCode)
    for name, cells in by_name.items():
        assert str(int(LLMStatusCode[name])) in cells[2], name
        assert f"`test_{name}`" in cells[5], name
