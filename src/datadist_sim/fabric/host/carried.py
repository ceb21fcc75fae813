"""What a client process's own request carries of its memory: the bytes a small ``hixl`` READ writes into
the caller's memory, handed back in its reply, and the bytes a small WRITE reads from it, handed in with
its call. Either way the fabric makes no request of the caller while the caller waits for its reply
(each such request is a round trip through the caller's service connection), and the world decides
everything (ranges, faults, time, trace) exactly as for any transfer: the router (``raw.py``) consults
the carried bytes only where it would otherwise ask the caller.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

from datadist_sim.fabric.host.session import Session, calling_session
from datadist_sim.fabric.transport.memfile import Bytes

Range = Tuple[int, int]

INLINE_BYTES = 256 << 10
"""Raw-memory reads and writes up to this size travel in the message; larger ones through shared memory.
A transfer carries at most this much in its call or its reply."""


class Carried:
    """One request's carried bytes. ``vouched``: the caller's ranges it checked, before it called, to be
    writable memory of its own (it checks again before it writes what comes back), so no request asks it
    to check them. ``supplied``: the bytes of the caller's ranges, read by the caller as it called, by
    ``(address, nbytes)``; ``sources_in_hand`` says every source of the transfer is among them."""

    def __init__(
        self,
        session: Session,
        vouched: Sequence[Range] = (),
        supplied: Optional[Mapping[Range, bytes]] = None,
    ) -> None:
        self.session = session
        self.vouched = list(vouched)
        self.supplied: Dict[Range, bytes] = dict(supplied or {})
        self.sources_in_hand = bool(self.supplied)
        self.chunks: List[Tuple[int, bytes]] = []
        """What the world wrote into the vouched ranges, in order: the reply's."""
        self.nbytes = 0

    def covers(self, ranges: Sequence[Range]) -> bool:
        """Whether every range lies inside one vouched range."""
        return all(
            any(a <= address and address + n <= a + m for a, m in self.vouched) for address, n in ranges
        )

    def take(self, chunks: Sequence[Tuple[int, Bytes]]) -> bool:
        """Keep ``chunks`` for the reply if they are the caller's vouched memory and fit the reply (else
        False: they are written the ordinary way)."""
        total = sum(data.nbytes for _, data in chunks)
        if self.nbytes + total > INLINE_BYTES or not self.covers([(a, d.nbytes) for a, d in chunks]):
            return False
        self.chunks.extend((address, data.tobytes()) for address, data in chunks)
        self.nbytes += total
        return True

    def give(self, ranges: Sequence[Range]) -> Optional[List[bytes]]:
        """The supplied bytes of exactly these ranges, or None if any is not supplied."""
        found = [self.supplied.get(key) for key in ranges]
        return None if any(data is None for data in found) else found  # type: ignore[return-value]


_carried = threading.local()


@contextlib.contextmanager
def carrying(
    vouched: Sequence[Range] = (), supplied: Optional[Mapping[Range, bytes]] = None
) -> Iterator[Carried]:
    """While the body runs, on this thread, the calling process's request carries ``Carried`` (which it
    yields): the router keeps the world's writes into ``vouched`` for the reply, reads ``supplied``
    from it, and reads sources of other processes itself where it can (``RawRouter.read``)."""
    session = calling_session()
    if session is None:
        raise RuntimeError("only a client process's request carries bytes")
    found = Carried(session, vouched, supplied)
    before = getattr(_carried, "value", None)
    _carried.value = found
    try:
        yield found
    finally:
        _carried.value = before


def current() -> Optional[Carried]:
    """What the request this thread runs carries, if anything."""
    found: Optional[Carried] = getattr(_carried, "value", None)
    return found
