"""The faces (``llm_datadist``, ``llm_datadist_v1``, ``hixl``) and the fabric reach the world through one
module, ``_world/door.py``: no other world module and no fault module is imported, not even inside a
function or under ``TYPE_CHECKING`` (the scan walks every import statement of every file)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterator, List

import datadist_sim

PACKAGE = Path(datadist_sim.__file__).parent
OUTSIDE_THE_WORLD = ("llm_datadist", "llm_datadist_v1", "hixl", "fabric")


def _world_imports(path: Path) -> Iterator[str]:
    """Each world or fault module ``path`` imports, as ``module`` or ``module.name``."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module is not None and node.level == 0:
            if node.module == "datadist_sim._world":
                yield from (f"datadist_sim._world.{alias.name}" for alias in node.names)
            elif node.module.startswith(("datadist_sim._world.", "datadist_sim.faults")):
                yield node.module
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(("datadist_sim._world", "datadist_sim.faults")):
                    yield alias.name


def test_faces_and_fabric_import_the_world_only_through_its_door() -> None:
    checked: List[Path] = [p for d in OUTSIDE_THE_WORLD for p in sorted((PACKAGE / d).rglob("*.py"))]
    assert len(checked) > 30  # the scan found the packages it is meant to guard
    through_a_side_door = {
        f"{path.relative_to(PACKAGE)}: {name}"
        for path in checked
        for name in _world_imports(path)
        if name != "datadist_sim._world.door"
    }
    assert through_a_side_door == set()
