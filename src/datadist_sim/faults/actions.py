"""The fault actions, one row each: where each acts and what it needs. Every list of actions (the rules'
checks, the plan, the effects, explore, the hypothesis strategies) is read from here, so a new action
is a row here, its constructor and effect on this floor, and the one place in the world that applies it:

- a call action ends up in an ``effects.Effect`` field, which the world applies in
  ``_world/fault_effects.py``: ``meet_door_faults`` for a plain call at the engine's door,
  ``link_outcome`` for one remote cluster of a link call, ``meet_transfer_faults`` for a transfer (the
  calls of the ``hixl`` engine API meet theirs in ``_world/hixl_faults.py``);
- a world action fires and heals through the plan (``plan.FaultPlan._apply_world`` and ``_heal``), which
  hands the rule to the world's two hooks, applied in ``_world/world_faults.py`` (``start_world_fault``
  and ``heal_world_fault``, for clusters and ``hixl`` engines alike); a lasting one is read back by
  the world's queries (``hung``, ``partitioned``).

Imports nothing of the package.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Tuple

TRANSFER_OPS = frozenset(
    {
        "pull_cache",
        "pull_blocks",
        "push_cache",
        "push_blocks",
        "transfer_cache_async",
        "transfer_cache",
        "hixl.transfer_sync",
        "hixl.transfer_async",
    }
)
"""Calls whose faults act inside the transfer engine (time, bytes, the link), not at the call's door."""
LINK_OPS = frozenset({"link_clusters", "unlink_clusters"})
"""Calls whose faults act per remote cluster, on that cluster's entry in the returned list."""


@dataclass(frozen=True)
class Action:
    """One fault action."""

    name: str
    world: bool
    """It changes the world when it fires (it needs a ``cluster``), rather than acting on the call."""
    at_door: bool = False
    """A plain call (not a transfer, not a link call) can meet it at the engine's door."""
    transfer_only: bool = False
    """It acts inside transfers only: a rule of it on another operation never fires."""
    timed: bool = False
    """It can fire on simulated time alone (no ``op``, at ``start_s``)."""
    coded: bool = False
    """It makes the call give a code of its own, which the engine must be able to give
    (``engine_codes``); a delay or a cut link gives the call's own timeout."""
    heals: bool = True
    """What it did is undone when the rule heals (``heal_after_s``, ``end_s``)."""
    hits: str = "call"
    """What a rule of it names besides the call: ``"call"`` nothing more, ``"cluster"`` the cluster it
    hits, ``"pair"`` a cluster and its ``remote`` (the link between them), ``"pool"`` a cluster's
    memory pool."""
    sizes: Tuple[int, ...] = ()
    """The ``nbytes`` a generated rule of it picks from (explore, the strategies); empty: it takes none."""


_ROWS = (
    Action("fail", world=False, at_door=True, coded=True),
    Action("delay", world=False, at_door=True),
    Action("timeout", world=False, at_door=True, coded=True),
    Action("cut_link", world=False, transfer_only=True, timed=True, hits="pair"),
    Action("poison", world=False, transfer_only=True, coded=True),
    Action("partition", world=True, timed=True, hits="pair"),
    Action("hang", world=True, timed=True, hits="cluster"),
    Action("kill", world=True, timed=True, heals=False, hits="cluster"),
    Action("cap_pool", world=True, timed=True, hits="pool", sizes=(0, 1 << 16, 1 << 20)),
    Action("exhaust_pool", world=True, timed=True, hits="pool"),
)

ACTION_TABLE: Dict[str, Action] = {row.name: row for row in _ROWS}
ACTIONS: Tuple[str, ...] = tuple(ACTION_TABLE)
CALL_ACTIONS: Tuple[str, ...] = tuple(a.name for a in _ROWS if not a.world)
WORLD_ACTIONS: Tuple[str, ...] = tuple(a.name for a in _ROWS if a.world)
TIMED_ACTIONS: Tuple[str, ...] = tuple(a.name for a in _ROWS if a.timed)
CODED_ACTIONS: Tuple[str, ...] = tuple(a.name for a in _ROWS if a.coded)
DOOR_ACTIONS: Tuple[str, ...] = tuple(a.name for a in _ROWS if a.at_door)
"""The actions a plain call can meet; the plan counts only rules with these at the door."""


def applies_to(action: str, op: str) -> bool:
    """Whether a rule of ``action`` watching ``op`` can act on it (a transfer-only action on a plain
    call never fires); world actions fire at any watched call."""
    row = ACTION_TABLE[action]
    return not row.transfer_only or op in TRANSFER_OPS
