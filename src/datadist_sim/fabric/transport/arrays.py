"""Numpy values on the fabric's wire: arrays, scalars and dtypes of plain numeric types only, each sent
as its dtype's name, its shape and its bytes, and built by the decoder itself (``fabric/transport/codec.py``).

numpy's own pickles rebuild a dtype from a state tuple the sender writes (its fields, its item size,
its flags) and an array from raw bytes over that dtype. A state that clears the flag saying "holds
object references" over an object field makes the receiver treat eight bytes the sender chose as a
pointer and follow it (a crash, or a read of memory the sender picked). So nothing of numpy's own form
travels: each builder here looks a dtype's name up in a fixed table of plain numeric dtypes (booleans,
integers, floats, complex numbers, either byte order), checks the shape and that the bytes are exactly
as many as shape and dtype say, and only then makes the array over bytes of its own. Anything else (a
structured or object dtype, a subclass of ``ndarray``) is a type the protocol does not carry.
"""

from __future__ import annotations

from typing import Any, Dict

import numpy as np

from datadist_sim.fabric.transport.exceptions import TypeRefused

_PLAIN = (
    np.bool_,
    np.int8,
    np.int16,
    np.int32,
    np.int64,
    np.uint8,
    np.uint16,
    np.uint32,
    np.uint64,
    np.float16,
    np.float32,
    np.float64,
    np.longdouble,
    np.complex64,
    np.complex128,
    np.clongdouble,
)
DTYPES: Dict[str, np.dtype[Any]] = {}
"""Every dtype a frame may name, by its ``dtype.str`` (``'<f2'``, ``'|b1'``, ``'>i8'`` ...)."""
for _type in _PLAIN:
    for _dtype in (np.dtype(_type), np.dtype(_type).newbyteorder()):
        DTYPES[_dtype.str] = _dtype
MOST_DIMENSIONS = 64
"""numpy's own limit on an array's dimensions (``NPY_MAXDIMS`` is 32 before numpy 2, 64 since)."""


def _refused(what: str) -> TypeRefused:
    return TypeRefused(f"numpy.{what}")


def build_array(name: Any, shape: Any, data: Any) -> np.ndarray:
    """The array a frame describes, over a buffer of its own; ``TypeRefused`` unless every part checks."""
    dtype = DTYPES.get(name) if type(name) is str else None
    if dtype is None:
        raise _refused(f"ndarray of dtype {name!r}")
    if type(shape) is not tuple or len(shape) > MOST_DIMENSIONS:
        raise _refused("ndarray of a malformed shape")
    count = 1
    for size in shape:
        if type(size) is not int or size < 0:
            raise _refused("ndarray of a malformed shape")
        count *= size
    if type(data) not in (bytes, bytearray) or count * dtype.itemsize != len(data):
        raise _refused("ndarray whose bytes do not match its shape")
    buffer = data if type(data) is bytearray else bytearray(data)  # writable, as the sent array was
    return np.frombuffer(buffer, dtype).reshape(shape)


def build_scalar(name: Any, data: Any) -> Any:
    dtype = DTYPES.get(name) if type(name) is str else None
    if dtype is None or type(data) is not bytes or len(data) != dtype.itemsize:
        raise _refused(f"scalar of dtype {name!r}")
    return np.frombuffer(data, dtype)[0]


def build_dtype(name: Any) -> np.dtype[Any]:
    dtype = DTYPES.get(name) if type(name) is str else None
    if dtype is None:
        raise _refused(f"dtype {name!r}")
    return dtype
