"""Explore targets: a small Decode-side connector written as a user would, against ``llm_datadist``.

``careful`` retries a timed-out pull after re-linking (the status table's remedy for a transmission
timeout) and reports every request it could not serve; ``buggy`` retries a timed-out pull on the same,
now broken, link and lets that retry's error escape; ``twice`` re-links once, but a second timeout on
the same request takes an unguarded path (a bug that needs two faults on one request); ``landed``
re-links and retries correctly but takes the retry's ``LLM_KV_CACHE_NOT_EXIST`` for a crash (a bug only
a timeout whose bytes landed, and so consumed the key, reaches); ``mid_transfer`` takes a timed-out
pull for a live peer and crashes when the re-link fails (a peer that died mid-transfer);
``hixl_careful`` is ``careful`` over the hixl transfer backend and ``kv_careful`` in KvCacheManager
mode. Each target
raises ``AssertionError`` when its property is violated: no error escapes the connector, and every
request it calls served holds the Prompt's bytes.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Tuple, Type

import numpy as np

from datadist_sim import SimWorld, tensor_views

P_ID, D_ID = 1, 2
PROMPT_IP, DECODE_IP, PORT = "192.168.1.1", "192.168.2.1", 26000
REQUESTS = 3
POOL = json.dumps({"memory_size": 16 << 20, "page_shift": 16})


def _options(listen: str = "", hixl: bool = False) -> Dict[str, str]:
    opts = {"ge.exec.deviceId": "0", "llm.EnableCacheManager": "1", "llm.MemPoolConfig": POOL}
    if listen:
        opts["llm.listenIpInfo"] = listen
    if hixl:
        opts["llm.TransferBackend"] = "hixl"
    return opts


def _desc(llm: Any, batch: int) -> Any:
    return llm.CacheDesc(2, [batch, 4, 8], llm.DataType.DT_FLOAT16)


def _cluster(llm: Any) -> Any:
    info = llm.LLMClusterInfo()
    info.remote_cluster_id = P_ID
    info.append_local_ip_info(DECODE_IP, 0)
    info.append_remote_ip_info(PROMPT_IP, PORT)
    return info


def _prompt(llm: Any, requests: int = REQUESTS, hixl: bool = False) -> Optional[Tuple[Any, Any]]:
    """The Prompt side: not under test, so a fault that stops it setting up ends the run quietly."""
    try:
        dd = llm.LLMDataDist(llm.LLMRole.PROMPT, P_ID)
        dd.init(_options(f"{PROMPT_IP}:{PORT}", hixl))
        keys = [llm.CacheKey(P_ID, r) for r in range(requests)]
        src = dd.cache_manager.allocate_cache(_desc(llm, requests), keys)
    except llm.LLMException:
        return None
    for i, view in enumerate(tensor_views(src)):
        view[...] = np.arange(view.size, dtype=np.float16).reshape(view.shape) + i
    return dd, src


class Connector:
    """The Decode side: link, pull each request into its own batch slot, re-link after a timeout."""

    retry_relinks = True
    second_timeout_guarded = True
    missing_key_guarded = True
    requests = REQUESTS
    hixl = False

    def __init__(self, llm: Any) -> None:
        self.llm = llm
        self.dd: Any = None
        self.dst: Any = None
        self.src_cache_id = -1

    def relink(self) -> bool:
        cluster = _cluster(self.llm)
        self.dd.unlink_clusters([cluster], force=True)
        for _ in range(3):
            ret, _rets = self.dd.link_clusters([cluster], 2000)
            if ret == self.llm.LLMStatusCode.LLM_SUCCESS:
                return True
        return False

    def key(self, req: int) -> Any:
        return self.llm.CacheKey(P_ID, req)

    def pull(self, req: int) -> bool:
        """True once the request's bytes are in; False when the connector gives the request up (an
        ``LLMException`` out of here is such a give-up too). A ``RuntimeError`` is a crash."""
        llm = self.llm
        key = self.key(req)
        timeout = llm.LLMStatusCode.LLM_TIMEOUT
        try:
            self.dd.cache_manager.pull_cache(key, self.dst, batch_index=req)
            return True
        except llm.LLMException as exc:
            if exc.status_code != timeout:
                raise
        if not self.retry_relinks:
            return self.unguarded(key, req)  # the bug: the link a timeout broke is still broken
        if not self.relink():
            return False
        try:
            self.dd.cache_manager.pull_cache(key, self.dst, batch_index=req)
        except llm.LLMException as exc:
            missing = exc.status_code == llm.LLMStatusCode.LLM_KV_CACHE_NOT_EXIST
            if missing and not self.missing_key_guarded:  # the bug: the timed-out pull had landed
                raise RuntimeError("unhandled LLM_KV_CACHE_NOT_EXIST in the pull retry") from exc
            if exc.status_code != timeout or self.second_timeout_guarded:
                raise
            return self.unguarded(key, req)  # the bug: a second timeout is retried without re-linking
        return True

    def unguarded(self, key: Any, req: int) -> bool:
        """A retry whose failure nobody handles: the connector's worker thread dies."""
        try:
            self.dd.cache_manager.pull_cache(key, self.dst, batch_index=req)
        except self.llm.LLMException as exc:
            raise RuntimeError(f"unhandled {exc.status_code.name} in the pull retry") from exc
        return True

    def serve(self) -> List[int]:
        """The requests served; errors the connector reports stay inside it (logged, not raised)."""
        llm = self.llm
        served: List[int] = []
        try:
            self.dd = llm.LLMDataDist(llm.LLMRole.DECODER, D_ID)
            # The hixl backend needs a listen address; port 0 is a client-only engine.
            self.dd.init(_options(f"{DECODE_IP}:0", True) if self.hixl else _options())
            self.dst = self.dd.cache_manager.allocate_cache(_desc(llm, self.requests))
            if not self.relink():
                return served
        except llm.LLMException:
            return served
        for req in range(self.requests):
            try:
                if self.pull(req):
                    served.append(req)
            except llm.LLMException:
                continue

        return served


class Buggy(Connector):
    retry_relinks = False


class Twice(Connector):
    second_timeout_guarded = False


class Landed(Connector):
    missing_key_guarded = False


def _check(world: SimWorld, connector_type: Type[Connector]) -> None:
    import llm_datadist

    prompt = _prompt(llm_datadist, connector_type.requests, connector_type.hixl)
    if prompt is None:
        return
    want = [view.copy() for view in tensor_views(prompt[1])]
    connector = connector_type(llm_datadist)
    connector.src_cache_id = prompt[1].cache_id  # what a Prompt tells its Decode out of band
    served = connector.serve()
    world.faults.clear()  # heals poisoned memory, so the check below can read it
    if not served or D_ID in world.killed:
        return
    got = tensor_views(connector.dst)
    for req in served:
        for a, b in zip(want, got):
            assert np.array_equal(a[req], b[req]), f"request {req} was served with the wrong bytes"


def careful(world: SimWorld) -> None:
    _check(world, Connector)


def buggy(world: SimWorld) -> None:
    _check(world, Buggy)


def twice(world: SimWorld) -> None:
    _check(world, Twice)


def landed(world: SimWorld) -> None:
    _check(world, Landed)


class Hixl(Connector):
    """The careful connector over the hixl transfer backend: its link is its own one-sided entity, a
    failed link set-up is ``LLM_FAILED`` or ``LLM_TIMEOUT`` and is retried, and a timed-out pull is
    retried once over a fresh link. The hixl backend pulls by the Prompt's cache id and batch index
    (hixl ``cache_manager.py`` accepts only ``CacheKeyByIdAndIndex`` there), so no pull consumes a key."""

    hixl = True

    def key(self, req: int) -> Any:
        return self.llm.CacheKeyByIdAndIndex(P_ID, self.src_cache_id, req)


def hixl_careful(world: SimWorld) -> None:
    _check(world, Hixl)


class MidTransfer(Connector):
    """Knows a dead peer by a pull's ``LLM_NOT_YET_LINK`` (the link is gone; if a re-link fails too, it
    stops serving), but takes a timed-out pull for a slow, live peer: a re-link that then fails is a
    crash. A peer killed before a pull is met the first way; one that dies while the transfer runs
    times that pull out, and the re-link fails (as it does when the peer hangs or is cut off at the
    pull)."""

    peer_gone = False

    def pull(self, req: int) -> bool:
        llm = self.llm
        if self.peer_gone:
            return False
        key = self.key(req)
        try:
            self.dd.cache_manager.pull_cache(key, self.dst, batch_index=req)
            return True
        except llm.LLMException as exc:
            code = exc.status_code
            if code not in (llm.LLMStatusCode.LLM_TIMEOUT, llm.LLMStatusCode.LLM_NOT_YET_LINK):
                raise
        if not self.relink():
            if code == llm.LLMStatusCode.LLM_TIMEOUT:  # the bug
                raise RuntimeError("re-link after a timed-out pull failed: the peer was taken for alive")
            self.peer_gone = True
            return False
        self.dd.cache_manager.pull_cache(key, self.dst, batch_index=req)
        return True


def mid_transfer(world: SimWorld) -> None:
    _check(world, MidTransfer)


class Twenty(Connector):
    """The careful connector serving 20 requests (explore's throughput benchmark)."""

    requests = 20


def careful_20(world: SimWorld) -> None:
    _check(world, Twenty)


class Both(Connector):
    """Two bugs in two places: the landed timeout's missing key, and the second timeout's retry."""

    missing_key_guarded = False
    second_timeout_guarded = False


def both(world: SimWorld) -> None:
    _check(world, Both)


RANKS = {P_ID: 0, D_ID: 1}
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


def trusts_the_link(world: SimWorld) -> None:
    """A rank-table connector that, after a timed-out pull, gives that request up and pulls the next on
    the same link (as the hixl code allows: the stream is aborted, the link kept); under the status
    table's reading that link is broken, and the next pull's ``LLM_NOT_YET_LINK`` escapes it."""
    import llm_datadist as llm

    p = llm.LLMDataDist(llm.LLMRole.PROMPT, P_ID)
    p.init(_options())
    d = llm.LLMDataDist(llm.LLMRole.DECODER, D_ID)
    d.init(_options())
    p.link("pd", RANKS, RANK_TABLE)
    comm = d.link("pd", RANKS, RANK_TABLE)
    while d.query_register_mem_status(comm) is llm.RegisterMemStatus.PREPARING:
        pass
    p.cache_manager.allocate_cache(_desc(llm, REQUESTS), [llm.CacheKey(P_ID, r) for r in range(REQUESTS)])
    dst = d.cache_manager.allocate_cache(_desc(llm, REQUESTS))
    for req in range(REQUESTS):
        try:
            d.cache_manager.pull_cache(llm.CacheKey(P_ID, req), dst, batch_index=req)
        except llm.LLMException as exc:
            if exc.status_code != llm.LLMStatusCode.LLM_TIMEOUT:
                raise RuntimeError(f"unhandled {exc.status_code.name} after a timed-out pull") from exc


def _kv_options(listen: str = "") -> Dict[str, str]:
    opts = {"ge.exec.deviceId": "0", "ge.flowGraphMemMaxSize": str(16 << 20)}
    if listen:
        opts["llm.listenIpInfo"] = listen
    return opts


class KvConnector:
    """The careful connector in KvCacheManager mode (``llm_datadist`` without the cache manager): the
    v1 manager raises ``llm_datadist_v1.LLMException`` with v1 codes, compared by name; a timed-out
    pull is ``LLM_WAIT_PROCESS_TIMEOUT``, after which the link is unlinked and made again before the
    one retry; any other failure gives the request up."""

    requests = REQUESTS

    def __init__(self, llm: Any) -> None:
        self.llm = llm
        self.dd: Any = None
        self.dst: Any = None

    def relink(self) -> bool:
        cluster = _cluster(self.llm)
        self.dd.unlink_clusters([cluster], 2000, force=True)
        for _ in range(3):
            ret, _rets = self.dd.link_clusters([cluster], 2000)
            if ret == self.llm.LLMStatusCode.LLM_SUCCESS:
                return True
        return False

    def pull(self, req: int) -> bool:
        import llm_datadist_v1

        key = self.llm.CacheKey(P_ID, req)
        manager = self.dd.kv_cache_manager
        try:
            manager.pull_cache(key, self.dst, batch_index=req)
            return True
        except llm_datadist_v1.LLMException as exc:
            if exc.status_code.name != "LLM_WAIT_PROCESS_TIMEOUT" or not self.relink():
                return False
        try:
            manager.pull_cache(key, self.dst, batch_index=req)
        except llm_datadist_v1.LLMException:
            return False
        return True

    def serve(self) -> List[int]:
        import llm_datadist_v1

        llm = self.llm
        served: List[int] = []
        try:
            self.dd = llm.LLMDataDist(llm.LLMRole.DECODER, D_ID)
            self.dd.init(_kv_options())
            self.dst = self.dd.kv_cache_manager.allocate_cache(_desc(llm, self.requests))
            if not self.relink():
                return served
        except (llm.LLMException, llm_datadist_v1.LLMException):
            return served
        served.extend(req for req in range(self.requests) if self.pull(req))
        return served


def kv_careful(world: SimWorld) -> None:
    """``careful`` in KvCacheManager mode: no error escapes, every served request holds its bytes."""
    import llm_datadist
    import llm_datadist_v1

    try:
        p = llm_datadist.LLMDataDist(llm_datadist.LLMRole.PROMPT, P_ID)
        p.init(_kv_options(f"{PROMPT_IP}:{PORT}"))
        keys = [llm_datadist.CacheKey(P_ID, r) for r in range(REQUESTS)]
        src = p.kv_cache_manager.allocate_cache(_desc(llm_datadist, REQUESTS), keys)
    except (llm_datadist.LLMException, llm_datadist_v1.LLMException):
        return
    for i, view in enumerate(tensor_views(src)):
        view[...] = np.arange(view.size, dtype=np.float16).reshape(view.shape) + i
    want = [view.copy() for view in tensor_views(src)]
    connector = KvConnector(llm_datadist)
    served = connector.serve()
    world.faults.clear()
    if not served or D_ID in world.killed:
        return
    for req in served:
        for a, b in zip(want, tensor_views(connector.dst)):
            assert np.array_equal(a[req], b[req]), f"request {req} was served with the wrong bytes"
