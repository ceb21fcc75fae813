"""Running a fabric: build its world from options, serve, and say where it listens."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import signal
import sys
from typing import IO, TYPE_CHECKING, Optional, Sequence

from datadist_sim.fabric.transport.address import (
    ENV_VAR,
    STANDING_SOCKET,
    FabricAddress,
    default_address,
    from_env,
    new_address,
    parse,
)

if TYPE_CHECKING:
    from datadist_sim._world.surface import SimConfig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seed", type=int, help="the world's seed (default 0)")
    parser.add_argument("--real-clock", type=float, metavar="SPEED", help="run on wall time at SPEED")
    parser.add_argument("--scenario", help="a bundled fault scenario or a TOML file, for the whole world")
    parser.add_argument("--trace", metavar="PATH", help="stream the merged trace as JSON lines to PATH")
    parser.add_argument("--idle-exit", type=float, metavar="S", help="exit after S seconds with no process")
    parser.add_argument("--socket-dir", help="directory of a new socket (default: a fresh private one)")
    parser.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a SimConfig field of the world, e.g. link_busy=serialize or v2_cluster_limit=true (repeatable)",
    )
    parser.add_argument(
        "--shared",
        "--user",
        dest="user",
        action="store_true",
        help="serve at this user's standing address (what exec --fabric=shared joins)",
    )
    parser.add_argument(
        "--clean",
        action="store_true",
        help="remove a dead standing fabric's files (its shared memory goes with it)",
    )
    parser.add_argument("--quiet", action="store_true", help=argparse.SUPPRESS)  # on-demand: no address
    parser.add_argument("--lock-fd", type=int, help=argparse.SUPPRESS)  # on-demand: the starter's lock


def _option(args: argparse.Namespace, where: FabricAddress, name: str) -> Optional[str]:
    value = getattr(args, name.replace("-", "_"), None)
    return str(value) if value is not None else where.options.get(name)


def run(args: argparse.Namespace, out: Optional[IO[str]] = None) -> int:
    """Serve one world until interrupted (or idle); prints ``DATADIST_SIM_FABRIC=...`` first (to
    ``out``, else the ``sys.stdout`` of the moment)."""
    out = sys.stdout if out is None else out
    if args.clean:
        return clean(out)
    made: Optional[str] = None  # the fresh directory this fabric made for its socket: removed after
    try:
        where = default_address() if args.user else from_env()
        if where is None:
            where = new_address(args.socket_dir)
            made = os.path.dirname(where.path) if args.socket_dir is None else None
    except (RuntimeError, ValueError, OSError) as exc:
        print(f"datadist-sim fabric: {exc}", file=sys.stderr)
        return 2
    try:
        return _serve(args, where, out)
    finally:
        if made is not None:  # empty by now: the server took its socket, lock and log away
            with contextlib.suppress(OSError):
                os.rmdir(made)


def _serve(args: argparse.Namespace, where: FabricAddress, out: IO[str]) -> int:
    from datadist_sim._world.surface import RealClock, SimWorld, open_trace_sink
    from datadist_sim.fabric.host.server import FabricServer

    seed = int(_option(args, where, "seed") or 0)
    speed = _option(args, where, "real-clock")
    settings = [f"{k[len('config.') :]}={v}" for k, v in where.options.items() if k.startswith("config.")]
    try:
        config = sim_config([*settings, *args.config])
    except ValueError as exc:
        print(f"datadist-sim fabric: {exc}", file=sys.stderr)
        return 2
    trace_path = _option(args, where, "trace")
    try:
        sink = open_trace_sink(trace_path, "a") if trace_path else None  # line-buffered: on disk as recorded
    except OSError as exc:  # a symlink planted at the name (refused), a directory we cannot write
        print(f"datadist-sim fabric: --trace: {exc}", file=sys.stderr)
        return 2
    world = SimWorld(
        seed=seed, clock=RealClock(float(speed)) if speed else None, config=config, trace_sink=sink
    )
    scenario = _option(args, where, "scenario")
    if scenario:
        world.faults.load(scenario)
    server = FabricServer(where, world)
    signal.signal(signal.SIGTERM, lambda *_: server.stop())  # before the line: a reader may stop us at once
    try:
        server.bind(lock_fd=args.lock_fd)
    except (RuntimeError, OSError) as exc:
        print(f"datadist-sim fabric: {exc}", file=sys.stderr)
        return 2
    if not args.quiet:
        print(f"{ENV_VAR}={where}", file=out, flush=True)
    try:
        server.serve(idle_exit_s=args.idle_exit)
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
        if sink is not None:
            sink.close()
    return 0


def sim_config(settings: Sequence[str]) -> SimConfig:
    """A ``SimConfig`` with ``NAME=VALUE`` settings applied (scalar fields, converted to their type)."""
    from datadist_sim._world.surface import SimConfig

    config = SimConfig()
    kinds = {field.name: field.type for field in dataclasses.fields(SimConfig)}
    for setting in settings:
        name, sep, text = setting.partition("=")
        kind = kinds.get(name.strip())
        if not sep or kind not in ("float", "int", "bool", "str"):
            raise ValueError(f"--config {setting!r}: expected NAME=VALUE for a scalar SimConfig field")
        value: object = text
        if kind == "bool":
            if text.lower() not in ("1", "0", "true", "false", "yes", "no"):
                raise ValueError(f"--config {setting!r}: expected true or false")
            value = text.lower() in ("1", "true", "yes")
        elif kind in ("float", "int"):
            value = float(text) if kind == "float" else int(text)
        setattr(config, name.strip(), value)
    return config


def exec_address(choice: str, *, seed: Optional[int] = None, trace: Optional[str] = None) -> str:
    """The ``DATADIST_SIM_FABRIC`` that ``datadist-sim exec --fabric[=CHOICE]`` gives its program.

    ``auto`` (plain ``--fabric``): the one already set (a program started inside another exec's world
    stays in it), else a fresh world of its own, so two jobs started side by side never meet;
    ``shared``: this user's standing address, which every ``--fabric=shared`` program joins; anything
    else is an address. ``seed``/``trace`` join the address's options (unless it names its own) and
    take effect if the fabric is started on demand by this program.
    """
    if choice == "shared":
        where = default_address()
    elif choice != "auto":
        where = parse(choice)
    else:
        current = from_env()
        where = current if current is not None else new_address()
    options = dict(where.options)
    if seed is not None:
        options.setdefault("seed", str(seed))
    if trace is not None:
        options.setdefault("trace", os.path.abspath(trace))
    return str(FabricAddress(where.path, where.token, options))


def owns_world(choice: str) -> bool:
    """Whether ``exec --fabric=CHOICE`` makes a world for its program alone (then it ends it after)."""
    return choice == "auto" and from_env() is None


def end_world(text: str) -> None:
    """After an exec's own world: stop its fabric if one runs, reclaim its memory, remove its directory."""
    import shutil

    where = parse(text)
    stop_fabric(where)
    shutil.rmtree(os.path.dirname(where.path), ignore_errors=True)


def stop_fabric(where: FabricAddress, timeout: float = 5.0) -> bool:
    """Stop the fabric listening at ``where`` (SIGTERM to the pid the kernel names for its socket, after
    checking it is this user's; SIGKILL if it lingers; its shared memory goes with it). True if one was
    running."""
    import socket
    import time

    from datadist_sim.fabric.transport.launch import LISTENING, probe
    from datadist_sim.fabric.transport.wire import check_peer

    if probe(where.path) != LISTENING:
        return False
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(1.0)
    try:
        sock.connect(where.path)
        pid = check_peer(sock, f"the socket {where.path}")
    except (OSError, RuntimeError):
        return False
    finally:
        sock.close()
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while _running(pid):
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            break
        time.sleep(0.02)
    return True


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            return handle.read().rpartition(")")[2].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def clean(out: IO[str] = sys.stdout) -> int:
    """``datadist-sim fabric --clean``: the standing fabric's files if nothing listens there any more (a
    fabric's shared memory has no name to clean: the kernel frees it with the fabric). A standing
    directory that is not this user's own and private is reported and left alone (exit status 1);
    nothing is created."""
    from datadist_sim.fabric.transport.address import standing_directory, standing_problem
    from datadist_sim.fabric.transport.launch import LISTENING, lock_path, log_path, probe

    files = 0
    problem = standing_problem()
    folder = standing_directory()
    where = FabricAddress(os.path.join(folder, STANDING_SOCKET), "")  # its paths only: no token is read
    if problem is None and os.path.isdir(folder) and probe(where.path) != LISTENING:
        for path in (where.path, lock_path(where), log_path(where)):
            if os.path.lexists(path):
                os.unlink(path)
                files += 1
    print(f"removed {files} stale fabric file(s)", file=out)
    if problem is not None:
        print(f"datadist-sim fabric --clean: {problem}", file=sys.stderr)
        return 1
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m datadist_sim.fabric", description=run.__doc__)
    add_arguments(parser)
    return run(parser.parse_args(argv))
