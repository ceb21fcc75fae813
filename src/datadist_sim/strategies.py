"""Hypothesis strategies for fault rules and schedules, for tests that prefer ``@given`` and
hypothesis' own shrinking to ``datadist-sim explore``.

``fault_rules(ops=..., clusters=...)`` draws one ``Fault``; ``schedules(...)`` a list of them. Each
rule is drawn as the explore command draws its swarm rules (kinds, codes an operation can give, counts,
windows, probabilities), only by hypothesis, so a failing example shrinks to a small rule list::

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

from typing import Any, Dict, Sequence

try:
    from hypothesis import strategies as st
except ImportError as exc:  # pragma: no cover - exercised only where hypothesis is missing
    raise ImportError(
        "datadist_sim.strategies needs hypothesis: "
        "pip install 'datadist-sim[test]' (or pip install hypothesis)"
    ) from exc

from datadist_sim.faults.engine_codes import fault_codes, modes
from datadist_sim.faults.files import rule_from_spec
from datadist_sim.faults.rules import ACTIONS, TRANSFER_OPS

__all__ = ["fault_rules", "rule_specs", "schedules"]

DEFAULT_OPS = ("pull_cache", "link_clusters", "allocate_cache")
WORLD_KINDS = ("partition", "hang", "kill", "cap_pool", "exhaust_pool")


@st.composite
def rule_specs(
    draw: Any,
    ops: Sequence[str] = DEFAULT_OPS,
    clusters: Sequence[int] = (0, 1),
    kinds: Sequence[str] = ACTIONS,
    horizon_s: float = 10.0,
) -> Dict[str, object]:
    """One rule as a scenario-file table (``[[rules]]``): plain data, printable as TOML."""
    kind = draw(st.sampled_from(list(kinds)))
    transfer_ops = [op for op in ops if op in TRANSFER_OPS] or list(ops)
    op = draw(st.sampled_from(transfer_ops if kind in ("cut_link", "poison") else list(ops)))
    spec: Dict[str, object] = {"action": kind, "op": op}
    cluster = draw(st.sampled_from(list(clusters)))
    if kind in WORLD_KINDS:
        spec["cluster"] = cluster
        if kind == "partition":
            spec["remote"] = draw(st.sampled_from([c for c in clusters if c != cluster] or list(clusters)))
        if kind == "cap_pool":
            spec["nbytes"] = draw(st.sampled_from([0, 1 << 16, 1 << 20]))
        if kind != "kill":
            spec["heal_after_s"] = draw(st.floats(0.001, horizon_s))
    elif draw(st.booleans()):
        spec["cluster"] = cluster
    if kind == "fail":
        spec["code"] = draw(st.sampled_from(_codes(op)))
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
    clusters: Sequence[int] = (0, 1),
    kinds: Sequence[str] = ACTIONS,
    horizon_s: float = 10.0,
) -> Any:
    """A strategy of ``Fault`` rules over these operations, clusters and kinds."""
    return rule_specs(ops, clusters, kinds, horizon_s).map(rule_from_spec)


def schedules(
    ops: Sequence[str] = DEFAULT_OPS,
    clusters: Sequence[int] = (0, 1),
    kinds: Sequence[str] = ACTIONS,
    max_rules: int = 3,
    horizon_s: float = 10.0,
    min_rules: int = 0,
) -> Any:
    """A strategy of rule lists (``world.faults.add(*rules)``), shrinking towards fewer rules."""
    return st.lists(fault_rules(ops, clusters, kinds, horizon_s), min_size=min_rules, max_size=max_rules)


def _codes(op: str) -> list[str]:
    """The codes a fault at ``op`` may give in some mode (``engine_codes``; a caller whose mode cannot
    give the one drawn is not hit)."""
    return sorted({code.name for mode in modes() for code in fault_codes(op, mode)}) or ["LLM_FAILED"]
