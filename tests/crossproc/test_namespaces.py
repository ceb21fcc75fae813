"""A client in another PID namespace or user namespace (a pod's sidecar, a container sharing the socket
directory) joins a fabric started outside it and maps its memory: the fabric hands each memory file over
as a descriptor on the client's authenticated connection (``fabric.fdpass``), so no
``/proc/<fabric pid>/fd/<n>`` path, which names another process there or is refused by the kernel's
ptrace check, is needed. Both directions are run: the namespaced process writes the bytes a process
outside pulls, and pulls the bytes a process outside wrote; each side checks the bytes it sees. Each
descriptor is closed once mapped: many mappings leave none behind."""

from __future__ import annotations

import functools
import shutil
import subprocess
from typing import List, Tuple

import pytest

from .conftest import TIMEOUT_S, Fabric, Program

pytestmark = pytest.mark.crossproc

PID_NS = ("unshare", "--pid", "--fork", "--mount-proc")
USER_NS = ("unshare", "--user", "--map-root-user")


@functools.cache
def _works(launcher: Tuple[str, ...]) -> bool:
    """Whether this machine lets us start a process so (unshare present, and permitted)."""
    if shutil.which("unshare") is None:
        return False
    try:
        done = subprocess.run([*launcher, "true"], capture_output=True, timeout=TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def _start(fabric: Fabric, launcher: Tuple[str, ...], script: str, *args: str) -> Program:
    program = Program(script, list(args), fabric.env, launcher=launcher)
    fabric.programs.append(program)
    return program


NAMESPACES = [
    pytest.param(PID_NS, id="pid-namespace"),
    pytest.param(USER_NS, id="user-namespace"),
]


def _need(launcher: Tuple[str, ...]) -> None:
    if not _works(launcher):
        pytest.skip(f"{' '.join(launcher)} is unavailable or not permitted here")


@pytest.mark.parametrize("launcher", NAMESPACES)
@pytest.mark.parametrize("inside", ["decode", "prompt"])
def test_a_client_in_another_namespace_pulls_and_is_pulled_from_with_the_bytes_intact(
    fabric: Fabric, launcher: Tuple[str, ...], inside: str
) -> None:
    _need(launcher)
    prompt_at: Tuple[str, ...] = launcher if inside == "prompt" else ()
    decode_at: Tuple[str, ...] = launcher if inside == "decode" else ()
    prompt = _start(fabric, prompt_at, "kv_prompt.py")
    # the Prompt writes its cache through views mapped from the descriptors it was handed, and reads it
    # back through get_cache_tensors (another mapping)
    assert prompt.expect("tensor1_matches") == "True"
    prompt.expect("ready")
    decode = _start(fabric, decode_at, "kv_decode.py")
    assert decode.expect("link") == "LLM_SUCCESS ['LLM_SUCCESS']"
    assert decode.expect("bytes_match") == "True"  # the pulled bytes, seen through the Decode's mapping
    assert decode.expect("unlink") == "LLM_SUCCESS"
    decode.expect("done")
    assert decode.finish() == 0
    prompt.tell()
    prompt.expect("done")
    assert prompt.finish() == 0


@pytest.mark.parametrize("launcher", [pytest.param((), id="same-namespace"), *NAMESPACES])
def test_mapping_memory_many_times_leaves_no_descriptor_or_mapping_behind(
    fabric: Fabric, launcher: Tuple[str, ...]
) -> None:
    if launcher:
        _need(launcher)
    program = _start(fabric, launcher, "views_many.py")
    assert program.expect("intact") == "True"
    held: List[int] = [int(n) for n in program.expect("held").split()]
    fds_before, maps_before, fds_after, maps_after = held
    assert fds_after == fds_before, held
    assert maps_after == maps_before, held
    program.expect("done")
    assert program.finish() == 0


@pytest.mark.parametrize("launcher", NAMESPACES)
def test_large_transfers_to_and_from_raw_pointers_of_a_namespaced_client_arrive_intact(
    fabric: Fabric, launcher: Tuple[str, ...]
) -> None:
    """Raw pointers of a process in another namespace: past the inline limit, the bytes travel through
    scratch files it maps from descriptors the fabric hands over while it serves the fabric's request."""
    _need(launcher)
    prompt = fabric.start("large_pair.py", "prompt")
    decode = _start(fabric, launcher, "large_pair.py", "decode")
    shared_id = prompt.expect("shared_id")
    prompt.tell()
    decode.tell()
    assert prompt.expect("status") == "OK"
    assert decode.expect("status") == "OK"
    decode.tell(shared_id)
    for _ in range(2):
        assert decode.expect("raw_to_raw") == "True"
        assert decode.expect("raw_to_shared") == "True"
        assert decode.expect("shared_to_raw") == "True"
    assert int(decode.expect("scratch_files_made")) >= 1
    decode.expect("pulled")
    decode.tell()
    prompt.tell()
    decode.expect("done")
    prompt.expect("done")
    assert (prompt.finish(), decode.finish()) == (0, 0)
