"""Import a user's ``package.module:function`` the way ``python -m`` would see it.

``explore``, ``run --client`` and ``bench retry --add-policy`` all name user code this way; the
current directory goes on ``sys.path`` first (as ``python -m`` puts it there), so a module beside the
user's tests imports without installing anything.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any


def load_target(spec: str, *, what: str = "target") -> Any:
    """Return the object ``spec`` (``package.module:attribute``) names.

    Raises ``ValueError`` naming ``what`` when the spec is malformed, the module cannot be imported or
    the attribute is missing, so a command line can print one clear line and exit 2.
    """
    module, colon, attr = spec.partition(":")
    if not (colon and module and attr):
        raise ValueError(f"{what} {spec!r}: expected package.module:function")
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    try:
        obj: Any = importlib.import_module(module)
    except ImportError as exc:
        raise ValueError(f"{what} {spec!r}: cannot import {module!r}: {exc}") from exc
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ValueError(f"{what} {spec!r}: {module!r} has no attribute {attr!r}") from None
    return obj
