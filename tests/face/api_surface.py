"""The public surface of the real packages (read from the vendor's Python sources) and of our fake, as
sets of ``(module, name)`` pairs, and the coverage table in ``docs/api_coverage.md`` parsed the same way.

A name is ``Class``, ``function``, ``CONSTANT`` or ``Class.member``. Rules, the same on both sides:
- a module's public names are what it defines at top level (classes, functions, assignments) without a
  leading underscore, what it re-exports explicitly (``from x import Y as Y``), and its ``__all__``;
- a class's members are its own public methods, properties and class attributes (``__init__`` is the
  class row itself); enum members are not listed one by one (their values are tested in tests/face);
- a package's ``__init__`` lists names only: their members are listed under the module defining them;
- names a module ``__getattr__`` serves lazily count when it tests for them by a literal collection;
- a compiled module (``hixl.hixl``) has the names its pybind11 source registers (``names_in_binding``);
  a bound enum's values are listed, as ``Enum.VALUE``, since the binding names them one by one.
"""

from __future__ import annotations

import ast
import enum
import importlib
import inspect
import re
import subprocess
from pathlib import Path
from typing import Dict, Iterator, List, NamedTuple, Optional, Set, Tuple

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "docs" / "api_coverage.md"
FAKE_PACKAGES = {
    "llm_datadist": ROOT / "src" / "datadist_sim" / "llm_datadist",
    "llm_datadist_v1": ROOT / "src" / "datadist_sim" / "llm_datadist_v1",
    "hixl": ROOT / "src" / "datadist_sim" / "hixl",
}
VENDOR_PACKAGES = {  # (repository, path of the package in it)
    "llm_datadist": ("hicann+hixl", "src/python/llm_datadist/llm_datadist"),
    "llm_datadist_v1": ("hicann+ge", "api/python/llm_datadist_v1"),
    "hixl": ("hicann+hixl", "src/python/hixl_py/hixl"),
}
VENDOR_BINDINGS = {  # compiled modules: (repository, the pybind11 source that defines the module)
    "hixl.hixl": ("hicann+hixl", "src/python/hixl_py/hixl_py.cc"),
}
VALUES = {
    "implemented": ("yes", "partial", "no"),
    "source": ("confirmed in docs", "confirmed in source", "inferred"),
}

Name = Tuple[str, str]  # (module, name)


class Row(NamedTuple):
    module: str
    name: str
    implemented: str
    source: str
    notes: str


def _public(name: str) -> bool:
    return not name.startswith("_")


def _module_name(package: str, relative: str) -> str:
    """``llm_datadist`` + ``v2/cache_manager.py`` -> ``llm_datadist.v2.cache_manager``."""
    parts = [package, *relative[: -len(".py")].split("/")]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _class_members(node: ast.ClassDef) -> Iterator[str]:
    for item in node.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and _public(item.name):
            yield item.name
        elif isinstance(item, ast.Assign):
            yield from (t.id for t in item.targets if isinstance(t, ast.Name) and _public(t.id))
        elif (
            isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and _public(item.target.id)
        ):
            yield item.target.id


def _is_enum(node: ast.ClassDef) -> bool:
    return any(ast.unparse(base).split(".")[-1] in ("Enum", "IntEnum") for base in node.bases)


def _strings(node: ast.AST) -> List[str]:
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


def _lazy_names(tree: ast.Module) -> Set[str]:
    """Names a module ``__getattr__`` serves: those it tests ``name`` against (``name in {...}``)."""
    collections = {
        t.id: _strings(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign)
        for t in node.targets
        if isinstance(t, ast.Name)
    }
    found: Set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "__getattr__":
            for compare in ast.walk(node):
                if isinstance(compare, ast.Compare) and isinstance(compare.ops[0], (ast.In, ast.NotIn)):
                    other = compare.comparators[0]
                    found.update(
                        collections.get(other.id, []) if isinstance(other, ast.Name) else _strings(other)
                    )
    return {name for name in found if _public(name)}


def names_in_source(module: str, source: str) -> Set[str]:
    """The public names of one module, read from its source (the rules in the module docstring)."""
    tree = ast.parse(source)
    package_init = module in FAKE_PACKAGES
    names: Set[str] = _lazy_names(tree)
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and _public(node.name):
            names.add(node.name)
            if not package_init and not _is_enum(node):
                names.update(f"{node.name}.{member}" for member in _class_members(node))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _public(node.name):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name) and _public(target.id):
                    if target.id == "__all__":
                        continue
                    names.add(target.id)
                if (
                    isinstance(target, ast.Name)
                    and target.id == "__all__"
                    and isinstance(node.value, ast.List)
                ):
                    names.update(str(ast.literal_eval(element)) for element in node.value.elts)
        elif isinstance(node, ast.ImportFrom):
            names.update(a.name for a in node.names if a.asname == a.name and _public(a.name))
    return names


def _fake_class_members(module: str, names: Set[str]) -> Set[str]:
    """Members of the fake's classes, inherited ones included (several are built from mixins), read
    from the loaded classes; whatever comes from outside the fake (object, ABC, Thread) is left out."""
    loaded = importlib.import_module("datadist_sim." + module)
    members: Set[str] = set()
    for name in [n for n in names if "." not in n]:
        value = getattr(loaded, name, None)
        if not inspect.isclass(value) or issubclass(value, enum.Enum) or value.__name__ != name:
            continue  # an alias (LLMConfig = LlmConfig) is listed by name; its members under the class
        if isinstance(getattr(value, "__members__", None), dict):
            # a pybind11 enum (hixl): its members are the values the binding names; ``name`` and
            # ``value`` are what pybind11 gives every enum, as the real ``enum.Enum`` ones are left out
            members.update(f"{name}.{m}" for m in value.__members__)
            continue
        for klass in value.__mro__:
            if klass.__module__.startswith("datadist_sim."):
                members.update(f"{name}.{m}" for m in vars(klass) if _public(m))
    return members


def fake_surface() -> Set[Name]:
    """Every public name of our fake, per module under the name a client imports it by."""
    found: Set[Name] = set()
    for package, directory in FAKE_PACKAGES.items():
        for path in sorted(directory.rglob("*.py")):
            relative = path.relative_to(directory).as_posix()
            if any(part.startswith("_") and part != "__init__.py" for part in relative.split("/")):
                continue
            module = _module_name(package, relative)
            names = {n for n in names_in_source(module, path.read_text(encoding="utf-8")) if "." not in n}
            if module not in FAKE_PACKAGES:
                names |= _fake_class_members(module, names)
            found.update((module, name) for name in names)
    return found


# What a pybind11 module registers, in source order: a class or enum (which the members after it belong
# to), a member of it, ``.export_values()`` (the enum's values become module attributes too), a module
# attribute or function. ``m.def`` comes before ``.def`` so that a module function is not read as a member.
_BINDING = re.compile(
    r'py::(?:class_|enum_)<[^>]*>\(\s*m\s*,\s*"(?P<klass>\w+)"'
    r'|\bm\.(?:attr|def)\(\s*"(?P<module>\w+)"'
    r'|\.(?P<kind>def|def_readwrite|def_readonly|def_property|def_property_readonly|value)\(\s*"(?P<member>\w+)"'
    r"|(?P<export>\.export_values\(\))"
)


def names_in_binding(source: str) -> Set[str]:
    """The public names of a pybind11 module, read from its C++ source: ``m.attr`` and ``m.def`` names,
    each bound class or enum, their named members (``.def``, ``.def_readwrite``, ``.def_readonly``,
    ``.def_property``, an enum's ``.value``), and an enum's values again at module level when it calls
    ``.export_values()``. ``py::init`` is the class row itself."""
    names: Set[str] = set()
    klass = ""
    values: List[str] = []
    for match in _BINDING.finditer(source):
        if match["klass"]:
            klass, values = match["klass"], []
            names.add(klass)
        elif match["module"]:
            klass = ""
            names.add(match["module"])
        elif match["member"] and klass and _public(match["member"]):
            names.add(f"{klass}.{match['member']}")
            if match["kind"] == "value":
                values.append(match["member"])
        elif match["export"]:
            names.update(values)
    return names


def vendor_repo(mirror_root: Path, repository: str) -> Optional[Path]:
    repo = mirror_root / repository / "repo"
    return repo if repo.exists() else None


def vendor_surface(mirror_root: Path) -> Optional[Set[Name]]:
    """Every public name of the real packages, read from the mirrored sources; None without them."""
    found: Set[Name] = set()
    for package, (repository, root) in VENDOR_PACKAGES.items():
        repo = vendor_repo(mirror_root, repository)
        if repo is None:
            return None
        listing = subprocess.run(
            ["git", "-C", str(repo), "ls-tree", "-r", "--name-only", "HEAD", root + "/"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split()
        for path in listing:
            relative = path[len(root) + 1 :]
            if not path.endswith(".py") or relative == "setup.py":
                continue
            source = subprocess.run(
                ["git", "-C", str(repo), "show", f"HEAD:{path}"], check=True, capture_output=True, text=True
            ).stdout
            module = _module_name(package, relative)
            found.add((module, ""))  # the module itself has a section, even when it is empty
            found.update((module, name) for name in names_in_source(module, source))
    for module, (repository, path) in VENDOR_BINDINGS.items():
        repo = vendor_repo(mirror_root, repository)
        if repo is None:
            return None
        source = subprocess.run(
            ["git", "-C", str(repo), "show", f"HEAD:{path}"], check=True, capture_output=True, text=True
        ).stdout
        found.add((module, ""))
        found.update((module, name) for name in names_in_binding(source))
    return found


_SECTION = re.compile(r"^### `([\w.]+)`")
_ROW = re.compile(r"^\| `([\w.]+)` \|([^|]*)\|([^|]*)\|(.*)\|\s*$")


def table_rows(text: Optional[str] = None) -> List[Row]:
    """The rows of docs/api_coverage.md, each under the module of the section it is in."""
    module = ""
    rows: List[Row] = []
    for line in (TABLE.read_text(encoding="utf-8") if text is None else text).splitlines():
        heading = _SECTION.match(line)
        if heading:
            module = heading.group(1)
            continue
        row = _ROW.match(line)
        if row and module:
            name, implemented, source, notes = (part.strip() for part in row.groups())
            rows.append(Row(module, name, implemented, source, notes))
    return rows


def table_modules(text: Optional[str] = None) -> Dict[str, int]:
    """Each module section of the table and its line number."""
    lines = (TABLE.read_text(encoding="utf-8") if text is None else text).splitlines()
    return {m.group(1): i for i, line in enumerate(lines, 1) if (m := _SECTION.match(line))}
