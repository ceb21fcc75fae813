"""``datadist_sim``'s own namespace: what a user sees with ``dir()`` or tab completion is its ``__all__``
and its subpackages, nothing that only the module's implementation needed (a ``__future__`` feature
such as ``annotations`` would show as a public name)."""

from __future__ import annotations

import types

import datadist_sim


def test_public_names_are_all_and_subpackages() -> None:
    public = {n for n in dir(datadist_sim) if not n.startswith("_")}
    modules = {n for n in public if isinstance(getattr(datadist_sim, n), types.ModuleType)}
    assert public - modules == set(datadist_sim.__all__) - {"__version__"}
