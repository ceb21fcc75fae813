"""Checks of a fault rule's fields, so a mistake is an error when the rule is made, not a rule that
silently never fires.

A rule whose ``op`` names no API operation (a typo such as ``pul_cache``), that fires on the 0th call,
or whose counts, windows or durations are negative, would be accepted and then do nothing; the user
would believe their client survived a fault it never met. Each check raises ``ValueError`` naming the
field and, for a name, the closest valid one.

The checks read a rule through ``RuleFields`` (the fields they test), so this module needs nothing else
of the package: ``rules`` and ``files`` both use it.
"""

from __future__ import annotations

import difflib
from typing import Iterable, Optional, Protocol, Tuple


class RuleFields(Protocol):
    """The fields of a rule that ``check_rule`` reads by name (``Fault`` has them all)."""

    action: str
    op: Optional[Tuple[str, ...]]
    after: Optional[int]
    start_s: Optional[float]
    end_s: Optional[float]
    probability: float
    side: str


API_OPS = frozenset(
    {
        # LLMDataDist (v2)
        "init",
        "finalize",
        "link_clusters",
        "unlink_clusters",
        "check_link_status",
        "switch_role",
        "link",
        "unlink",
        "query_register_mem_status",
        "remap_registered_memory",
        # CacheManager (v2) and KvCacheManager (v1)
        "allocate_cache",
        "allocate_blocks_cache",
        "deallocate_cache",
        "deallocate_blocks_cache",
        "register_cache",
        "register_blocks_cache",
        "unregister_cache",
        "get_cache_tensors",
        "remove_cache_key",
        "pull_cache",
        "pull_blocks",
        "push_cache",
        "push_blocks",
        "copy_cache",
        "copy_blocks",
        "swap_blocks",
        "transfer_cache_async",
        # CacheTask (what transfer_cache_async returns)
        "synchronize",
        "get_results",
        # hixl.Hixl (the hixl engine API), as its face traces them
        "hixl.initialize",
        "hixl.finalize",
        "hixl.register_mem",
        "hixl.deregister_mem",
        "hixl.connect",
        "hixl.disconnect",
        "hixl.connect_async",
        "hixl.disconnect_async",
        "hixl.get_async_connect_status",
        "hixl.get_all_async_connect_status",
        "hixl.transfer_sync",
        "hixl.transfer_async",
        "hixl.get_transfer_status",
        "hixl.get_all_transfer_status",
        "hixl.send_notify",
        "hixl.get_notifies",
    }
)
"""Every public method the face traces (``api_call``), by the name a rule's ``op`` matches; a test
keeps this list equal to the face's."""


def closest(word: str, valid: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the valid name nearest ``word``, else the list of valid names."""
    names = sorted(valid)
    match = difflib.get_close_matches(word, names, n=1, cutoff=0.6)
    return f" (did you mean {match[0]!r}?)" if match else f"; valid: {', '.join(names)}"


def check_name(field: str, value: str, valid: Iterable[str], what: str) -> None:
    """``value`` must be one of ``valid``; else ``ValueError`` naming ``field`` and the closest name."""
    names = frozenset(valid)
    if value not in names:
        raise ValueError(f"{field} {value!r} names no {what}{closest(value, names)}")


def _at_least(rule: RuleFields, field: str, low: float, why: str) -> None:
    value = getattr(rule, field)
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < low:
        raise ValueError(f"{field} must be {why}, got {value!r}")


def check_rule(rule: RuleFields, actions: Iterable[str]) -> None:
    """Every field of ``rule`` that can be wrong on its own or against another field."""
    check_name("action", rule.action, actions, "fault action")
    for op in rule.op or ():
        check_name("op", op, API_OPS, "API operation")
    for field in ("nth", "first"):
        value = getattr(rule, field)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ValueError(f"{field} must be an int >= 1 (calls are counted from 1), got {value!r}")
    if rule.after is not None and (
        isinstance(rule.after, bool) or not isinstance(rule.after, int) or rule.after < 0
    ):
        raise ValueError(f"after must be an int >= 0, got {rule.after!r}")
    for field in ("seconds", "start_s", "end_s"):
        _at_least(rule, field, 0.0, ">= 0 (simulated seconds)")
    _at_least(rule, "heal_after_s", 0.0, ">= 0 (simulated seconds after the rule first fires)")
    _window(rule.start_s, rule.end_s)
    if not 0.0 <= rule.probability <= 1.0:
        raise ValueError(f"probability must be in [0, 1], got {rule.probability}")
    check_name("side", rule.side, ("remote", "local"), "side of a poisoned transfer")


def _window(start: Optional[float], end: Optional[float]) -> None:
    if start is not None and end is not None and end <= start:
        raise ValueError(f"end_s must be after start_s, got start_s={start}, end_s={end}")
