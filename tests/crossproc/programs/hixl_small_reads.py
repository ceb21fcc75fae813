"""Small cross-process ``hixl`` transfers, whose caller's side travels with the call and the reply:
``server`` registers a buffer of 0xAA and says which memory requests the fabric made of it; ``client``
READs from it (``client_write``: and WRITEs to it) and reports codes, its own bytes, and the memory
requests the fabric made of it meanwhile."""

from __future__ import annotations

import ctypes
import sys
from typing import List

import _common  # noqa: F401  (installs the fake)
import hixl
from _common import line, say

import datadist_sim.fabric
import datadist_sim.fabric.client.client as fabric_client

SERVER = "127.0.0.1:16301"
CLIENT = "127.0.0.1:16300"
SIZE = 64 << 10
SMALL = 4 << 10

served: List[str] = []
fabric_client.before_serving = served.append  # every memory request the fabric makes of this process


def server() -> None:
    engine = hixl.Hixl()
    assert engine.initialize(SERVER, {}) == hixl.SUCCESS
    buf = (ctypes.c_uint8 * SIZE)()
    ctypes.memset(buf, 0xAA, SIZE)
    code, handle = engine.register_mem(hixl.MemDesc(ctypes.addressof(buf), SIZE), hixl.MemType.MEM_HOST)
    assert code == hixl.SUCCESS, code
    say("addr", ctypes.addressof(buf))
    line()
    say("served", ",".join(served) or "-")
    say("intact", bytes(buf) == b"\xaa" * SIZE)
    say("written", bytes(buf[:SMALL]) == b"\x77" * SMALL and bytes(buf[SMALL:]) == b"\xaa" * (SIZE - SMALL))
    assert engine.deregister_mem(handle) == hixl.SUCCESS
    engine.finalize()
    say("finalized")
    line()
    say("done")


def client(mode: str = "read") -> None:
    remote = int(line())
    engine = hixl.Hixl()
    assert engine.initialize(CLIENT, {}) == hixl.SUCCESS
    buf = (ctypes.c_uint8 * SIZE)()
    addr = ctypes.addressof(buf)
    assert engine.register_mem(hixl.MemDesc(addr, SIZE), hixl.MemType.MEM_HOST)[0] == hixl.SUCCESS
    assert engine.connect(SERVER) == hixl.SUCCESS
    outside = (ctypes.c_uint8 * SMALL)()  # this process's memory, registered with no engine

    def read(descs: List[hixl.TransferOpDesc]) -> int:
        ctypes.memset(buf, 0x55, SIZE)
        ctypes.memset(outside, 0x55, SMALL)
        return engine.transfer_sync(SERVER, hixl.TransferOp.READ, descs)

    def untouched() -> bool:
        return bytes(buf) == b"\x55" * SIZE and bytes(outside) == b"\x55" * SMALL

    # two ranges in one call: the first 4 KiB and a 16 KiB block further on
    two = [hixl.TransferOpDesc(addr, remote, SMALL), hixl.TransferOpDesc(addr + SIZE // 2, remote, 16 << 10)]
    say("read", read(two))
    got = bytes(buf)
    aa = b"\xaa"
    say("bytes", got[:SMALL] == aa * SMALL and got[SIZE // 2 : SIZE // 2 + (16 << 10)] == aa * (16 << 10))
    say("rest", got[SMALL : SIZE // 2] == b"\x55" * (SIZE // 2 - SMALL))
    # refused by the fabric's world before any byte moves: nothing is written anywhere
    say("out_of_range", read([hixl.TransferOpDesc(addr, remote + SIZE - SMALL, 2 * SMALL)]), untouched())
    say("unregistered", read([hixl.TransferOpDesc(ctypes.addressof(outside), remote, SMALL)]), untouched())
    if mode == "write":  # small WRITEs: their bytes go with the call
        write = hixl.TransferOp.WRITE
        ctypes.memset(buf, 0x77, SMALL)
        past = [hixl.TransferOpDesc(addr, remote + SIZE - SMALL, 2 * SMALL)]
        say("write_out_of_range", engine.transfer_sync(SERVER, write, past))
        stray = [hixl.TransferOpDesc(ctypes.addressof(outside), remote + SMALL, SMALL)]
        say("write_unregistered", engine.transfer_sync(SERVER, write, stray))
        say("write", engine.transfer_sync(SERVER, write, [hixl.TransferOpDesc(addr, remote, SMALL)]))
    say("served", ",".join(served) or "-")
    say("status", datadist_sim.fabric.status()["peeks"])
    line()  # the server has finalized its engine (its process lives on)
    say("after_finalize", read([hixl.TransferOpDesc(addr, remote, SMALL)]), untouched())
    if mode == "write":
        ctypes.memset(buf, 0x77, SMALL)
        descs = [hixl.TransferOpDesc(addr, remote, SMALL)]
        say("write_after_finalize", engine.transfer_sync(SERVER, hixl.TransferOp.WRITE, descs))
    engine.finalize()
    say("done")


def client_under_a_rule() -> None:
    """The fabric's scenario has a rule for the first ``hixl.transfer_sync``; the second goes through."""
    remote = int(line())
    engine = hixl.Hixl()
    assert engine.initialize(CLIENT, {}) == hixl.SUCCESS
    buf = (ctypes.c_uint8 * SMALL)()
    addr = ctypes.addressof(buf)
    assert engine.register_mem(hixl.MemDesc(addr, SMALL), hixl.MemType.MEM_HOST)[0] == hixl.SUCCESS
    assert engine.connect(SERVER) == hixl.SUCCESS
    ctypes.memset(buf, 0x55, SMALL)
    descs = [hixl.TransferOpDesc(addr, remote, SMALL)]
    code = engine.transfer_sync(SERVER, hixl.TransferOp.READ, descs, timeout_in_millis=1000)
    say("first", code, bytes(buf) == b"\x55" * SMALL, bytes(buf) == b"\xaa" * SMALL)
    ctypes.memset(buf, 0x55, SMALL)
    assert engine.disconnect(SERVER) == hixl.SUCCESS  # the failure latched the connection: make it again
    assert engine.connect(SERVER) == hixl.SUCCESS
    say("second", engine.transfer_sync(SERVER, hixl.TransferOp.READ, descs), bytes(buf) == b"\xaa" * SMALL)
    engine.finalize()
    say("done")


if __name__ == "__main__":
    if sys.argv[1] == "client_write":
        client("write")
    else:
        {"server": server, "client": client, "client_rule": client_under_a_rule}[sys.argv[1]]()
