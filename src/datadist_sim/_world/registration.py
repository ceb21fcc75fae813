"""Registered-memory limits of ``register_cache`` / ``register_blocks_cache`` .

The documented limits (hixl ``docs/zh/api/python/CacheManager.md``, ``brief.md``; doc-only):

- at most 240 addresses across all ``register_cache`` and ``register_blocks_cache`` calls;
- at most 50 GB of device memory registered;
- at most 20 GB of host memory registered (HDK < 25.5; 1 TB from HDK 25.5 on, see ``HOST_LIMIT_NEW_HDK``).

No producer of these limits exists in the open-source engine (hixl 9ed283b: ``RegisterCacheMem`` checks
none of them; the real limits live in HCCL/the driver). The code raised here, ``LLM_PARAM_INVALID``, is
therefore **inferred**: it is what the engine returns for every other rejected register argument.
"GB" is read as GiB (``2**30``), the more permissive reading; every limit is a constructor argument.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Hashable, Sequence

from datadist_sim._status import LLMStatusCode
from datadist_sim._world.errors import SimError

GIB = 1 << 30
MAX_REGISTERED_ADDRESSES = 240
DEVICE_LIMIT = 50 * GIB
HOST_LIMIT = 20 * GIB
HOST_LIMIT_NEW_HDK = 1024 * GIB
LIMIT_CODE = LLMStatusCode.LLM_PARAM_INVALID


@dataclass(frozen=True)
class _Entry:
    addresses: int
    nbytes: int
    device: bool


class RegistrationLedger:
    """Counts what one engine instance has registered and refuses what would break a limit.

    A refused registration changes nothing. Keyed by an owner (the cache id), so ``unregister`` needs only
    the id, as ``unregister_cache(cache_id)`` does.
    """

    def __init__(
        self,
        *,
        max_addresses: int = MAX_REGISTERED_ADDRESSES,
        max_device_bytes: int = DEVICE_LIMIT,
        max_host_bytes: int = HOST_LIMIT,
    ) -> None:
        self.max_addresses = max_addresses
        self.max_device_bytes = max_device_bytes
        self.max_host_bytes = max_host_bytes
        self._lock = threading.Lock()
        self._entries: dict[Hashable, _Entry] = {}
        self._addresses = 0
        self._device_bytes = 0
        self._host_bytes = 0

    @property
    def address_count(self) -> int:
        return self._addresses

    @property
    def device_bytes(self) -> int:
        return self._device_bytes

    @property
    def host_bytes(self) -> int:
        return self._host_bytes

    def __contains__(self, owner: object) -> bool:
        return owner in self._entries

    def register(self, owner: Hashable, addrs: Sequence[int], nbytes_each: int, *, device: bool) -> None:
        """Record ``len(addrs)`` tensors of ``nbytes_each`` bytes, or raise ``SimError(LIMIT_CODE)``."""
        if nbytes_each < 0:
            raise SimError(LLMStatusCode.LLM_PARAM_INVALID, f"negative tensor size {nbytes_each}")
        count, total = len(addrs), len(addrs) * nbytes_each
        with self._lock:
            if owner in self._entries:
                raise SimError(LLMStatusCode.LLM_PARAM_INVALID, f"{owner!r} is already registered")
            if self._addresses + count > self.max_addresses:
                raise SimError(
                    LIMIT_CODE,
                    f"registering {count} addresses would exceed the limit of {self.max_addresses} "
                    f"registered addresses ({self._addresses} already registered)",
                )
            used, limit, kind = (
                (self._device_bytes, self.max_device_bytes, "device")
                if device
                else (self._host_bytes, self.max_host_bytes, "host")
            )
            if used + total > limit:
                raise SimError(
                    LIMIT_CODE,
                    f"registering {total} B of {kind} memory would exceed the limit of {limit} B "
                    f"({used} B already registered)",
                )
            self._entries[owner] = _Entry(count, total, device)
            self._apply(count, total, device, +1)

    def unregister(self, owner: Hashable) -> bool:
        """Forget ``owner``'s registration; returns whether there was one (unknown owners are a no-op)."""
        with self._lock:
            entry = self._entries.pop(owner, None)
            if entry is None:
                return False
            self._apply(entry.addresses, entry.nbytes, entry.device, -1)
            return True

    def _apply(self, count: int, total: int, device: bool, sign: int) -> None:
        self._addresses += sign * count
        if device:
            self._device_bytes += sign * total
        else:
            self._host_bytes += sign * total
