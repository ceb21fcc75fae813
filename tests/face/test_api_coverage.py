"""docs/api_coverage.md cannot drift from the fake (and, where the vendor sources are at hand, from the
real packages): what it marks implemented exists, what it marks missing does not, and every public name
of either side has a row (the rules for "public name" are in ``api_surface``)."""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Set, Tuple

import pytest

from .api_surface import (
    VALUES,
    VENDOR_PACKAGES,
    fake_surface,
    names_in_binding,
    table_modules,
    table_rows,
    vendor_surface,
)

MIRRORS = Path(os.environ.get("DATADIST_SIM_MIRRORS", "/work/.mirror"))


def _resolves(module: str, name: str) -> bool:
    try:
        target: object = importlib.import_module("datadist_sim." + module)
    except ImportError:
        return False
    for part in name.split("."):
        if not hasattr(target, part):
            return False
        target = getattr(target, part)
    return True


def _listed() -> Set[Tuple[str, str]]:
    return {(row.module, row.name) for row in table_rows()}


def test_every_row_says_implemented_and_source_in_the_documented_words() -> None:
    rows = table_rows()
    assert len(rows) > 300  # the parser found the tables
    for row in rows:
        assert row.implemented in VALUES["implemented"], row
        only_ours = row.notes.startswith("simulator only")
        assert row.source in ((*VALUES["source"],) if not only_ours else ("—",)), row


def test_each_name_is_listed_once_per_module() -> None:
    rows = table_rows()
    keys = [(row.module, row.name) for row in rows]
    assert len(keys) == len(set(keys)), sorted(k for k in keys if keys.count(k) > 1)


def test_a_name_marked_implemented_exists_in_the_fake_and_one_marked_no_does_not() -> None:
    wrong = [row for row in table_rows() if _resolves(row.module, row.name) != (row.implemented != "no")]
    assert not wrong, "\n".join(f"{r.module}:{r.name} is marked {r.implemented!r}" for r in wrong)


def test_every_public_name_of_the_fake_is_listed() -> None:
    missing = sorted(fake_surface() - _listed())
    assert not missing, f"add rows to docs/api_coverage.md for {missing}"


def test_every_module_of_the_fake_has_a_section() -> None:
    modules = {module for module, _ in fake_surface()}
    assert modules <= set(table_modules())


def test_every_public_name_of_the_real_packages_is_listed() -> None:
    vendor = vendor_surface(MIRRORS)
    if vendor is None:
        pytest.skip(f"no hixl/ge mirrors under {MIRRORS} (set DATADIST_SIM_MIRRORS)")
    assert {module for module, _ in vendor} <= set(table_modules())
    missing = sorted((module, name) for module, name in vendor if name and (module, name) not in _listed())
    assert not missing, f"add rows to docs/api_coverage.md for {missing}"
    extra = sorted(
        (row.module, row.name)
        for row in table_rows()
        if (row.module, row.name) not in vendor
        and row.module.split(".")[0] in VENDOR_PACKAGES  # packages the mirrors enumerate
        and not row.notes.startswith("simulator only")
    )
    assert not extra, f"rows for names the real packages lack must say 'simulator only': {extra}"


def test_a_binding_is_read_as_pybind11_registers_it() -> None:
    # A member whose name is on the line after ``.def_property(``, a module function after a class,
    # and enum values that reach the module only through ``.export_values()``.
    source = """
      m.attr("OK") = py::int_(0);
      py::enum_<ns::Kind>(m, "Kind").value("ONE", ns::ONE).export_values();
      py::enum_<ns::State>(m, "State").value("IDLE", ns::State::IDLE);
      py::class_<ns::Desc>(m, "Desc")
          .def(py::init<>())
          .def_property(
              "size", [](const ns::Desc &d) { return d.size; }, [](ns::Desc &d, int v) { d.size = v; })
          .def_readonly("state", &ns::Desc::state);
      m.def("probe", &Probe);
    """
    assert names_in_binding(source) == {
        "OK",
        "Kind",
        "Kind.ONE",
        "ONE",
        "State",
        "State.IDLE",
        "Desc",
        "Desc.size",
        "Desc.state",
        "probe",
    }
