"""Scenario files: fault rules and a reference workload, one TOML file per fault family.

The format is described in ``sim/README.md``. Bundled scenarios live in ``bundled/`` beside this module
(they ship with the package); ``load`` takes a bundled name or a path. A file is read and every rule in
it checked here, with the rules themselves; the tools (``datadist_sim.scenarios``: the reference workload
and its runner) re-export these names.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

from datadist_sim.faults.checks import check_name
from datadist_sim.faults.rules import Fault, to_code

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.9/3.10 only
    import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]  # not installed on 3.11+

HERE = Path(__file__).resolve().parent / "bundled"
"""Where the bundled scenarios are."""


@dataclass(frozen=True)
class Workload:
    """The reference Prompt/Decode workload ``datadist-sim run`` drives (cluster ids: Prompt ``1..P``,
    Decode ``101..100+D``)."""

    mode: str = "v2"
    """``v1``: KvCacheManager mode; ``v2``: CacheManager mode; ``hixl``: engines of the ``hixl`` API
    (``scenarios/hixl_workload.py``)."""
    prompts: int = 1
    decodes: int = 1
    requests: int = 32
    interval_s: float = 0.01
    """Simulated time between two request arrivals."""
    tries: int = 3
    """Attempts per pull (and per link) of the reference client."""
    backoff_s: float = 0.1
    link_batch: int = 16
    """Clusters per ``link_clusters`` call; above 16 is the cluster-limit misuse."""
    sync_kv_timeout_ms: int = 1000
    pool_mib: int = 64
    duplicate_keys: bool = False
    """Each request's key is also offered to a second allocation, and each pull is repeated."""
    switch_role: bool = False
    """At the end the first Prompt switches role while its links are live, then after unlinking."""

    def __post_init__(self) -> None:
        if self.mode not in ("v1", "v2", "hixl"):
            raise ValueError(f"workload.mode must be 'v1', 'v2' or 'hixl', got {self.mode!r}")
        for name in ("prompts", "decodes", "requests", "tries", "link_batch"):
            if getattr(self, name) < 1:
                raise ValueError(f"workload.{name} must be >= 1, got {getattr(self, name)}")


@dataclass(frozen=True)
class Scenario:
    """A named set of fault rules, the workload to run them against, and the codes a client expects."""

    name: str
    description: str = ""
    expect: Tuple[str, ...] = ()
    workload: Workload = field(default_factory=Workload)
    rule_specs: Tuple[Dict[str, Any], ...] = ()
    path: str = ""
    seed: Optional[int] = None
    """The world's seed when the file builds the world (``explore --replay``, the pytest marker);
    ``world.faults.load`` on an existing world ignores it. Explore writes the failing run's seed here."""
    config: Dict[str, Any] = field(default_factory=dict)
    """``SimConfig`` fields the file's world is built with (its ``[config]`` table): explore writes the
    engine reading a failure needs (``comm_timeout_keeps_link``) here, and ``--replay`` and
    ``@pytest.mark.datadist_scenario`` build the world with it."""
    may_lose: bool = False
    """The faults destroy data (a dead Prompt, poisoned memory), so even a careful client cannot
    deliver every request; ``datadist-sim run`` then does not fail on lost requests."""

    def rules(self, rate: float = 1.0) -> List[Fault]:
        """Fresh rules (a plan counts per rule object); ``rate`` scales every probability below 1."""
        if rate < 0:
            raise ValueError(f"rate must be >= 0, got {rate}")
        out = []
        for spec in self.rule_specs:
            rule = rule_from_spec(spec)
            if "probability" in spec and rule.probability < 1.0:
                rule = rule.copy(probability=min(1.0, rule.probability * rate))
            out.append(rule)
        return out


_RULE_KEYS = {f.name for f in fields(Fault)}
_WORKLOAD_KEYS = {f.name for f in fields(Workload)}


def rule_from_spec(spec: Dict[str, Any]) -> Fault:
    """One ``[[rules]]`` table as a ``Fault``; unknown keys are an error naming the key."""
    for key in sorted(set(spec) - _RULE_KEYS):
        check_name("rule key", key, _RULE_KEYS, "field of a rule")
    if "action" not in spec:
        raise ValueError("a rule needs an action")
    values = dict(spec)
    if "code" in values:
        values["code"] = to_code(values["code"])
    if values.get("landed") == "coin":  # TOML has no null: the seeded coin of Fault.timeout(landed=None)
        values["landed"] = None
    if "sequence" in values:
        values["sequence"] = tuple(values["sequence"])
    return Fault(**values)


def names() -> List[str]:
    """The bundled scenarios."""
    return sorted(p.stem for p in HERE.glob("*.toml"))


def find(name_or_path: Union[str, Path]) -> Path:
    """The file of a bundled scenario name, or the given path."""
    path = Path(name_or_path)
    if path.suffix == ".toml" or path.exists():
        if not path.is_file():
            raise FileNotFoundError(f"scenario file {path} does not exist")
        return path
    bundled = HERE / f"{name_or_path}.toml"
    if not bundled.is_file():
        raise ValueError(f"no bundled scenario {name_or_path!r}; bundled: {', '.join(names())}")
    return bundled


def load(name_or_path: Union[str, Path]) -> Scenario:
    """Read a scenario; every rule is checked now, so a bad file fails before anything runs."""
    path = find(name_or_path)
    with path.open("rb") as handle:
        data = tomllib.load(handle)
    return parse(data, name=path.stem, path=str(path))


def parse(data: Dict[str, Any], *, name: str = "scenario", path: str = "") -> Scenario:
    allowed = {"name", "description", "expect", "may_lose", "workload", "rules", "seed", "config"}
    for key in sorted(set(data) - allowed):
        check_name(f"scenario {name!r}: top-level key", key, allowed, "scenario key")
    workload_spec = data.get("workload", {})
    for key in sorted(set(workload_spec) - _WORKLOAD_KEYS):
        check_name(f"scenario {name!r}: workload key", key, _WORKLOAD_KEYS, "workload field")
    workload = Workload(**workload_spec)
    specs = tuple(dict(r) for r in data.get("rules", []))
    for number, spec in enumerate(specs, 1):
        try:
            rule_from_spec(spec)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"scenario {name!r}, rule {number}: {exc}") from None
    expect = tuple(to_code(c).name for c in data.get("expect", []))
    seed = data.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise ValueError(f"seed must be an int >= 0 in scenario {name!r}, got {seed!r}")
    config = data.get("config", {})
    if not isinstance(config, dict) or any(isinstance(v, (dict, list)) for v in config.values()):
        raise ValueError(f"config must be a table of SimConfig fields in scenario {name!r}, got {config!r}")
    return Scenario(
        name=str(data.get("name", name)),
        description=str(data.get("description", "")).strip(),
        expect=expect,
        workload=workload,
        rule_specs=specs,
        path=path,
        seed=seed,
        config=dict(config),
        may_lose=bool(data.get("may_lose", False)),
    )


__all__ = ["Scenario", "Workload", "find", "load", "names", "parse", "rule_from_spec"]
