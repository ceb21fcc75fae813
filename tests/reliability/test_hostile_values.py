"""Hostile values for every checked argument of every public method, and hostile engine options.

A hostile value is one whose *formatting* fails: a list that holds itself, nesting deeper than the
interpreter's recursion limit, an object whose ``__repr__``/``__str__`` raises, an int past Python's
int-to-str digit limit. The real package checks arguments by type (``isinstance``, ``check_isinstance``,
hixl ``src/python/llm_datadist/llm_datadist/utils/utils.py:43-58``) and never formats a rejected value,
so each must fail exactly as its tame twin of the same type does (``[[]]``, ``object()``, ``2**64``):
same exception type, same status code, the world unchanged. And the trace, which records every call
with its arguments, must never be the thing that raises: it is read back (``to_jsonl``) after each call.
"""

from __future__ import annotations

import io
from typing import Any, Callable, Dict, List, Optional, Tuple

import pytest
from tests.reliability._bad_env import Env, make_env
from tests.reliability._bad_methods import ALL_METHODS, Method
from tests.reliability._common import STATS

from datadist_sim._world.current import activate
from datadist_sim._world.world import SimWorld
from datadist_sim.llm_datadist._engine import short
from datadist_sim.llm_datadist.configs import LLMRole
from datadist_sim.llm_datadist.status import LLMException, LLMStatusCode
from datadist_sim.llm_datadist.v2.cache_manager import CacheManager
from datadist_sim.llm_datadist.v2.llm_datadist import LLMDataDist, finalize_all


class BadRepr:
    """An object no one can format."""

    def __repr__(self) -> str:
        raise RuntimeError("this __repr__ raises")

    __str__ = __repr__


class BadList(list):  # type: ignore[type-arg]
    """A list whose length and items cannot be read (the real package itself calls ``len`` on the lists
    it is given, so only the trace's formatting is held to it)."""

    def __len__(self) -> int:
        raise RuntimeError("this __len__ raises")

    def __getitem__(self, index: Any) -> Any:
        raise RuntimeError("this __getitem__ raises")


def _recursive_list() -> List[Any]:
    loop: List[Any] = []
    loop.append(loop)
    return loop


def _recursive_dict() -> Dict[str, Any]:
    loop: Dict[str, Any] = {}
    loop["self"] = loop
    return loop


def _deep(depth: int = 100_000) -> List[Any]:
    value: List[Any] = []
    for _ in range(depth):
        value = [value]
    return value


HUGE = 10**5000
"""Past ``sys.get_int_max_str_digits()`` (4300 by default): ``str()`` of it raises ``ValueError``."""

HOSTILE: List[Tuple[str, Callable[[], Any], Callable[[], Any]]] = [
    ("a list that holds itself", _recursive_list, lambda: [[]]),
    ("a dict that holds itself", _recursive_dict, lambda: {"self": {}}),
    ("a list nested 100,000 deep", _deep, lambda: [[]]),
    ("an object whose repr raises", BadRepr, object),
    ("a list holding such an object", lambda: [BadRepr()], lambda: [object()]),
    ("an int past the digit limit", lambda: HUGE, lambda: 2**64),
    ("a negative int past the digit limit", lambda: -HUGE, lambda: -(2**64)),
    ("a list holding such an int", lambda: [HUGE], lambda: [2**64]),
]


def _call(e: Env, method: Method, kwargs: Dict[str, Any]) -> Optional[BaseException]:
    try:
        getattr(method.target(e), method.name)(**kwargs)
    except Exception as exc:  # the type is what is being checked
        return exc
    return None


def _call_and_see(e: Env, method: Method, kwargs: Dict[str, Any]) -> Tuple[Optional[BaseException], bool]:
    """The call's error, and whether it changed the world (a twin that succeeds may: so may its
    hostile value, then, and no more)."""
    before = e.state()
    exc = _call(e, method, kwargs)
    return exc, e.state() != before


def _outcome(exc: Optional[BaseException]) -> Tuple[str, Any]:
    return type(exc).__name__, getattr(exc, "status_code", None)


def _trace_reads(world: SimWorld) -> None:
    world.trace.to_jsonl(io.StringIO())


@pytest.mark.parametrize("method", ALL_METHODS, ids=lambda m: f"{'v1' if m.v1 else 'v2'}-{m.name}")
def test_hostile_values_fail_as_their_tame_twins(method: Method) -> None:
    env = make_env(method.v1)
    problems: List[str] = []
    with activate(env.world):
        for arg in method.kinds:
            for label, hostile, twin in HOSTILE:
                where = f"{method.name}({arg}={label})"
                got, changed = _call_and_see(env, method, {**method.good(env), arg: hostile()})
                want, twin_changed = _call_and_see(env, method, {**method.good(env), arg: twin()})
                STATS["hostile inputs tried"] += 1
                if _outcome(got) != _outcome(want):
                    shown = f"{type(got).__name__}: {got!s:.120}"
                    problems.append(f"{where}: {shown} (its twin: {_outcome(want)})")
                if changed and not twin_changed:
                    problems.append(f"{where}: the world changed (its twin changed nothing)")
                try:
                    _trace_reads(env.world)
                except Exception as exc:  # the trace must format whatever it recorded
                    problems.append(f"{where}: reading the trace raised {type(exc).__name__}: {exc!s:.120}")
    finalize_all(env.world)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    ("label", "make"), [(label, hostile) for label, hostile, _ in HOSTILE] + [("an unreadable list", BadList)]
)
def test_short_is_total_and_bounded(label: str, make: Callable[[], Any]) -> None:
    """The trace's argument formatting returns a bounded string for anything, at any depth."""
    text = short(make())
    assert isinstance(text, str)
    assert len(text) < 400, text


# -- engine options --------------------------------------------------------------------------------

_V2 = {"ge.exec.deviceId": "0", "llm.EnableCacheManager": "1"}


def _init(world: SimWorld, options: Dict[str, Any], role: LLMRole = LLMRole.DECODER) -> LLMDataDist:
    with activate(world):
        dd = LLMDataDist(role, 7)
        dd.init(options)
    return dd


def test_an_option_value_whose_repr_raises_is_the_bindings_type_error() -> None:
    """pybind converts the options to ``std::map<std::string, std::string>`` (hixl
    ``llm_datadist_v2_wrapper.cc:22``): any value not a ``str`` is its ``TypeError``, however it prints."""
    world = SimWorld()
    for options in ({**_V2, "llm.Other": BadRepr()}, {"ge.exec.deviceId": "0", "llm.Other": _deep()}):
        with pytest.raises(TypeError, match=r"Dict\[str, str\]"):
            _init(world, options)
    _trace_reads(world)
    assert not world.nodes


def test_listen_port_without_listen_ip_is_param_invalid() -> None:
    """``LLMLinkManager::Initialize`` listens iff ``llm.ListenPort`` is set, and then requires
    ``llm.ListenIp`` (hixl ``src/llm_datadist/link_mgr/llm_link_manager.cc:28-31``)."""
    world = SimWorld()
    with pytest.raises(LLMException) as info:
        _init(world, {**_V2, "llm.ListenPort": "26001"})
    assert info.value.status_code is LLMStatusCode.LLM_PARAM_INVALID
    assert "llm.ListenIp" in str(info.value)
    assert not world.nodes
    assert not world.listeners


def test_listen_ip_without_listen_port_inits_a_client_that_does_not_listen() -> None:
    """An ``llm.ListenIp`` alone is the engine's own address (``LinkMsgHandler::Initialize``,
    ``link_msg_handler.cc:108-111``); with no ``llm.ListenPort`` no daemon starts
    (``llm_link_manager.cc:28``)."""
    world = SimWorld()
    dd = _init(world, {**_V2, "llm.ListenIp": "192.168.9.9"})
    assert world.node(7) is not None
    assert not world.listeners
    with activate(world):
        dd.finalize()


# -- where the real package itself fails unnamed (kept: the fake does what the real code does) -------


def test_check_cache_key_of_a_non_key_is_the_real_attribute_error() -> None:
    """The real ``CacheManager.check_cache_key`` reads ``cache_key.req_id`` with no type check first
    (hixl ``src/python/llm_datadist/llm_datadist/v2/cache_manager.py:55-62``); its callers type-check the
    key before they call it (``cache_manager.py:249, 300``)."""
    with pytest.raises(AttributeError, match="req_id"):
        CacheManager.check_cache_key(5)  # type: ignore[arg-type]


def test_listen_ip_info_none_is_the_real_attribute_error() -> None:
    """``parse_listen_ip_info`` type-checks with ``allow_none`` left at its default, so ``None`` passes
    and ``.split`` fails (hixl ``v2/llm_utils.py:352-354``, ``utils/utils.py:43-45``)."""
    world = SimWorld()
    with pytest.raises(AttributeError, match="split"):
        _init(world, {**_V2, "llm.listenIpInfo": None})
    _trace_reads(world)
    assert not world.nodes


def test_v1_device_id_not_a_str_is_the_real_attribute_error() -> None:
    """KvCacheManager mode splits ``ge.exec.deviceId`` before any type check
    (``EngineConfig.gen_cluster_info_if_not_exist``, hixl ``v2/config.py:147``)."""
    world = SimWorld()
    with pytest.raises(AttributeError, match="split"):
        _init(world, {"ge.exec.deviceId": 0}, LLMRole.PROMPT)
    assert not world.nodes
