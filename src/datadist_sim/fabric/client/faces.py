"""The face a fabric client imports: the ordinary modules, except that ``LLMDataDist`` and ``hixl.Hixl``
are the proxies.

The alias modules are copies, so the in-process face itself is never patched: ``datadist_sim.llm_datadist``
imported by its own name still runs in-process.
"""

from __future__ import annotations

import types
from typing import Dict


def remote_faces(modules: Dict[str, types.ModuleType]) -> Dict[str, types.ModuleType]:
    """``modules`` (alias -> module) with every module that exports ``LLMDataDist`` (or hixl's ``Hixl``)
    swapped for a copy exporting the fabric proxy instead."""
    from datadist_sim.fabric.client.hixl_proxy import Hixl
    from datadist_sim.fabric.client.proxies import LLMDataDist

    swapped = dict(modules)
    for alias, module in modules.items():
        is_hixl = alias.split(".")[0] == "hixl" and "Hixl" in vars(module)
        if "LLMDataDist" in vars(module) or alias == "llm_datadist_v1" or is_hixl:
            copy = types.ModuleType(module.__name__, module.__doc__)
            vars(copy).update(vars(module))
            if is_hixl:
                copy.Hixl = Hixl  # type: ignore[attr-defined]
            else:
                copy.LLMDataDist = LLMDataDist  # type: ignore[attr-defined]
            swapped[alias] = copy
    return swapped
