"""What a frame may make the fabric allocate, checked before the frame is decoded.

Both of the wire's decoders trust a size the frame declares before the bytes it sizes have arrived:

- ``marshal.loads`` makes a tuple or list of the declared length (8 bytes a slot, zeroed) and then reads
  its items, so a 5-byte frame ``(`` + a count allocates up to 16 GiB (CPython ``Python/marshal.c``,
  ``r_object``, ``TYPE_TUPLE`` and ``TYPE_LIST``); a long integer reserves its declared digits the same
  way (``r_PyLong``);
- the C unpickler grows its memo to twice any index a ``PUT``, ``BINPUT`` or ``LONG_BINPUT`` names
  (``Modules/_pickle.c``, ``_Unpickler_MemoPut``), so an 8-byte pickle allocates and zeroes a GiB.

So each frame is checked first, without building anything. What marshal allocates ahead is bounded when
the counts of all the tuples and lists a frame declares add up to no more than its length (each item is
a token of at least one byte that follows its container's header, so a frame honest about its counts
never declares more): a quick look sums the count after every byte that could start a tuple or a list
(a superset of the real headers, so a sum within bounds proves it), and only a frame where that sum is
too large, or that holds a byte of a code the compact encoder never writes, is walked token by token
to decide (it may be a string's bytes). The walk refuses any token the encoder does not write
(``marshal`` version 2 of ``None``, booleans, ints, floats, str, bytes, tuples, lists and dicts) and any
string or long integer that declares more bytes than are left. (The quick look leaves strings to
marshal: it refuses a text string longer than the data left before allocating it, ``r_string``; a bytes
string's declared length and a long integer's declared digits are reserved but never written, so they
cost address space, not memory, and are given back when the frame fails to decode.) A
pickled frame (two pickles) may not
name a memo slot (the ends' picklers number them with ``MEMOIZE``, one after another, which needs no
index). Then what decoding allocates is a small multiple of the frame's own length.
"""

from __future__ import annotations

import io
import pickletools
import struct
from typing import List

_COUNT = struct.Struct("<i").unpack_from
_UCOUNT = struct.Struct("<I").unpack_from

_FIXED: List[int] = [0] * 256
"""The length of each fixed-size token by its code (0: not one)."""
for _code, _size in ((b"N", 1), (b"T", 1), (b"F", 1), (b"0", 1), (b"{", 1), (b"i", 5), (b"g", 9)):
    _FIXED[_code[0]] = _size
_STR, _BYTES, _LONG = b"usl"
_OPENERS = b"(["
"""Codes of a tuple and a list, each followed by its count (4 bytes, little-endian)."""
# The codes of a small tuple, and of a tuple, list or small tuple kept as a reference (``FLAG_REF``):
# 0x29, 0xA8, 0xDB, 0xA9, never written by the compact encoder (``marshal`` version 2), each followed by
# a size of its own if read, so a frame holding one of these bytes is walked.
_MEMO_BY_INDEX = frozenset({"PUT", "BINPUT", "LONG_BINPUT"})


class FrameRefused(ValueError):
    """A frame that declares more than it holds, or holds a token the protocol never writes."""


def check_compact(frame: bytes) -> None:
    """``FrameRefused`` unless what ``marshal.loads`` would allocate ahead for ``frame`` is bounded by
    its length. The quick look runs on each call the fabric serves, so it is a few ``find`` calls and one
    read per tuple or list: a count read unsigned (a negative one, which marshal refuses, reads as huge
    and sends the frame to the walk), and no byte in the last four looked at (a header there has no
    whole count, and marshal fails before allocating)."""
    end = len(frame)
    limit = end - 4
    find = frame.find
    total = 0
    at = find(0x28, 0, limit)  # a tuple
    while at >= 0:
        total += _UCOUNT(frame, at + 1)[0]
        at = find(0x28, at + 1, limit)
    at = find(0x5B, 0, limit)  # a list
    while at >= 0:
        total += _UCOUNT(frame, at + 1)[0]
        at = find(0x5B, at + 1, limit)
    # (plain tests: a loop or a generator over the codes costs more than the look itself)
    if total > end or 0x29 in frame or 0xA8 in frame or 0xDB in frame or 0xA9 in frame:
        _walk(frame)


def _walk(frame: bytes) -> None:
    """Walk the frame token by token (no values built): ``FrameRefused`` unless every token is one the
    compact encoder writes, no string or long integer declares more than the bytes left, and the counts
    of all tuples and lists add up to no more than the frame's length."""
    end = len(frame)
    pos = 0
    total = 0
    fixed = _FIXED
    while pos < end:
        code = frame[pos]
        step = fixed[code]
        if step:
            pos += step
            continue
        if end - pos < 5:
            raise FrameRefused("a compact frame cut short")
        count = _COUNT(frame, pos + 1)[0]
        pos += 5
        if count < 0 and code != _LONG:
            raise FrameRefused("a negative size in a compact frame")
        if code in (_STR, _BYTES):
            pos += count
        elif code in _OPENERS:
            total += count
            if total > end:
                raise FrameRefused(f"a compact frame of {end} B declares {total} items or more")
        elif code == _LONG:
            pos += 2 * (count if count >= 0 else -count)
        else:
            raise FrameRefused(f"a compact frame holds a token of code {code:#x}, never written by the form")
        if pos > end:
            raise FrameRefused(f"a compact frame declares {pos - end} bytes more than it holds")


def check_pickled(frame: bytes) -> None:
    """Walk a pickled frame's opcodes (nothing built): ``FrameRefused`` if one names a memo index, or if
    the frame is not two whole pickles."""
    stream = io.BytesIO(frame)
    try:
        for _ in range(2):  # the envelope, then the payload
            for opcode, _arg, _pos in pickletools.genops(stream):
                if opcode.name in _MEMO_BY_INDEX:
                    raise FrameRefused(f"a pickled frame names a memo slot ({opcode.name})")
    except FrameRefused:
        raise
    except Exception as exc:  # cut short, or not a pickle: decoding it would fail the same way
        raise FrameRefused(f"a pickled frame that does not parse ({type(exc).__name__})") from None
