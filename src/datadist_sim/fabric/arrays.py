"""Numpy values on the fabric's wire: arrays, scalars and dtypes of plain numeric types only, each sent
as its dtype's name, its shape and its bytes, and built by the decoder itself.

numpy's own pickles rebuild a dtype from a state tuple the sender writes (its fields, its item size,
its flags) and an array from raw bytes over that dtype. A state that clears the flag saying "holds
object references" over an object field makes the receiver treat eight bytes the sender chose as a
pointer and follow it (a crash, or a read of memory the sender picked). So no numpy global is admitted
at all: an end's pickler sends a plain array as ``build_array(dtype name, shape, bytes)``, a scalar as
``build_scalar(dtype name, bytes)`` and a dtype as ``build_dtype(name)``; each builder looks the name
up in a fixed table of plain numeric dtypes (booleans, integers, floats, complex numbers, either byte
order), checks the shape and that the bytes are exactly as many as shape and dtype say, and only then
makes the array over bytes of its own. Anything else (a structured or object dtype, a subclass of
``ndarray``) pickles as numpy pickles it, and the peer refuses that global: the request gets a
``TypeError`` naming it, as any other type the protocol does not carry.
"""

from __future__ import annotations

import pickle
from typing import Any, Callable, Dict, Tuple

import numpy as np

from datadist_sim.fabric.wire import TypeRefused

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
    return TypeRefused("numpy", what)


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
    buffer = data if type(data) is bytearray else bytearray(data)  # writable, as a pickled array is
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


BUILDERS: Tuple[Callable[..., Any], ...] = (build_array, build_scalar, build_dtype)
"""The globals a frame may name for numpy values."""


def _reduce_array(array: np.ndarray) -> Any:
    if array.dtype.str not in DTYPES:  # numpy's own form, which the peer refuses
        return array.__reduce_ex__(pickle.HIGHEST_PROTOCOL)
    data = np.ascontiguousarray(array)
    # a writable buffer pickles (protocol 5) as a bytearray the decoder builds on without a copy
    return build_array, (array.dtype.str, tuple(array.shape), pickle.PickleBuffer(data.data))


def _reduce_scalar(value: np.generic) -> Any:
    return build_scalar, (value.dtype.str, value.tobytes())


def _reduce_dtype(dtype: np.dtype[Any]) -> Any:
    if dtype.str not in DTYPES or dtype.fields is not None:
        return dtype.__reduce__()
    return build_dtype, (dtype.str,)


def dispatch_table() -> Dict[type, Callable[[Any], Any]]:
    """How an end's pickler sends numpy values (``Pickler.dispatch_table``: looked up by exact type)."""
    table: Dict[type, Callable[[Any], Any]] = {np.ndarray: _reduce_array}
    for plain in _PLAIN:
        table[plain] = _reduce_scalar
    for dtype in DTYPES.values():
        table[type(dtype)] = _reduce_dtype
    return table
