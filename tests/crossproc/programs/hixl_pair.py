"""One side of a cross-process ``hixl`` pair: ``server`` registers a buffer of its own (numpy) and
reports its bytes when told; ``client`` registers its own (ctypes), connects to the server's engine by
``"ip:port"``, and READs and WRITEs between the two processes' memory, reporting what it sees."""

from __future__ import annotations

import ctypes
import sys

import _common  # noqa: F401  (installs the fake)
import hixl
import numpy as np
from _common import digest, line, say

SERVER = "127.0.0.1:16101"
CLIENT = "127.0.0.1:16100"
SIZE = 512 << 10  # above the fabric's inline limit: the large READ goes through shared memory
SMALL = 4 << 10


def server() -> None:
    engine = hixl.Hixl()
    assert engine.initialize(SERVER, {}) == hixl.SUCCESS
    buf = np.random.default_rng(1).integers(0, 256, SIZE, dtype=np.uint8)
    addr = buf.__array_interface__["data"][0]
    code, handle = engine.register_mem(hixl.MemDesc(addr, SIZE), hixl.MemType.MEM_HOST)
    assert code == hixl.SUCCESS, code
    say("addr", addr)
    say("pattern", digest(buf))
    while True:
        command = line()
        if command == "digest":
            say("digest", digest(buf))
        elif command == "head":
            say("head", digest(buf[:SMALL]), digest(buf[SMALL:]))
        elif command == "notifies":
            code, found = engine.get_notifies()
            say("notifies", code, [(n.name, n.notify_msg) for n in found])
        else:
            break
    assert engine.deregister_mem(handle) == hixl.SUCCESS
    engine.finalize()
    say("done")


def client() -> None:
    remote_addr = int(line())
    engine = hixl.Hixl()
    assert engine.initialize(CLIENT, {}) == hixl.SUCCESS
    buf = (ctypes.c_uint8 * SIZE)()
    ctypes.memset(buf, 0x55, SIZE)
    addr = ctypes.addressof(buf)
    code, handle = engine.register_mem(hixl.MemDesc(addr, SIZE), hixl.MemType.MEM_HOST)
    assert code == hixl.SUCCESS, code
    say(
        "unconnected",
        engine.transfer_sync(SERVER, hixl.TransferOp.READ, [hixl.TransferOpDesc(addr, remote_addr, SMALL)]),
    )
    say("connect", engine.connect(SERVER, timeout_in_millis=5000))
    say("connect_again", engine.connect(SERVER))
    # a READ of the whole buffer, in 64 descriptors
    step = SIZE // 64
    descs = [hixl.TransferOpDesc(addr + i * step, remote_addr + i * step, step) for i in range(64)]
    say("read", engine.transfer_sync(SERVER, hixl.TransferOp.READ, descs, timeout_in_millis=30000))
    say("local", digest(buf))
    line()  # the test has read the server's bytes
    # a range past the server's registration: refused before any byte moves, on either side
    past = [hixl.TransferOpDesc(addr, remote_addr + SIZE - SMALL, 2 * SMALL)]
    say("out_of_range", engine.transfer_sync(SERVER, hixl.TransferOp.WRITE, past))
    # a small WRITE, asynchronous: the server's first 4 KiB become 0x77, nothing else anywhere changes
    small = (ctypes.c_uint8 * SMALL)()
    ctypes.memset(small, 0x77, SMALL)
    code, small_handle = engine.register_mem(
        hixl.MemDesc(ctypes.addressof(small), SMALL), hixl.MemType.MEM_HOST
    )
    assert code == hixl.SUCCESS, code
    write = [hixl.TransferOpDesc(ctypes.addressof(small), remote_addr, SMALL)]
    args = hixl.TransferArgs()
    args.user_data = 7
    code, req = engine.transfer_async(SERVER, hixl.TransferOp.WRITE, write, args)
    status = hixl.TransferStatus.WAITING
    while code == hixl.SUCCESS and status == hixl.TransferStatus.WAITING:
        code, status = engine.get_transfer_status(req)
    say("write_async", code, int(status))
    say("local_after_write", digest(buf))
    say("notify", engine.send_notify(SERVER, hixl.NotifyDesc("kv", "layer 0 done")))
    say("disconnect", engine.disconnect(SERVER))
    say("after_disconnect", engine.transfer_sync(SERVER, hixl.TransferOp.READ, descs[:1]))
    assert engine.deregister_mem(small_handle) == hixl.SUCCESS
    assert engine.deregister_mem(handle) == hixl.SUCCESS
    engine.finalize()
    say("done")


def client_of_a_lost_server() -> None:
    """Connects and reads once; told that the server's process is gone, waits until the fabric has
    seen it go, and reads again."""
    import time

    from datadist_sim import fabric

    remote_addr = int(line())
    engine = hixl.Hixl()
    assert engine.initialize(CLIENT, {}) == hixl.SUCCESS
    buf = (ctypes.c_uint8 * SMALL)()
    addr = ctypes.addressof(buf)
    assert engine.register_mem(hixl.MemDesc(addr, SMALL), hixl.MemType.MEM_HOST)[0] == hixl.SUCCESS
    assert engine.connect(SERVER) == hixl.SUCCESS
    descs = [hixl.TransferOpDesc(addr, remote_addr, SMALL)]
    say("read", engine.transfer_sync(SERVER, hixl.TransferOp.READ, descs))
    line()
    while fabric.status()["processes"] > 1:
        time.sleep(0.05)
    ctypes.memset(buf, 0x55, SMALL)
    say("read_after_loss", engine.transfer_sync(SERVER, hixl.TransferOp.READ, descs))
    say("untouched", bytes(buf) == b"\x55" * SMALL)
    engine.finalize()
    say("done")


if __name__ == "__main__":
    {"server": server, "client": client, "client_lost": client_of_a_lost_server}[sys.argv[1]]()
