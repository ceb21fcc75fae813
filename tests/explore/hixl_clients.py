"""Explore targets of the ``hixl`` engine API: a reader that fetches chunks of a server's registered
memory, written as a user would.

``hixl_careful`` handles every code the engine gives (docs/hixl_engine_facts.md, "Faults"): a failed or
timed-out transfer leaves the connection unusable, so it disconnects and connects again before a retry;
it gives up on a chunk after a few tries and reports only chunks it read. ``hixl_buggy`` retries a
timed-out transfer on the same connection and lets that retry's code escape (the planted bug: hixl
answers ``FAILED`` there until the client connects again). ``hixl_mixed`` runs an ``llm_datadist`` pair
on the hixl backend in one world with a hixl reader that reads the Prompt's cache through the engine the
Prompt listens with (docs/hixl_engine_facts.md §6: a plain hixl engine may connect to it). Each raises
``AssertionError`` when a chunk it calls read holds other bytes.
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
    """Reads ``CHUNKS`` chunks of the server's memory (from address ``base`` on) into its own buffer."""

    def __init__(self, hixl: Any, server: str = SERVER) -> None:
        self.hixl = hixl
        self.server = server
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
        if self.engine.connect_async(self.server, 1000) == hixl.SUCCESS:
            for _ in range(200):
                code, state = self.engine.get_async_connect_status(self.server)
                if code != hixl.SUCCESS or state == hixl.AsyncConnectStatus.CONNECTED:
                    break
                if state == hixl.AsyncConnectStatus.CONNECT_FAILED:
                    break
            if code == hixl.SUCCESS and state == hixl.AsyncConnectStatus.CONNECTED:
                return True
        return self.engine.connect(self.server, 1000) in (hixl.SUCCESS, hixl.ALREADY_CONNECTED)

    def reconnect(self) -> bool:
        self.engine.disconnect(self.server, 1000)  # NOT_CONNECTED when the engine dropped it: fine
        return self.engine.connect(self.server, 1000) in (self.hixl.SUCCESS, self.hixl.ALREADY_CONNECTED)

    def op(self, base: int, chunk: int) -> Any:
        at = chunk * CHUNK
        return self.hixl.TransferOpDesc(self.buf.ctypes.data + at, base + at, CHUNK)

    def read_async(self, base: int, chunk: int) -> int:
        """One chunk by ``transfer_async``, polled to its end: the code, or ``FAILED`` for a request that
        ended ``FAILED`` or never ended within the polls."""
        hixl = self.hixl
        code, req = self.engine.transfer_async(self.server, hixl.READ, [self.op(base, chunk)])
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

    def read(self, base: int, chunk: int) -> bool:
        hixl = self.hixl
        for _ in range(TRIES):
            if chunk % 2:
                code = self.read_async(base, chunk)
            else:
                code = self.engine.transfer_sync(self.server, hixl.READ, [self.op(base, chunk)], 1000)
            if code == hixl.SUCCESS:
                return True
            if not self.reconnect():
                continue
        return False

    def serve(self, base: int) -> List[int]:
        if not self.start() or not self.connect():
            return []
        read = [chunk for chunk in range(CHUNKS) if self.read(base, chunk)]
        self.engine.send_notify(self.server, self.hixl.NotifyDesc("done", str(len(read))), 500)
        return read

    def check(self, read: List[int], want: np.ndarray) -> None:
        for chunk in read:
            at = chunk * CHUNK
            assert np.array_equal(self.buf[at : at + CHUNK], want[at : at + CHUNK]), f"chunk {chunk} is wrong"


class Buggy(Reader):
    """Retries a timed-out transfer on the same connection, and takes anything but success there for
    a crash."""

    def read(self, base: int, chunk: int) -> bool:
        hixl = self.hixl
        code = self.engine.transfer_sync(self.server, hixl.READ, [self.op(base, chunk)], 1000)
        if code == hixl.TIMEOUT:
            code = self.engine.transfer_sync(self.server, hixl.READ, [self.op(base, chunk)], 1000)
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
    reader.check(reader.serve(data.ctypes.data), data)
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


PROMPT_ENGINE = "192.168.1.1:26000"
"""Where the Prompt listens, with its hixl engine (``hixl_transfer_engine.cc:88-106``)."""


def hixl_mixed(world: SimWorld) -> None:
    """An ``llm_datadist`` Prompt/Decode pair on the hixl backend and a ``hixl.Hixl`` reader in one
    world. The reader connects to the engine the Prompt listens with and reads the Prompt's cache
    (memory its pool registered with that engine, ``data_cache_engine.cc:295-296``); then the Decode
    links and pulls each request, re-linking once after a failed pull. A chunk the reader calls read and
    a pull the Decode calls done hold the Prompt's bytes."""
    import hixl
    import llm_datadist as llm

    from datadist_sim import tensor_views

    desc = llm.CacheDesc(1, [REQUESTS, CHUNK * CHUNKS // REQUESTS // 2], llm.DataType.DT_FLOAT16)
    try:
        prompt = _backend(llm, llm.LLMRole.PROMPT, 1, PROMPT_ENGINE)
        src = prompt.cache_manager.allocate_cache(desc)
        for view in tensor_views(src):
            view[...] = np.arange(view.size, dtype=np.float16).reshape(view.shape)
        want = [view.copy() for view in tensor_views(src)]
    except llm.LLMException:
        return
    reader = Reader(hixl, PROMPT_ENGINE)
    reader.check(reader.serve(src.tensor_addrs[0]), want[0].view(np.uint8).reshape(-1))
    reader.engine.finalize()
    try:
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
