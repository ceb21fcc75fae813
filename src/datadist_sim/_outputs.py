"""Opening the files a user names for our output (``--trace``, ``--out``) without following a symlink.

Such files often live in shared directories (``/tmp``, a job's scratch space), where another local user
can plant a symbolic link at the name before we write: following it would overwrite or append to
whatever the link points at, with our rights. The final component is therefore opened with
``O_NOFOLLOW``, and a link there is refused with an error that says so; directories on the way are the
user's choice, as with any path they give.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import IO, Union

PathLike = Union[str, Path]


class UnsafeOutput(OSError):
    """The output's name is a symbolic link (or otherwise cannot be opened without following one)."""


def open_output(path: PathLike, mode: str = "w", *, line_buffered: bool = False) -> IO[str]:
    """``path`` opened for text output: ``"w"`` truncates (creating it, mode 0666 less the umask),
    ``"a"`` appends. A symbolic link at ``path`` raises ``UnsafeOutput`` naming it; nothing is written."""
    if mode not in ("w", "a"):
        raise ValueError(f"open_output: mode must be 'w' or 'a', got {mode!r}")
    # O_NOFOLLOW fails the open on a link before O_TRUNC can touch what it points at
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    flags |= os.O_APPEND if mode == "a" else os.O_TRUNC
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeOutput(
                f"{path} is a symbolic link: refusing to write through it (remove it or choose another path)",
            ) from None
        raise
    return os.fdopen(fd, mode, encoding="utf-8", buffering=1 if line_buffered else -1)


def write_output(path: PathLike, text: str) -> None:
    """Write ``text`` to ``path`` as ``open_output`` opens it (the whole file replaced)."""
    with open_output(path) as handle:
        handle.write(text)
