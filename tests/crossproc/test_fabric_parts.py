"""The fabric's parts in one process: the address format, the message channel, shared-memory backing
and copies through a raw-memory owner (no child processes, so these run in milliseconds). What the
wire's decoder admits and refuses is in ``test_wire``."""

from __future__ import annotations

import errno
import os
import socket
import stat
import threading
from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple

import numpy as np
import pytest

from datadist_sim._status import LLMException, LLMStatusCode
from datadist_sim._world.errors import SimError
from datadist_sim.fabric.host.shm import SharedAddressSpace, lend, shm_directory
from datadist_sim.fabric.transport import address
from datadist_sim.fabric.transport.channel import Channel, ChannelClosed, ChannelTimeout
from datadist_sim.fabric.transport.memfile import open_view

TOKEN = "0123456789abcdef0123"


# -- the address ------------------------------------------------------------------------------------


def test_an_address_round_trips_with_its_options() -> None:
    text = f"unix:/run/x/fabric.sock?token={TOKEN}&seed=3&scenario=flaky_link"
    where = address.parse(text)
    assert (where.path, where.token, where.options) == (
        "/run/x/fabric.sock",
        TOKEN,
        {"seed": "3", "scenario": "flaky_link"},
    )
    assert address.parse(str(where)) == where


@pytest.mark.parametrize(
    "text",
    [
        f"tcp://10.0.0.1:9000?token={TOKEN}",  # only Unix sockets: nothing off this machine
        f"unix:relative.sock?token={TOKEN}",
        "unix:/run/x/fabric.sock?token=short",
        "unix:/run/x/fabric.sock",
    ],
)
def test_anything_but_a_unix_socket_with_a_token_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="DATADIST_SIM_FABRIC"):
        address.parse(text)


def test_the_standing_address_is_private_and_stable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    first, second = address.default_address(), address.default_address()
    assert first == second
    folder = Path(first.path).parent
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE((folder / "token").stat().st_mode) == 0o600


# -- the channel ------------------------------------------------------------------------------------


class _Pair:
    """Two channels over a socketpair; the right one answers with ``answer``."""

    def __init__(self, answer: Any) -> None:
        import pickle

        a, b = socket.socketpair()
        self.left = Channel(a, _refuse, dumps=pickle.dumps, loads=pickle.loads, spawn=False, name="left")
        self.right = Channel(b, answer, dumps=pickle.dumps, loads=pickle.loads, spawn=True, name="right")
        self.left.start()
        self.right.start()

    def close(self) -> None:
        self.left.close()
        self.right.close()


def _refuse(kind: str, payload: Tuple[Any, ...]) -> Any:
    raise AssertionError(f"unexpected request {kind}")


@pytest.fixture
def pair() -> Any:
    made: List[_Pair] = []

    def make(answer: Any) -> _Pair:
        made.append(_Pair(answer))
        return made[-1]

    yield make
    for each in made:
        each.close()


def test_a_request_gets_its_reply_even_a_large_one(pair: Any) -> None:
    channel = pair(lambda kind, payload: (kind, payload[0] * 2)).left
    assert channel.request("double", 21, timeout=10) == ("double", 42)
    big = b"x" * (3 << 20)
    assert channel.request("echo", big, timeout=10) == ("echo", big + big)


def test_the_other_ends_exception_arrives_as_the_same_type_with_its_code(pair: Any) -> None:
    def answer(kind: str, payload: Tuple[Any, ...]) -> Any:
        if kind == "llm":
            raise LLMException("pull failed", status_code=LLMStatusCode.LLM_TIMEOUT)
        if kind == "sim":
            raise SimError(LLMStatusCode.LLM_PARAM_INVALID, "bad address")
        raise TypeError("cache should be Cache")

    channel = pair(answer).left
    with pytest.raises(LLMException, match="pull failed") as exc:
        channel.request("llm", timeout=10)
    assert exc.value.status_code is LLMStatusCode.LLM_TIMEOUT
    with pytest.raises(SimError) as sim:
        channel.request("sim", timeout=10)
    assert sim.value.code is LLMStatusCode.LLM_PARAM_INVALID
    with pytest.raises(TypeError, match="should be Cache"):
        channel.request("type", timeout=10)


def test_a_reply_that_never_comes_times_out(pair: Any) -> None:
    release = threading.Event()
    channel = pair(lambda kind, payload: release.wait(10)).left
    try:
        with pytest.raises(ChannelTimeout):
            channel.request("stuck", timeout=0.05)
    finally:
        release.set()


def test_a_closed_connection_wakes_every_waiter(pair: Any) -> None:
    release = threading.Event()
    both = pair(lambda kind, payload: release.wait(10))
    errors: List[BaseException] = []

    def wait() -> None:
        try:
            both.left.request("stuck", timeout=30)
        except BaseException as exc:
            errors.append(exc)

    waiters = [threading.Thread(target=wait) for _ in range(3)]
    for waiter in waiters:
        waiter.start()
    both.right.close()  # the peer process is gone
    for waiter in waiters:
        waiter.join(10)
    release.set()
    assert len(errors) == 3
    assert all(isinstance(error, ChannelClosed) for error in errors)
    with pytest.raises(ChannelClosed):
        both.left.request("after", timeout=1)


# -- shared memory and raw memory owned by another process ------------------------------------------


class _Owner:
    """Stands for the process owning raw memory: its bytes live in a dict of arrays."""

    def __init__(self) -> None:
        self.memory: Dict[int, np.ndarray] = {}
        self.requests: List[str] = []

    def _find(self, address: int, nbytes: int) -> np.ndarray:
        for start, array in self.memory.items():
            if start <= address and address + nbytes <= start + array.nbytes:
                return array[address - start : address - start + nbytes]
        raise SimError(LLMStatusCode.LLM_PARAM_INVALID, f"{address:#x} is not mine")

    def read(self, ranges: Sequence[Tuple[int, int]], take: Any) -> List[np.ndarray]:
        self.requests.append("read")
        return [self._find(a, n).copy() for a, n in ranges]

    def check_writable(self, ranges: Sequence[Tuple[int, int]], alone: bool = False) -> None:
        self.requests.append("check")
        for a, n in ranges:
            self._find(a, n)

    def write(self, chunks: Sequence[Tuple[int, np.ndarray]], take: Any, lent: Sequence[Any] = ()) -> None:
        self.requests.append("write")
        for a, data in chunks:
            self._find(a, data.nbytes)[...] = data

    direct = False

    def copy_direct(self, copies: Sequence[Tuple[int, int, int]]) -> bool:
        """As if the destination's owner read the source's memory itself (when ``direct``)."""
        self.requests.append("direct")
        if not self.direct:
            return False
        for dst, src, nbytes in copies:
            self._find(dst, nbytes)[...] = self._find(src, nbytes)
        return True


def _space(owner: _Owner) -> SharedAddressSpace:
    return SharedAddressSpace(owner, prefix=f"datadist-sim-test-{os.getpid()}-{id(owner)}")


def test_allocations_are_shared_files_that_another_mapping_sees_and_free_removes() -> None:
    space = _space(_Owner())
    pool = space.create_pool(1 << 20, oom_code=LLMStatusCode.LLM_OUT_OF_MEMORY)
    addr = pool.allocate(4096)
    view = space.view(addr, 4096)
    ref = space.locate(view[16:32])
    assert ref is not None
    assert ref[0].startswith(space._prefix)
    assert "/" not in ref[0]  # a name the client asks the fabric for: no path
    assert ref[1:] == (16, (16,), "|u1", (1,))
    other = open_view(ref, lend)  # what a client process maps (its fetch asks the fabric to lend)
    other[...] = 7
    assert view[16:32].tolist() == [7] * 16
    assert not [n for n in os.listdir(shm_directory()) if n.startswith(space._prefix)]  # no name
    pool.free(addr)
    with pytest.raises(FileNotFoundError):
        open_view(ref, lend)  # freed: gone
    assert space.segment_count == 0
    assert space.locate(np.zeros(4)) is None


def test_copies_to_and_from_raw_memory_go_through_its_owner_all_or_nothing() -> None:
    owner = _Owner()
    raw_src = np.arange(64, dtype=np.uint8)
    raw_dst = np.zeros(64, dtype=np.uint8)
    owner.memory = {0x7000_0000: raw_src, 0x7100_0000: raw_dst}
    space = _space(owner)
    pool = space.create_pool(1 << 20, oom_code=LLMStatusCode.LLM_OUT_OF_MEMORY)
    sim = pool.allocate(64)
    space.copy_ranges([(sim, 0x7000_0000, 64)])  # raw -> simulated (a pull from a registered cache)
    assert space.view(sim, 64).tolist() == list(range(64))
    space.copy_ranges([(0x7100_0000 + 8, sim, 8)])  # simulated -> raw (a pull into a registered cache)
    assert raw_dst[8:16].tolist() == list(range(8))
    before = raw_dst.copy()
    with pytest.raises(SimError) as exc:  # the second destination is not the owner's: nothing moves
        space.copy_ranges([(0x7100_0000, sim, 8), (0x7200_0000, sim, 8)])
    assert exc.value.code is LLMStatusCode.LLM_PARAM_INVALID
    assert np.array_equal(raw_dst, before)
    space.poison(0x7000_0000, 4)
    with pytest.raises(SimError) as poisoned:
        space.copy_ranges([(sim, 0x7000_0000, 8)])
    assert poisoned.value.code is LLMStatusCode.LLM_DEVICE_MEM_ERROR
    space.release_all()


@pytest.mark.parametrize("direct", [True, False])
def test_raw_to_raw_copies_go_process_to_process_when_they_can_else_through_the_owners(direct: bool) -> None:
    owner = _Owner()
    owner.direct = direct
    raw_src, raw_dst = np.arange(64, dtype=np.uint8), np.zeros(64, dtype=np.uint8)
    owner.memory = {0x7000_0000: raw_src, 0x7100_0000: raw_dst}
    space = _space(owner)
    space.copy_ranges([(0x7100_0000, 0x7000_0000 + 32, 32)])
    assert raw_dst[:32].tolist() == list(range(32, 64))
    assert owner.requests == (["check", "direct"] if direct else ["check", "direct", "read", "write"])
    space.release_all()


def test_a_raw_to_raw_copy_with_a_simulated_range_beside_it_does_not_go_direct() -> None:
    owner = _Owner()
    owner.direct = True
    raw_src, raw_dst = np.arange(64, dtype=np.uint8), np.zeros(64, dtype=np.uint8)
    owner.memory = {0x7000_0000: raw_src, 0x7100_0000: raw_dst}
    space = _space(owner)
    sim = space.create_pool(1 << 20, oom_code=LLMStatusCode.LLM_OUT_OF_MEMORY).allocate(64)
    space.copy_ranges([(0x7100_0000, 0x7000_0000, 8), (sim, 0x7000_0000, 8)])
    assert "direct" not in owner.requests
    assert raw_dst[:8].tolist() == list(range(8))
    assert space.view(sim, 8).tolist() == list(range(8))
    space.release_all()


def test_a_backing_cannot_be_truncated_under_the_fabric() -> None:
    """Truncating a mapped file makes the next touch of its lost pages a SIGBUS: the backings are
    sealed, so whoever maps one (any process of this user) is refused by the kernel."""
    space = _space(_Owner())
    pool = space.create_pool(1 << 20, oom_code=LLMStatusCode.LLM_OUT_OF_MEMORY)
    src, dst = pool.allocate(8192), pool.allocate(8192)
    space.view(src, 8192)[...] = 5
    ref = space.locate(space.view(dst, 8192))
    assert ref is not None
    fd, _ = lend(ref[0])  # the descriptor a client is handed
    try:
        for size in (0, 4096, 1 << 30):
            with pytest.raises(PermissionError):
                os.ftruncate(fd, size)
    finally:
        os.close(fd)
    space.copy_ranges([(dst, src, 8192)])  # the fabric still reads and writes every page
    assert space.view(dst, 8192).tolist() == [5] * 8192
    space.release_all()


def test_a_socket_path_too_long_for_unix_is_refused_up_front() -> None:
    with pytest.raises(ValueError, match="longer than a Unix socket allows"):
        address.parse(f"unix:/{'d' * 120}/fabric.sock?token={TOKEN}")


def test_exec_fabric_address(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from datadist_sim.fabric.host.service import exec_address

    explicit = f"unix:/run/x/fabric.sock?token={TOKEN}"
    assert exec_address(explicit) == explicit
    with pytest.raises(ValueError, match="Unix sockets only"):
        exec_address("tcp://127.0.0.1:1")
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    monkeypatch.delenv(address.ENV_VAR, raising=False)
    own, other = address.parse(exec_address("auto", seed=5)), address.parse(exec_address("auto"))
    assert own.path != other.path  # two `exec --fabric` jobs: two worlds
    assert own.token != other.token
    assert own.options == {"seed": "5"}
    for each in (own, other):
        assert stat.S_IMODE(os.stat(os.path.dirname(each.path)).st_mode) == 0o700
    shared = address.parse(exec_address("shared", seed=5))
    assert shared.path == address.default_address().path  # `--fabric=shared` jobs meet here
    assert shared.options == {"seed": "5"}
    monkeypatch.setenv(address.ENV_VAR, explicit)
    assert exec_address("auto") == explicit  # one already set wins
    assert address.parse(exec_address("auto", seed=5)).options == {"seed": "5"}
    assert address.parse(exec_address(explicit + "&seed=1", seed=5)).options == {"seed": "1"}


def test_fabric_world_settings_parse_to_their_types() -> None:
    from datadist_sim.fabric.host.service import sim_config

    config = sim_config(
        ["link_busy=serialize", "v2_cluster_limit=true", "max_links=8", "poll_interval_s=0.25"]
    )
    assert (config.link_busy, config.v2_cluster_limit, config.max_links, config.poll_interval_s) == (
        "serialize",
        True,
        8,
        0.25,
    )
    for bad in ("link_bandwidth={}", "no_such_field=1", "metadata_only=maybe", "max_links"):
        with pytest.raises(ValueError, match="--config"):
            sim_config([bad])


# -- shared-memory names ----------------------------------------------------------------------------


def test_a_backing_that_cannot_be_had_is_the_pools_out_of_memory_code(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from datadist_sim.fabric.host import shm

    space = _space(_Owner())
    pool = space.create_pool(1 << 20, oom_code=LLMStatusCode.LLM_DEVICE_OUT_OF_MEMORY)
    try:
        addr = pool.allocate(4096)

        def no_memory(*_: object) -> int:
            raise OSError(errno.EMFILE, "Too many open files")

        monkeypatch.setattr(shm.os, "memfd_create", no_memory)
        with pytest.raises(SimError) as exc:
            pool.allocate(4096)
        assert exc.value.code is LLMStatusCode.LLM_DEVICE_OUT_OF_MEMORY
        assert list(pool.allocations()) == [addr]  # the failed one took nothing
        assert space.segment_count == 1
    finally:
        space.release_all()


# -- start-up races ---------------------------------------------------------------------------------


def test_a_listener_with_a_full_backlog_counts_as_alive_and_its_socket_is_never_replaced(
    tmp_path: Path,
) -> None:
    from datadist_sim._world.world import SimWorld
    from datadist_sim.fabric.host.server import FabricServer
    from datadist_sim.fabric.transport.launch import LISTENING, STALE, probe

    folder = tmp_path / "f"
    folder.mkdir(mode=0o700)
    where = address.new_address(str(folder))
    live = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    live.bind(where.path)
    live.listen(0)  # never accepts: the backlog fills at once
    queued = []
    try:
        for _ in range(64):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.setblocking(False)
            try:
                sock.connect(where.path)
            except BlockingIOError:  # EAGAIN: full
                sock.close()
                break
            queued.append(sock)
        assert probe(where.path) == LISTENING
        inode = os.stat(where.path).st_ino
        server = FabricServer(where, SimWorld(seed=0))
        with pytest.raises(RuntimeError, match="already listening"):
            server.bind()
        assert os.stat(where.path).st_ino == inode  # the live socket is still there
        server.space.release_all()
    finally:
        for sock in queued:
            sock.close()
        live.close()
    assert probe(where.path) == STALE  # nobody listens any more: a new fabric may replace it


def test_a_proxys_method_is_asked_about_once_then_found_on_its_class_and_forwards_every_call() -> None:
    """After the fabric has said a name is a method, the proxy class holds it: later look-ups neither ask
    the fabric again nor go through ``__getattr__`` (the failed look-up cost more than the
    call), and each call still travels as ``("call", proxy, name, args, kwargs)``."""
    from datadist_sim.fabric.client.remote import proxy_class, stand_in

    sent: List[Tuple[Any, ...]] = []

    class Requester:
        def request(self, kind: str, *payload: Any) -> Any:
            sent.append((kind, *payload))
            return (True, None) if kind == "get" else len(sent)

    proxy = stand_in(Requester(), 7, "ProxyMethodProbe")
    other = stand_in(Requester(), 8, "ProxyMethodProbe")
    assert proxy.pull_cache(1, 2, dst=3) == 2
    assert other.pull_cache(4) == 3
    assert "pull_cache" in vars(proxy_class("ProxyMethodProbe"))
    assert sent == [
        ("get", proxy, "pull_cache"),
        ("call", proxy, "pull_cache", (1, 2), {"dst": 3}),
        ("call", other, "pull_cache", (4,), {}),
    ]
    assert "pull_cache" not in vars(proxy_class("Cache"))  # another type learns its own names
