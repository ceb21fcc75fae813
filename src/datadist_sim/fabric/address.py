"""Where a fabric listens and the token that admits a process: one environment variable.

``DATADIST_SIM_FABRIC=unix:/run/user/1000/datadist-sim/fabric.sock?token=3f9a...``. Only Unix sockets
are accepted, so nothing off this machine can reach a fabric, and the token (compared in constant time
before anything else is read) keeps other local processes out. The default address lives in a per-user
directory of mode 0700, with its token in a 0600 file beside the socket.
"""

from __future__ import annotations

import os
import secrets
import tempfile
from dataclasses import dataclass
from typing import Dict, Mapping, Optional
from urllib.parse import parse_qs, quote

ENV_VAR = "DATADIST_SIM_FABRIC"
MAX_SOCKET_PATH = 107
"""``sun_path`` holds 108 bytes on Linux, the last one a NUL."""


@dataclass(frozen=True)
class FabricAddress:
    """A fabric's socket path, its token, and options every process of the world agrees on."""

    path: str
    token: str
    options: Dict[str, str]

    def __str__(self) -> str:
        extra = "".join(f"&{key}={quote(value)}" for key, value in sorted(self.options.items()))
        return f"unix:{self.path}?token={self.token}{extra}"

    def option_float(self, name: str, default: float) -> float:
        value = self.options.get(name)
        return default if value is None else float(value)


def parse(text: str) -> FabricAddress:
    """Parse ``unix:/path?token=...[&key=value...]``; anything else raises ``ValueError``."""
    scheme, sep, rest = text.partition(":")
    if scheme != "unix" or not sep:
        raise ValueError(f"{ENV_VAR} must be 'unix:/path?token=...' (Unix sockets only), got {text!r}")
    path, _, query = rest.partition("?")
    fields = {key: values[-1] for key, values in parse_qs(query, keep_blank_values=True).items()}
    token = fields.pop("token", "")
    if not path.startswith("/"):
        raise ValueError(f"{ENV_VAR}: the socket path must be absolute, got {path!r}")
    if len(path.encode()) > MAX_SOCKET_PATH:
        raise ValueError(f"{ENV_VAR}: the socket path is longer than a Unix socket allows: {path!r}")
    if len(token) < 16:
        raise ValueError(f"{ENV_VAR}: a token of at least 16 characters is required")
    return FabricAddress(path, token, fields)


def from_env(environ: Optional[Mapping[str, str]] = None) -> Optional[FabricAddress]:
    """The fabric this process belongs to, or None (then the simulator runs in-process)."""
    text = (os.environ if environ is None else environ).get(ENV_VAR)
    return parse(text) if text else None


def new_address(directory: Optional[str] = None, name: str = "fabric.sock") -> FabricAddress:
    """A fresh address with a fresh token in a private directory (a new temporary one by default)."""
    folder = directory if directory is not None else tempfile.mkdtemp(prefix="datadist-sim-")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    where = FabricAddress(os.path.join(folder, name), secrets.token_hex(16), {})
    return parse(str(where))  # refuses a path too long for a socket


def default_address() -> FabricAddress:
    """This user's standing fabric address: the same for every process, so separately started
    programs (``datadist-sim exec`` in two shells) share one world. The token is made once."""
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    folder = os.path.join(base, f"datadist-sim-{os.getuid()}")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    if os.stat(folder).st_uid != os.getuid() or os.stat(folder).st_mode & 0o077:
        raise RuntimeError(f"{folder} is not a private directory of this user")
    token_path = os.path.join(folder, "token")
    try:
        fd = os.open(token_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    else:
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_hex(16))
    with open(token_path, encoding="ascii") as handle:
        token = handle.read().strip()
    return FabricAddress(os.path.join(folder, "fabric.sock"), token, {})
