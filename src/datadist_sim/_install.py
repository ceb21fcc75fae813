"""Make ``import llm_datadist`` (and ``llm_datadist_v1``, ``hixl``) resolve to the fake, and undo it.

Aliases go into ``sys.modules`` only; nothing is written to site-packages. A real ``llm_datadist`` that
is importable here (an Ascend host with CANN) is never shadowed silently: ``install`` refuses unless
``force=True``, and then warns.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import pkgutil
import sys
import threading
import warnings
from types import ModuleType
from typing import Dict, Iterator, Optional

_FACES = {
    "llm_datadist": "datadist_sim.llm_datadist",
    "llm_datadist_v1": "datadist_sim.llm_datadist_v1",
    "hixl": "datadist_sim.hixl",
}
_lock = threading.Lock()
_saved: Optional[Dict[str, Optional[ModuleType]]] = None


def _is_ours(module: Optional[ModuleType]) -> bool:
    return module is not None and module.__name__.startswith("datadist_sim.")


def _real_package_present() -> Optional[str]:
    """Where a real ``llm_datadist`` (or ``hixl``) would be imported from, if there is one."""
    for alias in _FACES:
        existing = sys.modules.get(alias)
        if existing is not None and not _is_ours(existing):
            return str(getattr(existing, "__file__", alias))
        if existing is None:
            spec = importlib.util.find_spec(alias)
            if spec is not None:
                return str(spec.origin or alias)
    return None


def _face_modules() -> Dict[str, ModuleType]:
    """Every module of every face, keyed by the name a client imports it under."""
    found: Dict[str, ModuleType] = {}
    for alias, target in _FACES.items():
        package = importlib.import_module(target)
        found[alias] = package
        for info in pkgutil.walk_packages(package.__path__, prefix=target + "."):
            module = importlib.import_module(info.name)
            found[alias + info.name[len(target) :]] = module
    return found


def install(*, force: bool = False) -> None:
    """Alias the fake as ``llm_datadist``/``llm_datadist_v1``; idempotent.

    Raises ``RuntimeError`` if a real ``llm_datadist`` is importable, unless ``force`` (then warns).
    """
    global _saved
    with _lock:
        if _saved is not None:
            return
        real = _real_package_present()
        if real is not None:
            if not force:
                raise RuntimeError(
                    f"a real llm_datadist is importable ({real}); datadist_sim.install() would shadow it. "
                    "Pass force=True to shadow it anyway."
                )
            warnings.warn(f"datadist_sim.install() shadows the real llm_datadist at {real}", stacklevel=2)
        modules = _face_modules()
        if os.environ.get("DATADIST_SIM_FABRIC"):  # fabric hook: cross-process mode (datadist_sim.fabric)
            from datadist_sim.fabric.client.faces import remote_faces

            modules = remote_faces(modules)
        _saved = {name: sys.modules.get(name) for name in modules}
        sys.modules.update(modules)


def uninstall() -> None:
    """Remove the aliases and restore whatever the names meant before ``install``."""
    global _saved
    with _lock:
        if _saved is None:
            return
        for name, previous in _saved.items():
            if previous is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = previous
        _saved = None


def is_installed() -> bool:
    return _saved is not None


@contextlib.contextmanager
def installed(*, force: bool = False) -> Iterator[None]:
    """``install()`` for the block, ``uninstall()`` after it (unless it was installed already)."""
    was = is_installed()
    install(force=force)
    try:
        yield
    finally:
        if not was:
            uninstall()
