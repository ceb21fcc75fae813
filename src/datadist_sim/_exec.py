"""``datadist-sim exec -- PROGRAM ARGS``: run an unmodified program with the fake installed.

A temporary directory put first on ``PYTHONPATH`` holds a ``sitecustomize`` module, so every Python
process the program starts (the program itself, its workers, a ``bash`` script's ``python``) calls
``boot()`` the first time it imports ``llm_datadist``, ``llm_datadist_v1``, ``hixl``, ``datadist_sim`` or
``pytest``: ``datadist_sim.install()``, the seed, logging and the trace, all from environment variables.
A process that imports none of them pays nothing. pytest boots on its own import: its assertion-rewrite
hook later sits in front of this one and would load the ``datadist_sim`` plugin past it, leaving
``llm_datadist`` unimported when the first conftest runs (which may then put a mock in its place).
The ``sitecustomize`` it shadows, if any, still runs. Nothing is written to site-packages, and the
directory is removed when the program ends.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Dict, Mapping, Optional, Sequence

if TYPE_CHECKING:
    from datadist_sim._coverage import CodeCoverage

ENV_SEED = "DATADIST_SIM_SEED"
ENV_FORCE = "DATADIST_SIM_FORCE"
ENV_LOG = "DATADIST_SIM_LOG"
ENV_TRACE = "DATADIST_SIM_TRACE"
ENV_COVERAGE = "DATADIST_SIM_COVERAGE"
"""A private directory where each process writes the codes its client code received (``--coverage``)."""
EXIT_REFUSED = 3
"""A real ``llm_datadist`` would be shadowed (pass ``--force``)."""
EXIT_CANNOT_EXECUTE = 126
EXIT_NOT_FOUND = 127

_SITECUSTOMIZE = '''\
"""Written by `datadist-sim exec`: the first import of llm_datadist, llm_datadist_v1, datadist_sim or pytest
(or hixl) installs the fake (datadist_sim._exec.boot); the sitecustomize this one shadows still runs."""
import importlib.machinery
import importlib.util
import os
import sys


class _InstalledLoader:
    """Hands the import under way the module boot() has just put in sys.modules. It is taken out until
    then: importlib would otherwise load that module's own spec again (a second copy of the package)."""

    def __init__(self, name):
        self._module = sys.modules.pop(name)
        self._spec = self._module.__spec__

    def create_module(self, spec):
        return self._module

    def exec_module(self, module):
        module.__spec__ = self._spec  # the import machinery replaced it with ours


class _DatadistSimBoot:
    names = ("llm_datadist", "llm_datadist_v1", "hixl", "datadist_sim")
    # pytest: boot before its assertion-rewrite hook goes in front of this finder and before any
    # conftest runs, so a conftest's "MagicMock unless already imported" sees the fake.
    early = ("pytest", "_pytest")

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name not in cls.names and name not in cls.early:
            return None
        sys.meta_path.remove(cls)
        try:
            from datadist_sim._exec import boot
        except ImportError as exc:
            print(f"datadist-sim exec: {sys.executable} cannot import datadist_sim ({exc})", file=sys.stderr)
            return None
        boot()
        if name not in cls.names or name not in sys.modules:
            return None
        return importlib.util.spec_from_loader(name, _InstalledLoader(name))


sys.meta_path.insert(0, _DatadistSimBoot)
_here = os.path.dirname(os.path.abspath(__file__))
_rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]
_spec = importlib.machinery.PathFinder.find_spec("sitecustomize", _rest)
if _spec is not None and _spec.loader is not None:
    _shadowed = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_shadowed)
    sys.modules["sitecustomize"] = _shadowed
'''


def boot(environ: Optional[Mapping[str, str]] = None) -> None:
    """Start-up of an exec'd Python process: install the fake and apply the ``DATADIST_SIM_*`` settings.

    Ends the process with ``EXIT_REFUSED`` when a real ``llm_datadist`` is importable and
    ``DATADIST_SIM_FORCE`` is not ``1`` (running it unshadowed is never what the user meant).
    """
    import datadist_sim
    from datadist_sim import _log, _torch_npu
    from datadist_sim._world.surface import open_trace_sink

    env = os.environ if environ is None else environ
    try:
        datadist_sim.install(force=env.get(ENV_FORCE) == "1")
    except RuntimeError as exc:
        print(f"datadist-sim exec: not run: {exc} (datadist-sim exec --force does)", file=sys.stderr)
        sys.stderr.flush()
        os._exit(EXIT_REFUSED)  # SystemExit is fatal this early in start-up
    _torch_npu.install(env)  # torch.npu and Tensor.npu() on CPU torch, as the vendor's samples use them
    seed, trace = env.get(ENV_SEED), env.get(ENV_TRACE)
    if seed or trace:
        # The trace streams to its file event by event (not written at exit): it is complete when the
        # program returns, also when a process leaves by os._exit or a signal, and holds every event.
        try:
            sink = open_trace_sink(trace) if trace else None
        except OSError as exc:  # a symlink planted at the name, a directory we cannot write
            print(f"datadist-sim exec: not run: --trace: {exc}", file=sys.stderr)
            sys.stderr.flush()
            os._exit(EXIT_REFUSED)
        if sink is not None:
            atexit.register(sink.close)
        world = datadist_sim.reset_default_world(datadist_sim.SimWorld(seed=int(seed or 0), trace_sink=sink))
        if trace and "{pid}" in trace and hasattr(os, "register_at_fork"):
            # a forked worker (multiprocessing's default on Linux) writes its own t-{pid} file, not ours
            os.register_at_fork(after_in_child=lambda: _child_trace(world, trace))
    if env.get(ENV_LOG):
        _log.enable(int(env[ENV_LOG]))
    if env.get(ENV_COVERAGE):
        _count_codes(Path(env[ENV_COVERAGE]))


def _child_trace(world: Any, template: str) -> None:
    """A forked child's own ``{pid}`` trace file; if it cannot be had, no trace for that child (never
    its parent's file, which the child would otherwise go on writing into)."""
    from datadist_sim._world.surface import open_trace_sink

    try:
        sink: Optional[IO[str]] = open_trace_sink(template)
    except OSError as exc:
        print(f"datadist-sim exec: process {os.getpid()} keeps no trace: {exc}", file=sys.stderr)
        sink = None
    world.trace.stream_to(sink)


def _count_codes(directory: Path) -> None:
    """``exec --coverage`` in this process: count every call of every world, and at exit write the
    counts to ``directory/PID.json`` for the parent. A fabric client's calls run in the fabric, which
    counts them per process: they are fetched from there instead."""
    from datadist_sim._coverage import CodeCoverage

    coverage = CodeCoverage().start()
    os.register_at_fork(after_in_child=coverage.reset)  # a forked child counts only its own calls

    def write() -> None:
        from datadist_sim.fabric.client.client import existing_client

        client = existing_client()
        if client is not None:
            with contextlib.suppress(Exception):  # a fabric that is gone has nothing more to give
                coverage.merge(CodeCoverage.from_dict(client.function("coverage")))
        coverage.dump(directory / f"{os.getpid()}.json")

    atexit.register(write)


def program_env(
    boot_dir: str,
    *,
    seed: Optional[int] = None,
    force: bool = False,
    log_level: Optional[int] = None,
    trace: Optional[str] = None,
    extra: Optional[Mapping[str, str]] = None,
) -> Dict[str, str]:
    """The program's environment: ours plus ``boot_dir`` first on ``PYTHONPATH`` and the settings."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (boot_dir, env.get("PYTHONPATH", "")) if p)
    settings = {
        ENV_SEED: None if seed is None else str(seed),
        ENV_FORCE: "1" if force else None,
        ENV_LOG: None if log_level is None else str(log_level),
        # absolute for a program that changes directory, but not resolved: resolving would follow a
        # symlink planted at the name, and the program would then write to its target unawares
        ENV_TRACE: None if trace is None else os.path.abspath(trace),
    }
    for name, value in settings.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    env.update(extra or {})
    return env


def run_program(
    argv: Sequence[str],
    *,
    seed: Optional[int] = None,
    force: bool = False,
    log_level: Optional[int] = None,
    trace: Optional[str] = None,
    extra_env: Optional[Mapping[str, str]] = None,
    coverage: Optional[CodeCoverage] = None,
) -> int:
    """Run ``argv`` with the fake installed; its exit code (128 + N when killed by signal N,
    126/127 when it cannot be run). With ``coverage``, the status codes every Python process's client
    code received are added to it when the program ends (a process that ends by ``os._exit`` or a
    signal writes none)."""
    with tempfile.TemporaryDirectory(prefix="datadist-sim-exec-") as boot_dir:
        Path(boot_dir, "sitecustomize.py").write_text(_SITECUSTOMIZE, encoding="utf-8")
        env = program_env(boot_dir, seed=seed, force=force, log_level=log_level, trace=trace, extra=extra_env)
        counts = Path(boot_dir, "coverage")
        if coverage is not None:
            counts.mkdir(mode=0o700)
            env[ENV_COVERAGE] = str(counts)
        try:
            return _call(argv, env)
        finally:
            if coverage is not None:
                coverage.merge(type(coverage).load_all(sorted(counts.glob("*.json"))))


def _call(argv: Sequence[str], env: Mapping[str, str]) -> int:
    try:
        code = subprocess.call(list(argv), env=env)
    except FileNotFoundError:
        print(f"datadist-sim exec: {argv[0]}: command not found", file=sys.stderr)
        return EXIT_NOT_FOUND
    except PermissionError:
        print(f"datadist-sim exec: {argv[0]}: permission denied", file=sys.stderr)
        return EXIT_CANNOT_EXECUTE
    except KeyboardInterrupt:
        return 128 + signal.SIGINT
    return 128 - code if code < 0 else code
