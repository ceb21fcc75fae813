"""The world has two ways in. The faces (``llm_datadist``, ``llm_datadist_v1``, ``hixl``) reach it through
``_world/door.py`` only: no other world module and no fault module is imported, not even inside a function
or under ``TYPE_CHECKING`` (the scan walks every import statement of every file). The tools (cli, bench,
explore, scenarios, the plugin, virtual time, the package's public names) and the fabric reach it through
``_world/surface.py`` only."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterator, List

import datadist_sim

PACKAGE = Path(datadist_sim.__file__).parent
FACES = ("llm_datadist", "llm_datadist_v1", "hixl")
# The floors below the tools, which the tools may import as they like: the world itself, the faults the
# world applies, and the faces (a tool serves or drives a face through its public names).
BELOW_THE_TOOLS = ("_world", "faults", *FACES)


def _world_imports(path: Path, *, faults: bool) -> Iterator[str]:
    """Each world module (and, with ``faults``, each fault module) ``path`` imports, as ``module`` or
    ``module.name``."""
    guarded = ("datadist_sim._world", "datadist_sim.faults") if faults else ("datadist_sim._world",)
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module is not None and node.level == 0:
            if node.module == "datadist_sim._world":
                yield from (f"datadist_sim._world.{alias.name}" for alias in node.names)
            elif node.module.startswith(guarded):
                yield node.module
        elif isinstance(node, ast.ImportFrom) and node.level > 0:
            yield f"relative import {'.' * node.level}{node.module or ''}"  # the scan could not place it
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(guarded):
                    yield alias.name


def test_faces_import_the_world_only_through_its_door() -> None:
    checked: List[Path] = [p for d in FACES for p in sorted((PACKAGE / d).rglob("*.py"))]
    assert len(checked) > 30  # the scan found the packages it is meant to guard
    through_a_side_door = {
        f"{path.relative_to(PACKAGE)}: {name}"
        for path in checked
        for name in _world_imports(path, faults=True)
        if name != "datadist_sim._world.door"
    }
    assert through_a_side_door == set()


def test_tools_and_fabric_import_the_world_only_through_its_surface() -> None:
    checked = [
        p for p in sorted(PACKAGE.rglob("*.py")) if p.relative_to(PACKAGE).parts[0] not in BELOW_THE_TOOLS
    ]
    tools = {str(p.relative_to(PACKAGE)) for p in checked}
    # the scan covers the tools and the fabric it is meant to guard
    assert {"cli.py", "__init__.py", "aio.py", "pytest_plugin.py", "fabric/host/server.py"} <= tools
    assert any(t.startswith(("bench/", "explore/", "scenarios/")) for t in tools)
    into_a_room = {
        f"{path.relative_to(PACKAGE)}: {name}"
        for path in checked
        for name in _world_imports(path, faults=False)
        if name != "datadist_sim._world.surface"
    }
    assert into_a_room == set()
