"""Hypothesis strategies for fault rules and schedules, for tests that prefer ``@given`` and
hypothesis' own shrinking to ``datadist-sim explore``.

``fault_rules(ops=..., clusters=...)`` draws one ``Fault``; ``schedules(...)`` a list of them. Each
rule is drawn as the explore command draws its swarm rules (kinds, codes an operation can give, counts,
windows, probabilities), only by hypothesis, so a failing example shrinks to a small rule list. The codes
come from the engine's table (``datadist_sim.faults.engine_codes``): pass ``modes=["v2"]`` (or
``"hixl"``, ``"v2-kv"``, ``"v1"``) for the modes your client runs, and every drawn ``fail`` or ``timeout``
is one the engine can give there (by default, one some mode can give)::

    from hypothesis import given
    from datadist_sim.strategies import schedules

    @given(rules=schedules(ops=["pull_cache", "link_clusters"], clusters=[1, 2]))
    def test_connector_survives(rules):
        world = SimWorld(seed=0)
        world.faults.add(*rules) if rules else None
        ...

Hypothesis is a test extra (``pip install 'datadist-sim[test]'``); importing this module without it
raises ``ImportError`` saying so.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Union

try:
    from hypothesis import strategies as st
except ImportError as exc:  # pragma: no cover - exercised only where hypothesis is missing
    raise ImportError(
        "datadist_sim.strategies needs hypothesis: "
        "pip install 'datadist-sim[test]' (or pip install hypothesis)"
    ) from exc

from datadist_sim.faults import engine_codes
from datadist_sim.faults.actions import ACTION_TABLE, ACTIONS, WORLD_ACTIONS, applies_to
from datadist_sim.faults.files import rule_from_spec

__all__ = ["fault_rules", "rule_specs", "schedules"]

DEFAULT_OPS = ("pull_cache", "link_clusters", "allocate_cache")
Modes = Optional[Sequence[Union[str, engine_codes.EngineMode]]]


def _codes(op: str, modes: Modes) -> List[str]:
    """The codes a correct client of ``modes`` (any mode when None) can meet from ``op``."""
    return list(engine_codes.fault_labels(op, modes))


def _times_out(op: str, modes: Modes) -> bool:
    return engine_codes.can_time_out(op, modes)


@st.composite
def rule_specs(
    draw: Any,
    ops: Sequence[str] = DEFAULT_OPS,
    clusters: Sequence[Union[int, str]] = (0, 1),
    kinds: Sequence[str] = ACTIONS,
    horizon_s: float = 10.0,
    modes: Modes = None,
) -> Dict[str, object]:
    """One rule as a scenario-file table (``[[rules]]``): plain data, printable as TOML."""
    # A kind with no operation that can give its outcome in these modes is not drawn.
    usable = {kind: [op for op in ops if applies_to(kind, op)] or list(ops) for kind in ACTION_TABLE}
    usable["fail"] = [op for op in ops if _codes(op, modes)]
    usable["timeout"] = [op for op in ops if _times_out(op, modes)]
    kind = draw(st.sampled_from([k for k in kinds if usable[k]] or ["delay"]))
    op = draw(st.sampled_from(usable[kind]))
    spec: Dict[str, object] = {"action": kind, "op": op}
    cluster = draw(st.sampled_from(list(clusters)))
    if kind in WORLD_ACTIONS:
        spec["cluster"] = cluster
        if ACTION_TABLE[kind].hits == "pair":
            spec["remote"] = draw(st.sampled_from([c for c in clusters if c != cluster] or list(clusters)))
        if ACTION_TABLE[kind].sizes:
            spec["nbytes"] = draw(st.sampled_from(ACTION_TABLE[kind].sizes))
        if ACTION_TABLE[kind].heals:
            spec["heal_after_s"] = draw(st.floats(0.001, horizon_s))
    elif draw(st.booleans()):
        spec["cluster"] = cluster
    if kind == "fail":
        spec["code"] = draw(st.sampled_from(_codes(op, modes)))
    elif kind == "delay":
        spec["seconds"] = draw(st.floats(0.001, 2.0 * horizon_s))
    elif kind == "timeout":
        spec["landed"] = draw(st.sampled_from([False, True, None]))
    elif kind == "poison":
        spec["side"] = draw(st.sampled_from(["remote", "local"]))
    trigger = draw(st.sampled_from(["nth", "first", "probability"]))
    if trigger == "probability":
        spec["probability"] = draw(st.floats(0.05, 1.0))
    else:
        spec[trigger] = draw(st.integers(1, 8))
    return spec


def fault_rules(
    ops: Sequence[str] = DEFAULT_OPS,
    clusters: Sequence[Union[int, str]] = (0, 1),
    kinds: Sequence[str] = ACTIONS,
    horizon_s: float = 10.0,
    modes: Modes = None,
) -> Any:
    """A strategy of ``Fault`` rules over these operations, clusters and kinds, with codes the engine
    gives in ``modes`` (any mode when None)."""
    return rule_specs(ops, clusters, kinds, horizon_s, modes).map(rule_from_spec)


def schedules(
    ops: Sequence[str] = DEFAULT_OPS,
    clusters: Sequence[Union[int, str]] = (0, 1),
    kinds: Sequence[str] = ACTIONS,
    max_rules: int = 3,
    horizon_s: float = 10.0,
    min_rules: int = 0,
    modes: Modes = None,
) -> Any:
    """A strategy of rule lists (``world.faults.add(*rules)``), shrinking towards fewer rules."""
    return st.lists(
        fault_rules(ops, clusters, kinds, horizon_s, modes), min_size=min_rules, max_size=max_rules
    )
