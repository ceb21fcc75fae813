"""Explore targets of the ``hixl`` engine API: a reader that fetches chunks of a server's registered
memory, written as a user would.

``hixl_careful`` handles every code the engine gives (docs/hixl_engine_facts.md, "Faults"): a failed or
timed-out transfer leaves the connection unusable, so it disconnects and connects again before a retry;
it gives up on a chunk after a few tries and reports only chunks it read. ``hixl_buggy`` retries a
timed-out transfer on the same connection and lets that retry's code escape (the planted bug: hixl
answers ``FAILED`` there until the client connects again). ``hixl_mixed`` runs a hixl reader beside an
``llm_datadist`` pair on the hixl backend in one world (docs/hixl_engine_facts.md: the vendor allows
both in one process). Each raises ``AssertionError`` when a chunk it calls read holds other bytes.
"""

from __future__ import annotations

import json
from typing import Any, List, Optional, Tuple

import numpy as np

from datadist_sim import SimWorld

SERVER, CLIENT = "10.0.0.1:26001", "10.0.0.2"
CHUNK, CHUNKS, TRIES = 1024, 6, 3
REQUESTS = 3


def _server(hixl: Any) -> Optional[Tuple[Any, np.ndarray]]:
    """The side not under test: a fault that stops it setting up ends the run quietly."""
    server = hixl.Hixl()
    if server.initialize(SERVER, {}) != hixl.SUCCESS:
        return None
    data = (np.arange(CHUNK * CHUNKS) % 251).astype(np.uint8)
    code, _ = server.register_mem(hixl.MemDesc(data.ctypes.data, data.nbytes), hixl.MEM_DEVICE)
    return (server, data) if code == hixl.SUCCESS else None


class Reader:
    """Reads ``CHUNKS`` chunks of the server's memory into its own buffer."""

    def __init__(self, hixl: Any) -> None:
        self.hixl = hixl
        self.engine = hixl.Hixl()
        self.buf = np.zeros(CHUNK * CHUNKS, dtype=np.uint8)

    def start(self) -> bool:
        hixl = self.hixl
        if self.engine.initialize(CLIENT, {}) != hixl.SUCCESS:
            return False
        code, _ = self.engine.register_mem(hixl.MemDesc(self.buf.ctypes.data, self.buf.nbytes), hixl.MEM_HOST)
        return bool(code == hixl.SUCCESS)

    def connect(self) -> bool:
        """Connect asynchronously, falling back to a plain connect when the pool is full or it fails."""
        hixl = self.hixl
        if self.engine.connect_async(SERVER, 1000) == hixl.SUCCESS:
            for _ in range(200):
                code, state = self.engine.get_async_connect_status(SERVER)
                if code != hixl.SUCCESS or state == hixl.AsyncConnectStatus.CONNECTED:
                    break
                if state == hixl.AsyncConnectStatus.CONNECT_FAILED:
                    break
            if code == hixl.SUCCESS and state == hixl.AsyncConnectStatus.CONNECTED:
                return True
        return self.engine.connect(SERVER, 1000) in (hixl.SUCCESS, hixl.ALREADY_CONNECTED)

    def reconnect(self) -> bool:
        self.engine.disconnect(SERVER, 1000)  # NOT_CONNECTED when the engine dropped it: fine
        return self.engine.connect(SERVER, 1000) in (self.hixl.SUCCESS, self.hixl.ALREADY_CONNECTED)

    def op(self, data: np.ndarray, chunk: int) -> Any:
        at = chunk * CHUNK
        return self.hixl.TransferOpDesc(self.buf.ctypes.data + at, data.ctypes.data + at, CHUNK)

    def read_async(self, data: np.ndarray, chunk: int) -> int:
        """One chunk by ``transfer_async``, polled to its end: the code, or ``FAILED`` for a request that
        ended ``FAILED`` or never ended within the polls."""
        hixl = self.hixl
        code, req = self.engine.transfer_async(SERVER, hixl.READ, [self.op(data, chunk)])
        if code != hixl.SUCCESS:
            return int(code)
        for _ in range(1000):
            code, status = self.engine.get_transfer_status(req)
            if code != hixl.SUCCESS:
                return int(code)
            if status == hixl.TransferStatus.COMPLETED:
                return int(hixl.SUCCESS)
            if status != hixl.TransferStatus.WAITING:
                return int(hixl.FAILED)
        return int(hixl.TIMEOUT)

    def read(self, data: np.ndarray, chunk: int) -> bool:
        hixl = self.hixl
        for _ in range(TRIES):
            if chunk % 2:
                code = self.read_async(data, chunk)
            else:
                code = self.engine.transfer_sync(SERVER, hixl.READ, [self.op(data, chunk)], 1000)
            if code == hixl.SUCCESS:
                return True
            if not self.reconnect():
                continue
        return False

    def serve(self, data: np.ndarray) -> List[int]:
        if not self.start() or not self.connect():
            return []
        read = [chunk for chunk in range(CHUNKS) if self.read(data, chunk)]
        self.engine.send_notify(SERVER, self.hixl.NotifyDesc("done", str(len(read))), 500)
        return read


class Buggy(Reader):
    """Retries a timed-out transfer on the same connection, and takes anything but success there for
    a crash."""

    def read(self, data: np.ndarray, chunk: int) -> bool:
        hixl = self.hixl
        code = self.engine.transfer_sync(SERVER, hixl.READ, [self.op(data, chunk)], 1000)
        if code == hixl.TIMEOUT:
            code = self.engine.transfer_sync(SERVER, hixl.READ, [self.op(data, chunk)], 1000)
            if code != hixl.SUCCESS:
                raise RuntimeError(f"unhandled hixl code {code} on the retry")
        return bool(code == hixl.SUCCESS)


def _check(reader_type: type) -> None:
    import hixl

    served = _server(hixl)
    if served is None:
        return
    server, data = served
    reader = reader_type(hixl)
    read = reader.serve(data)
    for chunk in read:
        at = chunk * CHUNK
        assert np.array_equal(reader.buf[at : at + CHUNK], data[at : at + CHUNK]), f"chunk {chunk} is wrong"
    reader.engine.finalize()
    server.finalize()


def hixl_careful(world: SimWorld) -> None:
    _check(Reader)


def hixl_buggy(world: SimWorld) -> None:
    _check(Buggy)


def _backend(llm: Any, role: Any, cluster: int, listen: str) -> Any:
    dd = llm.LLMDataDist(role, cluster)
    dd.init(
        {
            "ge.exec.deviceId": "0",
            "llm.EnableCacheManager": "1",
            "llm.TransferBackend": "hixl",
            "llm.listenIpInfo": listen,
            "llm.MemPoolConfig": json.dumps({"memory_size": 1 << 24, "page_shift": 16}),
        }
    )
    return dd


def _pull_all(world: SimWorld, llm: Any) -> None:
    """An ``llm_datadist`` Prompt/Decode pair on the hixl backend: the Decode links and pulls each
    request, re-linking once after a failed pull; a pull it calls done holds the Prompt's bytes."""
    from datadist_sim import tensor_views

    desc = llm.CacheDesc(1, [REQUESTS, 256], llm.DataType.DT_FLOAT16)
    try:
        prompt = _backend(llm, llm.LLMRole.PROMPT, 1, "192.168.1.1:26000")
        src = prompt.cache_manager.allocate_cache(desc)
        for view in tensor_views(src):
            view[...] = np.arange(view.size, dtype=np.float16).reshape(view.shape)
        want = [view.copy() for view in tensor_views(src)]
        decode = _backend(llm, llm.LLMRole.DECODER, 2, "192.168.2.1:0")
        dst = decode.cache_manager.allocate_cache(desc)
    except llm.LLMException:
        return
    cluster = llm.LLMClusterInfo()
    cluster.remote_cluster_id = 1
    cluster.append_local_ip_info("192.168.2.1", 0)
    cluster.append_remote_ip_info("192.168.1.1", 26000)

    def link() -> bool:
        decode.unlink_clusters([cluster], force=True)
        return any(
            decode.link_clusters([cluster], 2000)[0] == llm.LLMStatusCode.LLM_SUCCESS for _ in range(3)
        )

    if not link():
        return
    pulled = []
    for req in range(REQUESTS):
        for _ in range(2):
            try:
                key = llm.CacheKeyByIdAndIndex(1, src.cache_id, req)  # the hixl backend pulls by id
                decode.cache_manager.pull_cache(key, dst, batch_index=req)
            except llm.LLMException:
                if not link():
                    break
                continue
            pulled.append(req)
            break
    world.faults.clear()  # heals poisoned memory, so the check below can read it
    if 2 in world.killed:  # the Decode's memory went with it
        return
    got = tensor_views(dst)
    for req in pulled:
        for a, b in zip(want, got):
            assert np.array_equal(a[req], b[req]), f"request {req} was pulled with the wrong bytes"


def hixl_mixed(world: SimWorld) -> None:
    """A hixl reader and an ``llm_datadist`` pair on the hixl backend in one world: the vendor builds
    both from one engine factory, each its own object on its own listener, so one process may hold
    both (docs/hixl_engine_facts.md, "Faults"); each serves on its own."""
    import llm_datadist

    _check(Reader)
    _pull_all(world, llm_datadist)
