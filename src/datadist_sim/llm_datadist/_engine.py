"""The face's bridge to the world.

``api_call`` wraps each public method: it traces the call (arguments in short, outcome) and tells the
engine which operation and cluster it is in. ``engine_call`` marks the engine boundary, after argument
validation: fault rules of the plain calls act there, and a ``SimError`` leaves as the real
``LLMException``. Transfers and link calls meet their faults inside the engine, per remote cluster.
"""

from __future__ import annotations

import functools
from types import TracebackType
from typing import (
    Any,
    Callable,
    Dict,
    FrozenSet,
    NoReturn,
    Optional,
    Protocol,
    Sequence,
    Tuple,
    Type,
    TypeVar,
)

from datadist_sim._status import LLMStatusCode
from datadist_sim._status_v1 import LLM_ERRORS
from datadist_sim._world.door import SERVING as _SCOPE
from datadist_sim._world.door import (
    ClusterNode,
    SimError,
    SimWorld,
    at_door,
    meet_door_faults,
)
from datadist_sim.llm_datadist import _finalizers
from datadist_sim.llm_datadist.status import handle_llm_status
from datadist_sim.llm_datadist.utils.utils import UINT64_MAX

F = TypeVar("F", bound=Callable[..., Any])


class CallScope:
    """The public call being served: its world, calling cluster and operation name, and whether it is
    done with the faults of the engine's door (from the start for transfers and link calls, which meet
    theirs inside the engine)."""

    __slots__ = ("door_checked", "node", "op", "world")

    def __init__(self, world: SimWorld, node: Optional[ClusterNode], op: str, door_checked: bool) -> None:
        self.world = world
        self.node = node
        self.op = op
        self.door_checked = door_checked


class FaceErrors(Protocol):
    """How a face other than ``llm_datadist``'s answers (the v1 package: its own exception classes and
    codes, its own task class). ``api_call`` asks it on the way out, after the trace has the call's
    outcome by the engine's name, so one wrapper serves both faces."""

    def raise_own(self, face: Any, exc: BaseException) -> None:
        """Raise the face's own exception for ``exc``; return to let ``exc`` go on as it is. (It raises,
        rather than returning one for the caller to raise, so that no frame keeps the new exception
        in a variable: that frame would be in its traceback, a cycle that holds the call's arguments,
        a ``KvCache`` among them, until the garbage collector runs.)"""

    def result(self, face: Any, result: Any) -> Any:
        """What the face returns for ``result`` (not None)."""


def api_call(method: F, errors: Optional[FaceErrors] = None) -> F:
    """Trace one public method of a face object that holds ``_world`` and ``_node``; the outermost
    call only, so a method built on another is one call in the trace. ``errors`` translates what the
    method raises and returns for a face with its own classes (``llm_datadist_v1._v1_errors``), on
    every call, outermost or not.

    The trace keeps the call's arguments as given and formats them (``short_args``) when someone reads
    it, not on the call's path. Only values whose short form cannot change after the call are
    kept so (``_KEPT``); any other is reduced to its short form now (``_freeze``), so a late read still
    shows the call."""
    op = method.__name__
    inside_engine = not at_door(op)
    # where a face object keeps the scope of its calls of a transfer or link method: that scope never
    # changes (it is done with the door's faults from the start), so one serves every call while the
    # object's world and node stay the same, instead of one made per call
    kept_scope = f"_{op}_scope"

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        world: Optional[SimWorld] = getattr(self, "_world", None)
        if world is None or _SCOPE.get() is not None:
            if errors is None:
                return method(self, *args, **kwargs)
            return _translated(errors, method, self, args, kwargs)
        world.touch()
        node = getattr(self, "_node", None)
        if inside_engine:
            scope = getattr(self, kept_scope, None)
            if scope is None or scope.node is not node or scope.world is not world:
                scope = CallScope(world, node, op, True)
                setattr(self, kept_scope, scope)
        else:
            scope = CallScope(world, node, op, False)
        # inside a garbage collection (a cache's finalizer), the call runs without its scope: setting
        # a context variable there can corrupt one the collection interrupted (``_finalizers``)
        token = None if _finalizers.collecting else _SCOPE.set(scope)
        outcome, detail = "LLM_SUCCESS", ""
        try:
            result = method(self, *args, **kwargs)
            if result is not None:
                outcome, detail = _result_outcome(result)
                if errors is not None:
                    result = errors.result(self, result)
            return result
        except LLM_ERRORS as exc:
            outcome = exc.status_code.name
            if errors is not None:
                errors.raise_own(self, exc)
            raise
        except Exception as exc:
            outcome = type(exc).__name__
            raise
        finally:
            if token is not None:
                _SCOPE.reset(token)
            node = getattr(self, "_node", None)  # init/finalize may have replaced it
            kept = _KEPT if len(_KEPT) > 5 else _kept_types()
            for value in args:
                if type(value) not in kept:
                    args = tuple([v if type(v) in kept else _freeze(v) for v in args])
                    break
            world.record_call(
                None if node is None else node.cluster_id,
                op,
                outcome,
                detail,
                short_args,
                args,
                {k: _freeze(v) for k, v in kwargs.items()} if kwargs else None,
            )

    return wrapper  # type: ignore[return-value]


def _translated(
    errors: FaceErrors, method: Callable[..., Any], face: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]
) -> Any:
    """A call inside another (or of a face object with no world), translated as ``api_call`` would."""
    try:
        result = method(face, *args, **kwargs)
    except LLM_ERRORS as exc:
        errors.raise_own(face, exc)
        raise
    return result if result is None else errors.result(face, result)


def _result_outcome(result: object) -> tuple[str, str]:
    if isinstance(result, tuple) and result and isinstance(result[0], LLMStatusCode):
        rets = result[1] if len(result) > 1 and isinstance(result[1], list) else []
        return result[0].name, ",".join(getattr(r, "name", str(r)) for r in rets)
    if isinstance(result, LLMStatusCode):
        return result.name, ""
    if isinstance(result, list) and result and all(r is None or isinstance(r, LLMStatusCode) for r in result):
        return "LLM_SUCCESS", ",".join("None" if r is None else r.name for r in result)  # get_results
    name = getattr(result, "name", None)
    return "LLM_SUCCESS", name if isinstance(name, str) else ""


class _Shown:
    """An argument already reduced to its short form (a mutable or unknown value)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


_KEPT_NAMES = ("CacheKey", "CacheKeyByIdAndIndex", "BlocksCacheKey", "Cache")
"""Face types whose short form cannot change after the call (read-only ids; ``Cache`` has no
``__del__``, so keeping one in the trace frees nothing later than it would be freed)."""
_KEPT: FrozenSet[type] = frozenset({int, str, float, bool, type(None)})


_KV_CACHE: Optional[type] = None
"""The v1 ``KvCache``, set with ``_KEPT``: the trace keeps its short form, made once per cache."""


def _kept_types() -> FrozenSet[type]:
    """``_KEPT`` with the face's own types, imported on first use (they import this module)."""
    global _KEPT, _KV_CACHE
    from datadist_sim.llm_datadist.v2 import _caches, _keys

    extra = {getattr(_keys, n, None) or getattr(_caches, n) for n in _KEPT_NAMES}
    _KEPT = _KEPT | {t for t in extra if isinstance(t, type)}
    _KV_CACHE = _caches.KvCache
    return _KEPT


class _Seq:
    """A list or tuple argument as ``short`` shows it: its first four items (kept, or reduced to their
    short form at the call) and its length."""

    __slots__ = ("items", "length")

    def __init__(self, value: Sequence[Any]) -> None:
        self.items = [v if type(v) in _KEPT else _Shown(short(v, 40, 1)) for v in value[:4]]
        self.length = len(value)


def _freeze(value: object) -> object:
    """``value`` as the trace keeps it. Total: it runs in the wrapper's ``finally``, so anything it
    raised would replace the call's own outcome (a ``list`` subclass whose ``__len__`` raises, say)."""
    try:
        if type(value) in _KEPT:
            return value
        if type(value) is _KV_CACHE:  # a KvCache frees itself on garbage collection: keep only its id
            form = getattr(value, "_trace_form", None)
            if form is None:  # its first call: the form is kept by the cache, its id cannot change
                form = value._trace_form = _Shown(f"KvCache({value.cache_id})")  # type: ignore[attr-defined]
            return form
        if type(value) in (list, tuple):  # a plain list has no short form of its own (``_compact``)
            return _Seq(value)  # type: ignore[arg-type]
        if isinstance(value, (list, tuple)) and _compact(value) is None:
            return _Seq(value)
        return _Shown(short(value))
    except Exception:
        return _Shown(_type_name(value))


def _compact(value: object) -> Optional[str]:
    """Short forms of the face's own objects (keys by their ids, caches by id, descs by shape)."""
    if type(value) is _Shown:
        return value.text
    name = type(value).__name__
    if name in ("CacheKey", "CacheKeyByIdAndIndex", "BlocksCacheKey"):
        parts = []
        for attr in ("cluster_id", "cache_id", "batch_index", "req_id", "prefix_id", "model_id"):
            item = getattr(value, attr, None)
            if isinstance(item, int) and item != UINT64_MAX and not (attr == "model_id" and item == 0):
                parts.append(f"{attr}={item}")
        return f"{name}({', '.join(parts)})"
    if name == "LLMClusterInfo":
        return f"LLMClusterInfo(remote={getattr(value, 'remote_cluster_id', '?')})"
    cache_id = getattr(value, "cache_id", None)
    if name in ("Cache", "KvCache") and isinstance(cache_id, int):
        return f"{name}({cache_id})"
    if name == "CacheDesc":
        return f"CacheDesc({getattr(value, 'num_tensors', '?')}x{list(getattr(value, 'shape', []))})"
    return None


def _cut(hidden: int) -> str:
    """Where a list or dict was shortened: ``…`` and how many items it hides (nothing when none)."""
    return f", …{hidden} more" if hidden > 0 else ""


SHORT_DEPTH = 3
"""How deep ``short`` looks into nested lists, tuples and dicts (``…`` below that)."""
_BIG_INT_BITS = 128
"""An int wider than this is shown by its width: ``str()`` of one past Python's digit limit raises."""


def short(value: object, limit: int = 48, depth: int = 0) -> str:
    """A deterministic short form of an argument (no memory addresses, bounded length and depth).

    Total: whatever the argument (a container holding itself, nesting deeper than the interpreter's
    recursion limit, a ``__repr__`` or property that raises, an int past the digit limit), the trace
    shows something and the call's own error is the one the caller gets."""
    try:
        return _short(value, limit, depth)
    except Exception:  # a hostile __repr__ / __len__ / property: the type's name is all we can say
        return _type_name(value)


def _type_name(value: object) -> str:
    return f"<{type(value).__name__}>"


def _short(value: object, limit: int, depth: int) -> str:
    if type(value) is int or type(value) is bool:
        if value.bit_length() > _BIG_INT_BITS:
            return f"<int of {value.bit_length()} bits>"
        return repr(value)
    compact = _compact(value)
    if compact is not None:
        return compact
    nested = isinstance(value, (list, tuple, dict)) or type(value) is _Seq
    if nested and depth >= SHORT_DEPTH:
        return "[…]" if not isinstance(value, dict) else "{…}"
    if isinstance(value, (list, tuple)):
        inner = ", ".join(short(v, 40, depth + 1) for v in value[:4])
        return f"[{inner}{_cut(len(value) - 4)}]"
    if type(value) is _Seq:
        inner = ", ".join(short(v, 40, depth + 1) for v in value.items)
        return f"[{inner}{_cut(value.length - 4)}]"
    if isinstance(value, dict):
        items = ", ".join(
            f"{short(k, 24, depth + 1)}: {short(v, 24, depth + 1)}" for k, v in list(value.items())[:3]
        )
        return "{" + items + _cut(len(value) - 3) + "}"
    if isinstance(value, int):  # an int subclass (an enum member shows its own repr)
        text = repr(value) if value.bit_length() <= _BIG_INT_BITS else f"<int of {value.bit_length()} bits>"
    else:
        text = repr(value)
    if " at 0x" in text or " object at " in text:
        text = type(value).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"


def short_args(args: tuple[Any, ...], kwargs: Optional[dict[str, Any]]) -> str:
    parts = [short(a) for a in args] + [f"{k}={short(v)}" for k, v in (kwargs or {}).items()]
    return ", ".join(parts)


def _door_faults(scope: CallScope) -> None:
    """Fault rules of a plain call (``_world/fault_effects.py``), once per public call."""
    if not scope.door_checked:
        scope.door_checked = True
        meet_door_faults(scope.world, scope.node, scope.op)


class _EngineCall:
    """The context of ``engine_call`` (a plain class: a generator-based context manager costs a few
    µs on every pull)."""

    __slots__ = ("func_name", "other_info")

    def __init__(self, func_name: str, other_info: object) -> None:
        self.func_name = func_name
        self.other_info = other_info

    def __enter__(self) -> None:
        scope = _SCOPE.get()
        if type(scope) is CallScope and not scope.door_checked:
            try:
                _door_faults(scope)
            except SimError as exc:
                self._raise(exc)

    def __exit__(
        self, kind: Optional[Type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        if isinstance(exc, SimError):
            self._raise(exc)

    def _raise(self, exc: SimError) -> None:
        info = self.other_info  # ("format", arg, ...): formatted only on failure
        engine_failed(exc, self.func_name, *(info if isinstance(info, tuple) else ("{}", info)))


def engine_failed(exc: SimError, func_name: str, info: str, *args: object) -> NoReturn:
    """A ``SimError`` as the real ``LLMException``: ``func_name failed, error code is ..., info``, with
    ``info.format(*args)`` made only now. A transfer's face calls it from ``except SimError``: transfers
    meet their faults inside the engine, so they need no ``engine_call`` at the door."""
    handle_llm_status(exc.code, func_name, f"{info.format(*args)} ({exc.message})")
    raise AssertionError("unreachable: a SimError never carries LLM_SUCCESS")


engine_call = _EngineCall
"""``with engine_call(func_name, other_info):`` one engine call: fault rules of the call act, then a
``SimError`` leaves as ``LLMException``. ``other_info`` may be a tuple ``(format, arg, ...)``, formatted
only if the call fails."""
