"""A hostile but authenticated client of a fabric: it passed the handshake (it knows the token, as any
process of this user may) and then writes whatever frames it likes, reading replies when it chooses."""

from __future__ import annotations

import itertools
import socket
from typing import Any, Tuple

from datadist_sim.fabric.transport import codec, wire
from datadist_sim.fabric.transport.address import FabricAddress
from datadist_sim.fabric.transport.exceptions import unpack_exception


class Attacker:
    def __init__(self, address: FabricAddress, *, hello: bool = True, timeout: float = 30.0) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(address.path)
        wire.client_handshake(self.sock, address.token)
        self.sock.settimeout(timeout)
        self._ids = itertools.count(1)
        self._loads = codec.make_loads()  # the fabric sends it no handles: it refuses them
        self._dumps = codec.make_dumps()
        if hello:
            assert self.call("hello")[0], "the fabric refused hello"

    def next_id(self) -> int:
        return next(self._ids)

    def send(self, frame: bytes) -> None:
        wire.send_frame(self.sock, frame)

    def request(self, kind: str, *payload: Any) -> int:
        rid = self.next_id()
        self.send(self._dumps(("req", rid, kind, payload)))
        return rid

    def reply(self, rid: int) -> Tuple[bool, Any]:
        """``(ok, value)`` of the reply to ``rid`` (a failure's value is the rebuilt exception)."""
        while True:
            message = self._loads(wire.recv_frame(self.sock))
            if message[0] == "rep" and message[1] == rid:
                ok, value = message[2], message[3]
                return bool(ok), value if ok else unpack_exception(value)

    def call(self, kind: str, *payload: Any) -> Tuple[bool, Any]:
        return self.reply(self.request(kind, *payload))

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Attacker:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
