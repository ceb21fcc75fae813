"""The reference workload of the ``hixl`` engine API (``[workload] mode = "hixl"``): P server engines
hold each request's bytes in registered memory, D client engines read them with ``transfer_sync``.

The client is a careful one, as the engine's codes advise (docs/hixl_engine_facts.md, "Faults"): a
transfer that timed out or failed leaves its connection unusable, so it disconnects and connects again
before a retry (with a backoff on the simulated clock); ``NOT_CONNECTED`` connects; a request is
delivered once its bytes check out. Engine names: server ``i`` is ``prompt_ip(i):PORT``, client ``j`` is
``192.168.j.1`` (rules name them so).
"""

from __future__ import annotations

import contextlib
from typing import Dict, List, Tuple

import numpy as np

from datadist_sim._world.surface import SimWorld
from datadist_sim.faults.files import Workload
from datadist_sim.hixl import (
    FAILED,
    MEM_DEVICE,
    MEM_HOST,
    NOT_CONNECTED,
    READ,
    SUCCESS,
    TIMEOUT,
    Hixl,
    MemDesc,
    TransferOpDesc,
)

CHUNK = 4096
"""Bytes per request."""


def prompt_ip(index: int) -> str:
    """The reference workload's address of Prompt (server) ``index``, shared by both of its modes."""
    return f"10.0.{index // 250}.{index % 250 + 1}"


def server_name(index: int, port: int) -> str:
    return f"{prompt_ip(index)}:{port}"


def client_name(index: int) -> str:
    return f"192.168.{index % 250}.1"


class HixlClient:
    """The reference hixl client over P servers and D clients."""

    def __init__(self, world: SimWorld, workload: Workload, port: int) -> None:
        self.world = world
        self.w = workload
        self.port = port
        self.servers: Dict[str, Tuple[Hixl, np.ndarray]] = {}
        self.clients: Dict[str, Tuple[Hixl, np.ndarray]] = {}
        self.rng = np.random.default_rng(world.seed)
        self.notes: List[str] = []
        self.size = CHUNK * workload.requests

    def start(self) -> None:
        for i in range(1, self.w.prompts + 1):
            self.servers[server_name(i, self.port)] = self._engine(server_name(i, self.port), MEM_DEVICE)
        for j in range(1, self.w.decodes + 1):
            self.clients[client_name(j)] = self._engine(client_name(j), MEM_HOST)

    def _engine(self, name: str, mem: object) -> Tuple[Hixl, np.ndarray]:
        engine = Hixl()
        assert engine.initialize(name, {}) == SUCCESS, f"initialize {name}"
        buf = np.zeros(self.size, dtype=np.uint8)
        code, _ = engine.register_mem(MemDesc(buf.ctypes.data, buf.nbytes), mem)
        assert code == SUCCESS, f"register_mem {name}"
        return engine, buf

    def link_all(self) -> None:
        for engine, _ in self.clients.values():
            for server in self.servers:
                engine.connect(server, 5000)

    def reconnect(self, client: Hixl, server: str) -> bool:
        client.disconnect(server, 1000)  # NOT_CONNECTED when it is gone already: fine
        for attempt in range(self.w.tries):
            if client.connect(server, 2000) == SUCCESS:
                return True
            self.world.clock.sleep(self.w.backoff_s * 2**attempt)
        return False

    def request(self, req_id: int) -> Tuple[bool, bool]:
        """Serve one request; returns (delivered, False): a READ cannot consume anything, so no
        outcome is indeterminate here."""
        server = list(self.servers)[req_id % len(self.servers)]
        client_name_ = list(self.clients)[req_id % len(self.clients)]
        client, local = self.clients[client_name_]
        remote = self.servers[server][1]
        at = req_id * CHUNK
        remote[at : at + CHUNK] = self.rng.integers(0, 256, CHUNK, dtype=np.uint8)
        op = TransferOpDesc(local.ctypes.data + at, remote.ctypes.data + at, CHUNK)
        for attempt in range(self.w.tries):
            code = client.transfer_sync(server, READ, [op], self.w.sync_kv_timeout_ms)
            if code == SUCCESS:
                return bool(np.array_equal(local[at : at + CHUNK], remote[at : at + CHUNK])), False
            if code in (TIMEOUT, FAILED, NOT_CONNECTED):
                if not self.reconnect(client, server):
                    return False, False
                continue
            self.world.clock.sleep(self.w.backoff_s * 2**attempt)
        return False, False

    def close(self) -> None:
        for engine, _ in [*self.clients.values(), *self.servers.values()]:
            with contextlib.suppress(Exception):
                engine.finalize()
