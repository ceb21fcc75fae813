"""Where a fabric listens and the token that admits a process: one environment variable.

``DATADIST_SIM_FABRIC=unix:/run/user/1000/datadist-sim/fabric.sock?token=3f9a...``. Only Unix sockets
are accepted, so nothing off this machine can reach a fabric; the socket's directory must be the user's
own and private, the peer's uid ours, and both ends prove they know the token without sending it
(``wire``), so other local users are kept out and nobody can pass for the fabric. ``new_address`` makes
a fresh world (what each ``datadist-sim exec --fabric`` gets); ``default_address`` is this user's
standing one (``--fabric=shared``), in a per-user directory of mode 0700 with its token in a 0600 file
beside the socket.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import tempfile
from dataclasses import dataclass, field
from typing import Dict, Mapping, Optional
from urllib.parse import parse_qs, quote

from datadist_sim.fabric.transport.wire import FabricRefused, check_private_directory, private_directory

ENV_VAR = "DATADIST_SIM_FABRIC"
STANDING_SOCKET = "fabric.sock"
"""The standing fabric's socket, in ``standing_directory()``."""
MAX_SOCKET_PATH = 107
"""``sun_path`` holds 108 bytes on Linux, the last one a NUL."""


@dataclass(frozen=True)
class FabricAddress:
    """A fabric's socket path, its token, and options every process of the world agrees on."""

    path: str
    token: str = field(repr=False)
    options: Dict[str, str] = field(default_factory=dict)

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
    """A fresh address with a fresh token in a private directory (a new temporary one by default; one
    that is given is created 0700, or refused if it is not this user's and private)."""
    folder = directory if directory is not None else tempfile.mkdtemp(prefix="datadist-sim-", dir=_base())
    private_directory(folder)
    where = FabricAddress(os.path.join(folder, name), secrets.token_hex(16), {})
    return parse(str(where))  # refuses a path too long for a socket


def default_address() -> FabricAddress:
    """This user's standing fabric address: the same for every process that asks, so separately started
    programs that choose it (``datadist-sim exec --fabric=shared``) share one world. The token is made
    once: written to a temporary file and linked into place, so a reader never sees it half-written and
    of two processes making it at once, one wins and both read the winner's."""
    folder = standing_directory()
    try:
        private_directory(folder)
    except (FabricRefused, OSError) as exc:  # someone else's, a file, not private: never used
        raise FabricRefused(standing_refusal(folder, exc)) from None
    token_path = os.path.join(folder, "token")
    if not os.path.exists(token_path):
        draft = os.path.join(folder, f".token-{secrets.token_hex(8)}")
        fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "w") as handle:
                handle.write(secrets.token_hex(16))
                handle.flush()
                os.fsync(handle.fileno())
            with contextlib.suppress(FileExistsError):
                os.link(draft, token_path)  # never replaces a token another process put there
        finally:
            os.unlink(draft)
    info = os.lstat(token_path)
    if info.st_uid != os.getuid() or info.st_mode & 0o077 or not stat.S_ISREG(info.st_mode):
        raise FabricRefused(f"{token_path} is not a private file of this user: refusing to use it")
    with open(token_path, encoding="ascii") as handle:
        token = handle.read().strip()
    return FabricAddress(os.path.join(folder, STANDING_SOCKET), token, {})


def standing_directory() -> str:
    """Where this user's standing fabric lives (its socket, token, lock and log); nothing is created."""
    return os.path.join(_base(), f"datadist-sim-{os.getuid()}")


def standing_problem() -> Optional[str]:
    """Why the standing directory cannot be used, if it exists and cannot; None if it is missing or fine.
    Looks only: creates nothing (``fabric --clean`` asks this before it touches anything)."""
    folder = standing_directory()
    if not os.path.lexists(folder):
        return None
    try:
        check_private_directory(folder)
    except FabricRefused as exc:
        return standing_refusal(folder, exc)
    return None


def standing_refusal(folder: str, why: BaseException) -> str:
    """What is wrong with the standing directory, and what fixes it. A directory of another user at our
    name (made first, in a shared /tmp) cannot be repaired by us, only removed by its owner or root, or
    avoided by pointing ``XDG_RUNTIME_DIR`` at a private directory of our own."""
    try:
        info = os.lstat(folder)
        ours = info.st_uid == os.getuid() and stat.S_ISDIR(info.st_mode)
    except OSError:
        ours = False
    fix = f"make it private (chmod 700 {folder}) or remove it" if ours else "have its owner or root remove it"
    return (
        f"cannot use the standing fabric directory {folder}: {why}. To fix: {fix}, or set "
        "XDG_RUNTIME_DIR to a private directory of your own"
    )


def _base() -> str:
    """Where fabric directories go: ``$XDG_RUNTIME_DIR`` (per-user, private), else the temp directory."""
    return os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
