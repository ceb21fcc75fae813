"""``hixl.Hixl`` and ``hixl.get_capability``: the binding's checks, then one door call per operation.

What is decided here is what the binding (``hixl_py.cc``) and ``hixl::Hixl`` (``hixl_impl.cc``) decide
before the engine: pybind's argument casting (``_cast``), the ``initialized_`` flag (every method of an
object that is not initialised answers ``FAILED`` with empty second values, ``hixl_py.cc:79-214``),
``timeout_in_millis > 0`` (``hixl_impl.cc:289, 303, 314, 329, 364, 406``), zero addresses, handles and
requests (``hixl_impl.cc:24-32, 115, 123, 388``) and the notify lengths (``:399-415``). What the engine
decides (connections, memory, bytes, time) is the world's (``_world/hixl_engines.py``); its refusals
come back as ``SimError`` and are reported with the hixl code the vendor pairs with them
(``adxl_utils.cc:50-63``). Each call is traced as ``hixl.<method>`` with the code's name as outcome.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple, TypeVar

from datadist_sim._status import LLMStatusCode
from datadist_sim._world import door
from datadist_sim._world.door import HixlEngine, SimError, SimWorld
from datadist_sim.hixl import _codes as codes
from datadist_sim.hixl._cast import (
    Method,
    Param,
    bind,
    instance_of,
    sequence_of,
    signed,
    text,
    text_map,
    unsigned,
)
from datadist_sim.hixl._enum import AsyncConnectStatus, FeatureType, MemType, TransferOp, TransferStatus
from datadist_sim.hixl._options import Refused, read_options
from datadist_sim.hixl._types import (
    GetTransferStatusArgs,
    MemDesc,
    NotifyDesc,
    TransferArgs,
    TransferOpDesc,
    TransferResult,
)

T = TypeVar("T")
_U64 = unsigned(64)
_I32 = signed(32)
_I32_TOP = 1 << 31
NOTIFY_MAX = 1024
"""Longest ``name`` and ``notify_msg`` of a notify, in bytes (``hixl_impl.cc:399-415``,
``ctrl_msg.h:18-19``)."""
DEFAULT_TIMEOUT_MS = 1000  # kDefaultTimeoutMs, hixl_py.cc:30
_CODES = {
    LLMStatusCode.LLM_SUCCESS: codes.SUCCESS,
    LLMStatusCode.LLM_PARAM_INVALID: codes.PARAM_INVALID,
    LLMStatusCode.LLM_TIMEOUT: codes.TIMEOUT,
    LLMStatusCode.LLM_NOT_YET_LINK: codes.NOT_CONNECTED,
    LLMStatusCode.LLM_ALREADY_LINK: codes.ALREADY_CONNECTED,
    LLMStatusCode.LLM_FEATURE_NOT_ENABLED: codes.UNSUPPORTED,
    LLMStatusCode.LLM_OUT_OF_MEMORY: codes.RESOURCE_EXHAUSTED,
}
"""The world's codes as hixl reports them (``llm_log.h:164-176`` and ``adxl_utils.cc:50-63`` pair them);
anything else is ``FAILED``."""
_NAMES = {value: name for name, value in vars(codes).items() if name.isupper() and isinstance(value, int)}
_NAMES[codes.SUCCESS] = "SUCCESS"


def _code(exc: SimError) -> int:
    """The hixl code of a world error: a fault's own (``hixl``), else the twin of its code."""
    own = getattr(exc, "hixl", None)
    if own is not None and not isinstance(own, LLMStatusCode):
        return int(own)
    return _CODES.get(exc.code, codes.FAILED)  # an LLMStatusCode a rule injected with any_code too


def _text(value: object) -> Optional[str]:
    """A ``std::string`` argument as the engine sees it: ``AscendString`` keeps what precedes a NUL."""
    if type(value) is str and value.isascii() and "\0" not in value:  # the common case, as is
        return value
    raw = text(value)
    return None if raw is None else raw.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")


def _options(value: object) -> Optional[Dict[str, str]]:
    raw = text_map(value)
    if raw is None:
        return None
    return {
        k.split(b"\0", 1)[0].decode("utf-8", "surrogateescape"): v.split(b"\0", 1)[0].decode(
            "utf-8", "surrogateescape"
        )
        for k, v in raw.items()
    }


def _m(name: str, returns: str, *params: Param) -> Method:
    return Method(name, params, returns, "Hixl")


_ENGINE = Param("remote_engine", "str", _text)
_TIMEOUT = Param("timeout_in_millis", "int", _I32, DEFAULT_TIMEOUT_MS, str(DEFAULT_TIMEOUT_MS))
_OP = Param("op", "hixl.hixl.TransferOp", instance_of(TransferOp))
_DESCS = Param("op_descs", "List[hixl.hixl.TransferOpDesc]", sequence_of(TransferOpDesc))
_WRITE = int(TransferOp.WRITE)
_DEFAULT_ARGS = TransferArgs()
_DEFAULT_STATUS_ARGS = GetTransferStatusArgs()
INITIALIZE = _m(
    "initialize",
    "int",
    Param("local_engine", "str", _text),
    Param("options", "Dict[str, str]", _options, {}, "{}"),
)
FINALIZE = _m("finalize", "None")
REGISTER_MEM = _m(
    "register_mem",
    "Tuple[int, int]",
    Param("arg0", "hixl.hixl.MemDesc", instance_of(MemDesc)),
    Param("arg1", "hixl.hixl.MemType", instance_of(MemType)),
)
DEREGISTER_MEM = _m("deregister_mem", "int", Param("arg0", "int", _U64))
CONNECT = _m("connect", "int", _ENGINE, _TIMEOUT)
DISCONNECT = _m("disconnect", "int", _ENGINE, _TIMEOUT)
CONNECT_ASYNC = _m("connect_async", "int", _ENGINE, _TIMEOUT)
DISCONNECT_ASYNC = _m("disconnect_async", "int", _ENGINE, _TIMEOUT)
GET_ASYNC_CONNECT_STATUS = _m(
    "get_async_connect_status", "Tuple[int, hixl.hixl.AsyncConnectStatus]", Param("arg0", "str", _text)
)
GET_ALL_ASYNC_CONNECT_STATUS = _m(
    "get_all_async_connect_status", "Tuple[int, Dict[str, hixl.hixl.AsyncConnectStatus]]"
)
TRANSFER_SYNC = _m("transfer_sync", "int", _ENGINE, _OP, _DESCS, _TIMEOUT)
TRANSFER_ASYNC = _m(
    "transfer_async",
    "Tuple[int, int]",
    _ENGINE,
    _OP,
    _DESCS,
    Param("args", "hixl.hixl.TransferArgs", instance_of(TransferArgs), _DEFAULT_ARGS, repr(_DEFAULT_ARGS)),
)
GET_TRANSFER_STATUS = _m(
    "get_transfer_status", "Tuple[int, hixl.hixl.TransferStatus]", Param("arg0", "int", _U64)
)
GET_ALL_TRANSFER_STATUS = _m(
    "get_all_transfer_status",
    "Tuple[int, List[hixl.hixl.TransferResult]]",
    Param(
        "args",
        "hixl.hixl.GetTransferStatusArgs",
        instance_of(GetTransferStatusArgs),
        _DEFAULT_STATUS_ARGS,
        repr(_DEFAULT_STATUS_ARGS),
    ),
)
SEND_NOTIFY = _m(
    "send_notify", "int", _ENGINE, Param("notify", "hixl.hixl.NotifyDesc", instance_of(NotifyDesc)), _TIMEOUT
)
GET_NOTIFIES = _m("get_notifies", "Tuple[int, List[hixl.hixl.NotifyDesc]]")
GET_CAPABILITY = Method(
    "get_capability", (Param("arg0", "hixl.hixl.FeatureType", instance_of(FeatureType)),), "Tuple[int, int]"
)


def _brief(value: Any) -> str:
    """An argument as the trace shows it: without memory addresses, so the same run gives the same
    trace byte for byte (buffers and the binding's objects live at other addresses each run)."""
    if isinstance(value, MemDesc):
        return f"MemDesc(len={value.len})"
    if isinstance(value, (list, tuple)) and value and all(isinstance(d, TransferOpDesc) for d in value):
        return f"[{len(value)} op_descs, {sum(d.len for d in value)} bytes]"
    if isinstance(value, NotifyDesc):
        return f"NotifyDesc({value.name!r})"
    if isinstance(value, (TransferArgs, GetTransferStatusArgs)):
        return type(value).__name__
    return repr(value)


def _shown(args: Tuple[Any, ...], kwargs: Optional[Dict[str, Any]]) -> str:
    parts = [_brief(a) for a in args] + [f"{k}={_brief(v)}" for k, v in (kwargs or {}).items()]
    return ", ".join(parts)


class Hixl:
    """``hixl.Hixl()``: an engine object, not initialised until ``initialize`` succeeds. It belongs to
    the world that is current when it is constructed, as an ``LLMDataDist`` does."""

    __slots__ = ("__weakref__", "_engine", "_world")

    def __init__(self, *args: object, **kwargs: object) -> None:
        bind("Hixl", (), args, kwargs)
        self._world: SimWorld = door.current_world()
        self._engine: Optional[HixlEngine] = None

    def __repr__(self) -> str:
        return f"<hixl.hixl.Hixl object at 0x{id(self):x}>"

    def __del__(self) -> None:
        # the destructor finalises an initialised engine (hixl_py.cc:34-39)
        engine, world = getattr(self, "_engine", None), getattr(self, "_world", None)
        if engine is not None and world is not None and door is not None:  # door: None at shutdown
            door.hixl_close(world, engine)

    # -- the common path ----------------------------------------------------------------------------

    def _run(
        self,
        op: str,
        args: Tuple[object, ...],
        kwargs: Dict[str, object],
        action: Callable[[SimWorld, HixlEngine], T],
        failed: T,
        timeout_ms: Optional[int] = None,
    ) -> Tuple[int, T]:
        """Check initialised (``FAILED``) and the timeout (``PARAM_INVALID``), run ``action`` in the
        world, trace the call; returns ``(code, value)``, ``failed`` as the value on any failure."""
        engine, world = self._engine, self._world
        world.touch()
        code, value = codes.SUCCESS, failed
        try:
            if engine is None:
                code = codes.FAILED
            elif timeout_ms is not None and timeout_ms <= 0:
                code = codes.PARAM_INVALID
            else:
                value = action(world, engine)
        except SimError as exc:
            code, value = _code(exc), failed
        world.record_call(
            None if engine is None else engine.name,
            "hixl." + op,
            _NAMES.get(code, str(code)),
            "" if engine is None else engine.name,
            _shown,
            args,
            kwargs or None,
        )
        return code, value

    # -- life ---------------------------------------------------------------------------------------

    def initialize(self, *args: object, **kwargs: object) -> int:
        """A repeated call on an initialised object is ``SUCCESS`` and changes nothing
        (``hixl_py.cc:43-46``)."""
        local, options = INITIALIZE.load(self, args, kwargs)
        world = self._world
        world.touch()
        code = codes.SUCCESS
        if self._engine is None:
            try:
                engine = door.hixl_open(world, local, read_options(options))
            except Refused as exc:
                code = exc.code
            except SimError as exc:
                code = _code(exc)
            else:
                self._engine = engine
        world.record_call(
            local if code == codes.SUCCESS else None,
            "hixl.initialize",
            _NAMES[code],
            local,
            _shown,
            args,
            kwargs or None,
        )
        return code

    def finalize(self, *args: object, **kwargs: object) -> None:
        """A no-op when not initialised (``hixl_py.cc:67-69``); afterwards the object can be initialised
        again."""
        FINALIZE.load(self, args, kwargs)
        engine, world = self._engine, self._world
        if engine is None:
            return
        self._engine = None
        world.touch()
        door.hixl_close(world, engine)
        world.record_call(engine.name, "hixl.finalize", "SUCCESS", engine.name, _shown, args, kwargs or None)

    # -- memory -------------------------------------------------------------------------------------

    def register_mem(self, *args: object, **kwargs: object) -> Tuple[int, int]:
        desc, mem_type = REGISTER_MEM.load(self, args, kwargs)
        addr, nbytes, device = desc.addr, desc.len, int(mem_type) == int(MemType.MEM_DEVICE)

        def act(world: SimWorld, engine: HixlEngine) -> int:
            if addr == 0:  # hixl_impl.cc:115
                raise SimError(LLMStatusCode.LLM_PARAM_INVALID, "mem_desc.addr is 0")
            return door.hixl_register(world, engine, addr, nbytes, device)

        return self._run("register_mem", args, kwargs, act, 0)

    def deregister_mem(self, *args: object, **kwargs: object) -> int:
        (handle,) = DEREGISTER_MEM.load(self, args, kwargs)

        def act(world: SimWorld, engine: HixlEngine) -> None:
            if handle == 0:  # hixl_impl.cc:123
                raise SimError(LLMStatusCode.LLM_PARAM_INVALID, "mem_handle is 0")
            door.hixl_deregister(world, engine, handle)

        return self._run("deregister_mem", args, kwargs, act, None)[0]

    # -- connections --------------------------------------------------------------------------------

    def connect(self, *args: object, **kwargs: object) -> int:
        remote, timeout = CONNECT.load(self, args, kwargs)
        act = lambda w, e: door.hixl_connect(w, e, remote, timeout / 1000)  # noqa: E731
        return self._run("connect", args, kwargs, act, None, timeout)[0]

    def disconnect(self, *args: object, **kwargs: object) -> int:
        remote, timeout = DISCONNECT.load(self, args, kwargs)
        act = lambda w, e: door.hixl_disconnect(w, e, remote, timeout / 1000)  # noqa: E731
        return self._run("disconnect", args, kwargs, act, None, timeout)[0]

    def connect_async(self, *args: object, **kwargs: object) -> int:
        remote, timeout = CONNECT_ASYNC.load(self, args, kwargs)
        act = lambda w, e: door.hixl_connect_async(w, e, remote, timeout / 1000, True)  # noqa: E731
        return self._run("connect_async", args, kwargs, act, None, timeout)[0]

    def disconnect_async(self, *args: object, **kwargs: object) -> int:
        remote, timeout = DISCONNECT_ASYNC.load(self, args, kwargs)
        act = lambda w, e: door.hixl_connect_async(w, e, remote, timeout / 1000, False)  # noqa: E731
        return self._run("disconnect_async", args, kwargs, act, None, timeout)[0]

    def get_async_connect_status(self, *args: object, **kwargs: object) -> Tuple[int, AsyncConnectStatus]:
        (remote,) = GET_ASYNC_CONNECT_STATUS.load(self, args, kwargs)
        act = lambda w, e: AsyncConnectStatus(int(door.hixl_connect_status(w, e, remote)))  # noqa: E731
        return self._run("get_async_connect_status", args, kwargs, act, AsyncConnectStatus.NOT_CONNECT)

    def get_all_async_connect_status(
        self, *args: object, **kwargs: object
    ) -> Tuple[int, Dict[str, AsyncConnectStatus]]:
        GET_ALL_ASYNC_CONNECT_STATUS.load(self, args, kwargs)

        def act(world: SimWorld, engine: HixlEngine) -> Dict[str, AsyncConnectStatus]:
            table = door.hixl_connect_statuses(world, engine)
            return {remote: AsyncConnectStatus(int(state)) for remote, state in sorted(table.items())}

        return self._run("get_all_async_connect_status", args, kwargs, act, {})

    # -- transfers ----------------------------------------------------------------------------------

    def transfer_sync(self, *args: object, **kwargs: object) -> int:
        # The common call, by position with arguments of the exact types pybind would take as they are,
        # on an initialised engine with a timeout in range and no zero address, goes straight to the
        # world: the same checks as ``TRANSFER_SYNC.load``, ``_run`` and ``_descs`` below, spelled as
        # plain comparisons (they are most of a small transfer's cost). Anything else takes the full path.
        engine = self._engine
        count = len(args)
        if engine is None or kwargs or not 3 <= count <= 4:
            return self._transfer_sync(args, kwargs)
        remote, op, descs = args[0], args[1], args[2]
        timeout = args[3] if count == 4 else DEFAULT_TIMEOUT_MS
        if (
            type(remote) is not str
            or type(op) is not TransferOp
            or type(descs) is not list
            or type(timeout) is not int
            or not 0 < timeout < _I32_TOP
            or not remote.isascii()
            or "\0" in remote
        ):
            return self._transfer_sync(args, kwargs)
        plain = []
        for desc in descs:
            if type(desc) is not TransferOpDesc or not desc._local_addr or not desc._remote_addr:
                return self._transfer_sync(args, kwargs)
            plain.append((desc._local_addr, desc._remote_addr, desc._len))
        world = self._world
        world.touch()
        code = codes.SUCCESS
        try:
            door.hixl_transfer(world, engine, remote, op._value == _WRITE, tuple(plain), timeout / 1000)
        except SimError as exc:
            code = _code(exc)
        world.record_call(engine.name, "hixl.transfer_sync", _NAMES[code], engine.name, _shown, args, None)
        return code

    def _transfer_sync(self, args: Tuple[object, ...], kwargs: Dict[str, object]) -> int:
        remote, op, descs, timeout = TRANSFER_SYNC.load(self, args, kwargs)
        write = int(op) == int(TransferOp.WRITE)

        def act(world: SimWorld, engine: HixlEngine) -> None:
            door.hixl_transfer(world, engine, remote, write, _descs(descs), timeout / 1000)

        return self._run("transfer_sync", args, kwargs, act, None, timeout)[0]

    def transfer_async(self, *args: object, **kwargs: object) -> Tuple[int, int]:
        remote, op, descs, targs = TRANSFER_ASYNC.load(self, args, kwargs)
        write, user_data = int(op) == int(TransferOp.WRITE), targs.user_data

        def act(world: SimWorld, engine: HixlEngine) -> int:
            return door.hixl_transfer_start(world, engine, remote, write, _descs(descs), user_data)

        return self._run("transfer_async", args, kwargs, act, 0)

    def get_transfer_status(self, *args: object, **kwargs: object) -> Tuple[int, TransferStatus]:
        (req,) = GET_TRANSFER_STATUS.load(self, args, kwargs)

        def act(world: SimWorld, engine: HixlEngine) -> TransferStatus:
            if req == 0:  # hixl_impl.cc:388
                raise SimError(LLMStatusCode.LLM_FAILED, "req is 0")
            return TransferStatus(int(door.hixl_transfer_poll(world, engine, req)))

        return self._run("get_transfer_status", args, kwargs, act, TransferStatus.FAILED)

    def get_all_transfer_status(self, *args: object, **kwargs: object) -> Tuple[int, List[TransferResult]]:
        (sargs,) = GET_ALL_TRANSFER_STATUS.load(self, args, kwargs)
        max_count, skip = sargs.max_query_count, sargs.skip_waiting

        def act(world: SimWorld, engine: HixlEngine) -> List[TransferResult]:
            if max_count == 0:  # hixl_engine.cc:263-309: nothing is queried
                return []
            found = door.hixl_transfer_poll_all(world, engine, max_count, skip)
            return [TransferResult._make(req, data, TransferStatus(int(state))) for req, data, state in found]

        empty: List[TransferResult] = []
        return self._run("get_all_transfer_status", args, kwargs, act, empty)

    # -- notifies -----------------------------------------------------------------------------------

    def send_notify(self, *args: object, **kwargs: object) -> int:
        remote, notify, timeout = SEND_NOTIFY.load(self, args, kwargs)
        name, msg = notify._name, notify._notify_msg

        def act(world: SimWorld, engine: HixlEngine) -> None:
            door.hixl_notify(world, engine, remote, name, msg, timeout / 1000)

        if self._engine is not None and (len(name) > NOTIFY_MAX or timeout <= 0 or len(msg) > NOTIFY_MAX):
            act = _refuse  # hixl_impl.cc:399-415: the name, the timeout, then the message
        return self._run("send_notify", args, kwargs, act, None)[0]

    def get_notifies(self, *args: object, **kwargs: object) -> Tuple[int, List[NotifyDesc]]:
        GET_NOTIFIES.load(self, args, kwargs)

        def act(world: SimWorld, engine: HixlEngine) -> List[NotifyDesc]:
            return [NotifyDesc(name, msg) for name, msg in door.hixl_drain_notifies(world, engine)]

        empty: List[NotifyDesc] = []
        return self._run("get_notifies", args, kwargs, act, empty)


def _refuse(world: SimWorld, engine: HixlEngine) -> None:
    raise SimError(LLMStatusCode.LLM_PARAM_INVALID, "notify name, timeout or message out of range")


def _descs(descs: List[TransferOpDesc]) -> List[Tuple[int, int, int]]:
    """The descriptors as the world takes them; a zero address is ``PARAM_INVALID``
    (``hixl_impl.cc:24-32``), before the engine."""
    plain = [(d._local_addr, d._remote_addr, d._len) for d in descs]
    for index, (local, remote, _) in enumerate(plain):
        if local == 0 or remote == 0:
            raise SimError(LLMStatusCode.LLM_PARAM_INVALID, f"op_descs[{index}] has a zero address")
    return plain


def get_capability(*args: object, **kwargs: object) -> Tuple[int, int]:
    """Static, no engine (``hixl_impl.cc:425-438``): a negative value is ``PARAM_INVALID``; the two
    features are supported; any other value is ``SUCCESS`` with ``FEATURE_NOT_SUPPORTED``."""
    (feature,) = GET_CAPABILITY.load(None, args, kwargs)
    value = int(feature)
    if value < 0:
        return codes.PARAM_INVALID, codes.FEATURE_NOT_SUPPORTED
    known = (int(FeatureType.AUTO_CONNECT), int(FeatureType.CLIENT_SERVER_COMM))
    return codes.SUCCESS, codes.FEATURE_SUPPORTED if value in known else codes.FEATURE_NOT_SUPPORTED
