"""Enums, cache descriptions and cache handles; re-exported by ``llm_types``."""

from __future__ import annotations

import contextlib
import logging
import math
from enum import Enum, IntEnum
from typing import Any, List, Optional, Protocol, Sequence, Tuple, Union, cast

from datadist_sim.llm_datadist.data_type import DataType, element_size
from datadist_sim.llm_datadist.status import LLMException, raise_if_false
from datadist_sim.llm_datadist.utils.utils import (
    check_int32,
    check_int64,
    check_isinstance,
    check_list_int64,
    check_uint32,
)

_log = logging.getLogger("datadist_sim.llm_datadist")


class PushType(Enum):
    NO_CACHE_KEY = 0
    BLOCKS_CACHE_KEY = 1
    CACHE_KEY_BY_ID = 2


class RegisterMemStatus(Enum):
    OK = 0
    PREPARING = 1
    FAILED = 2


int_to_mem_status_dict = {
    0: RegisterMemStatus.OK,
    1: RegisterMemStatus.PREPARING,
    2: RegisterMemStatus.FAILED,
}


class Memtype(Enum):
    MEM_TYPE_DEVICE = 0
    MEM_TYPE_HOST = 1


class Placement(IntEnum):
    """Where a cache lives; ``str()`` is ``"Placement.HOST"`` on every Python version."""

    HOST = 0
    DEVICE = 1

    def __str__(self) -> str:
        return f"{self.__class__.__name__}.{self.name}"


class MemInfo:
    """A memory range handed to ``remap_registered_memory``. ``None`` passes every type check, as in real."""

    def __init__(self, mem_type: Memtype, addr: int, size: int) -> None:
        check_isinstance("mem_type", mem_type, Memtype)
        check_isinstance("addr", addr, int)
        check_isinstance("size", size, int)
        self._mem_type = mem_type
        self._addr = addr
        self._size = size

    @property
    def mem_type(self) -> Memtype:
        return self._mem_type

    @property
    def addr(self) -> int:
        return self._addr

    @property
    def size(self) -> int:
        return self._size

    def __str__(self) -> str:
        return f"MemInfo(mem_type={self._mem_type}, addr={self._addr}, size={self._size})"

    def __repr__(self) -> str:
        return self.__str__()


Shape = Union[List[int], Tuple[int, ...]]


class CacheDesc:
    """Shape and type of the ``num_tensors`` equally shaped tensors of one cache.

    ``shape`` is the very object passed in (``update_dim`` mutates it in place, so it must be a list for
    that). ``batch_size`` is frozen at construction, and ``size`` (bytes per tensor) is computed lazily.
    """

    def __init__(
        self,
        num_tensors: int,
        shape: Shape,
        data_type: DataType,
        placement: Placement = Placement.DEVICE,
        batch_dim_index: int = 0,
        seq_len_dim_index: int = -1,
        kv_tensor_format: Optional[str] = None,
    ) -> None:
        self._num_tensors = num_tensors
        self._shape = shape
        check_uint32("num_tensors", num_tensors)
        check_isinstance("shape", shape, [tuple, list], int)
        check_isinstance("data_type", data_type, DataType)
        check_isinstance("placement", placement, Placement)
        check_isinstance("batch_dim_index", batch_dim_index, int)
        check_int32("seq_len_dim_index", seq_len_dim_index)
        check_isinstance("kv_tensor_format", kv_tensor_format, str)
        raise_if_false(
            0 <= batch_dim_index < len(shape),
            "batch_dim_index {0} out of range, [0, {1})",
            batch_dim_index,
            len(shape),
        )
        raise_if_false(
            seq_len_dim_index == -1 or 0 <= seq_len_dim_index < len(shape),
            "seq_len_dim_index {0} is invalid, should be -1 or in range [0, {1})",
            seq_len_dim_index,
            len(shape),
        )
        check_list_int64("shape", shape)
        self._data_type = data_type
        self._batch_dim = batch_dim_index
        self._batch_size = shape[batch_dim_index]
        self._seq_len_dim_index = seq_len_dim_index
        self._size = -1
        self._kv_tensor_format = kv_tensor_format
        self._placement = placement
        self._is_blocks = False  # the default kind ``pack_cache_desc`` packs; no API changes it

    def __repr__(self) -> str:
        # The missing space before kv_tensor_format is the real repr's.
        return (
            f"CacheDesc(num_tensors={self._num_tensors}, shape={self._shape}, data_type={self._data_type}, "
            f"placement={self._placement}, batch_dim_index={self._batch_dim}, "
            f"seq_len_dim_index={self._seq_len_dim_index},kv_tensor_format={self._kv_tensor_format})"
        )

    @property
    def num_tensors(self) -> int:
        return self._num_tensors

    @property
    def shape(self) -> Shape:
        return self._shape

    def update_dim(self, dim_index: int, dim_value: int) -> None:
        self._shape[dim_index] = dim_value  # type: ignore[index]  # a tuple shape fails, as in real
        self._size = -1

    @property
    def data_type(self) -> DataType:
        return self._data_type

    @property
    def batch_dim(self) -> int:
        return self._batch_dim

    @property
    def batch_size(self) -> int:
        return self._batch_size

    @property
    def seq_len_dim_index(self) -> int:
        return self._seq_len_dim_index

    @property
    def size(self) -> int:
        """``prod(shape) * element_size``; a dynamic (negative) dim cannot be sized and raises.

        The real error carries no status code (so ``LLM_SUCCESS``), and we keep that.
        """
        if self._size == -1:
            size = (
                -1
                if any(dim < 0 for dim in self._shape)
                else math.prod(self._shape) * element_size(self._data_type)
            )
            if size < 0:
                raise LLMException(
                    f"Failed to calc tensor size, shape = {self._shape}, data_type = {self._data_type}"
                )
            self._size = size
        return self._size

    @property
    def kv_tensor_format(self) -> Optional[str]:
        return self._kv_tensor_format

    @property
    def placement(self) -> Placement:
        return self._placement


class Cache:
    """A CacheManager-mode cache handle. Created by the manager; users should not build one.

    There is deliberately no ``__del__``: v2 caches are only freed explicitly.
    """

    def __init__(
        self,
        cache_id: int,
        cache_desc: CacheDesc,
        tensor_addrs: List[int],
        cache_manager: Any,
        is_registered: bool,
        is_blocks_cache: bool,
    ) -> None:
        self._cache_id = cache_id
        check_int64("cache_id", cache_id)
        self._cache_desc = cache_desc
        self._tensor_addrs = tensor_addrs
        self._valid = True
        self._cache_manager = cache_manager
        self._is_registered = is_registered
        self._is_blocks_cache = is_blocks_cache

    @classmethod
    def create_cpu_cache(cls, cache_desc: CacheDesc, addrs: List[int]) -> Cache:
        """Wrap caller-owned host memory; it gets ``cache_id == -1`` and counts as a blocks cache."""
        check_isinstance("cache_desc", cache_desc, CacheDesc)
        check_isinstance("addrs", addrs, list, int)
        raise_if_false(cache_desc.placement == Placement.HOST, "cache_desc placement must be HOST")
        raise_if_false(
            cache_desc.num_tensors == len(addrs),
            f"cache_desc num_tensors:{cache_desc.num_tensors} not equal addrs num:{len(addrs)}",
        )
        return cls(-1, cache_desc, addrs, None, False, True)

    def _invalidate(self) -> None:
        """Called by the manager on deallocate/unregister: the addresses vanish, as in real."""
        self._tensor_addrs = []
        self._valid = False

    @property
    def cache_id(self) -> int:
        return self._cache_id

    @property
    def cache_desc(self) -> CacheDesc:
        return self._cache_desc

    @property
    def tensor_addrs(self) -> List[int]:
        return self._tensor_addrs

    @property
    def is_blocks_cache(self) -> bool:
        return self._is_blocks_cache

    def __str__(self) -> str:
        return (
            f"Cache(cache_id = {self._cache_id}, device_tensor_addrs = {len(self._tensor_addrs)}, "
            f"is_blocks_cache = {self._is_blocks_cache})"
        )

    def __repr__(self) -> str:
        return self.__str__()


class _KvCacheOwner(Protocol):
    def is_initialized(self) -> bool: ...

    def deallocate_cache(self, cache: KvCache) -> None: ...


class KvCache:
    """A KvCacheManager-mode (v1) cache handle. Created by the manager; users should not build one."""

    def __init__(
        self,
        cache_id: int,
        cache_desc: CacheDesc,
        per_device_tensor_addrs: List[List[int]],
        kv_cache_manager: Optional[_KvCacheOwner],
    ) -> None:
        self._cache_id = cache_id
        check_int64("cache_id", cache_id)
        self._cache_desc = cache_desc
        self._per_device_tensor_addrs = per_device_tensor_addrs
        self._valid = True
        self._kv_cache_manager = kv_cache_manager
        self._trace_form: object = None
        """How the trace shows this cache, made at its first traced call (the trace must not keep the
        cache itself, which frees its memory when collected)."""

    def __del__(self) -> None:
        """Safety net freeing a forgotten cache, under the real condition (valid, owned, manager alive).

        Unlike real, any error is swallowed: an exception in ``__del__`` is unraisable, and a half-built
        object (``check_int64`` failed in ``__init__``) must not trip over missing attributes.
        """
        with contextlib.suppress(Exception):
            manager = getattr(self, "_kv_cache_manager", None)
            if getattr(self, "_valid", False) and manager is not None and manager.is_initialized():
                _log.info("auto deallocate kv cache: %s", self._cache_id)
                manager.deallocate_cache(self)

    def _invalidate(self) -> None:
        """Called by the manager on deallocate; afterwards ``__del__`` does nothing."""
        self._per_device_tensor_addrs = []
        self._valid = False

    @property
    def cache_id(self) -> int:
        return self._cache_id

    @property
    def cache_desc(self) -> CacheDesc:
        return self._cache_desc

    @property
    def per_device_tensor_addrs(self) -> List[List[int]]:
        return self._per_device_tensor_addrs

    def __str__(self) -> str:
        return f"KvCache(cache_id = {self._cache_id}, num_devices = {len(self._per_device_tensor_addrs)})"

    def __repr__(self) -> str:
        return self.__str__()

    @classmethod
    def create_cpu_cache(cls, cache_desc: CacheDesc, addrs: Union[List[int], List[List[int]]]) -> KvCache:
        """Wrap host memory: a flat list (one device) or one list per device, each ``num_tensors`` long."""
        check_isinstance("cache_desc", cache_desc, CacheDesc)
        raise_if_false(cache_desc.placement == Placement.HOST, "cache_desc placement must be HOST")
        check_isinstance("addrs", addrs, list)
        raise_if_false(len(addrs) > 0, "addrs length should be bigger than zero.")
        items: Sequence[Any] = addrs
        last_type: type = type(items[0])
        for addr in items:
            check_isinstance("the internal element of addrs", addr, [list, int])
            if isinstance(addr, list):
                check_isinstance("the internal element of addrs", addr, list, int)
                raise_if_false(
                    cache_desc.num_tensors == len(addr),
                    f"cache_desc num_tensors:{cache_desc.num_tensors} "
                    f"should be equal to size of the internal element of addrs:{len(addr)}",
                )
            raise_if_false(
                isinstance(addr, last_type), "the type of the internal element of addrs should be consistent."
            )
            last_type = type(addr)
        if last_type is int:
            raise_if_false(
                cache_desc.num_tensors == len(addrs),
                f"cache_desc num_tensors:{cache_desc.num_tensors} "
                f"should be equal to size of addrs:{len(addrs)}",
            )
            return cls(-1, cache_desc, [cast(List[int], addrs)], None)
        # The caller's list becomes the handle's list (no copy), as in the real classmethod.
        return cls(-1, cache_desc, cast(List[List[int]], addrs), None)
