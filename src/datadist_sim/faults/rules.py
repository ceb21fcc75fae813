"""Fault rules: what a rule watches and what it does, its constructors, and the operation being served.

A rule has a *trigger* (which calls it watches, and which of those it fires on) and an *action*.
Call actions (``fail``, ``delay``, ``timeout``, ``cut_link``, ``poison``) act on the call that fired
them. World actions (``partition``, ``hang``, ``kill``, ``cap_pool``, ``exhaust_pool``) change the world
when they fire: at a matching call when ``op`` is given, else as soon as simulated time reaches
``start_s``; ``heal_after_s`` later (or at ``end_s``) they are undone, except ``kill``.

A rule is only data: the plan (``plan``) decides when it fires, ``effects`` what it does to a call.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, replace
from enum import Enum
from typing import Optional, Protocol, Sequence, Tuple, Union

from datadist_sim._status import LLMStatusCode
from datadist_sim._status_hixl import Code, HixlCode, from_label, label
from datadist_sim.faults import engine_codes
from datadist_sim.faults.actions import ACTIONS as ACTIONS
from datadist_sim.faults.actions import CALL_ACTIONS as CALL_ACTIONS
from datadist_sim.faults.actions import CODED_ACTIONS as CODED_ACTIONS
from datadist_sim.faults.actions import LINK_OPS as LINK_OPS
from datadist_sim.faults.actions import TIMED_ACTIONS as TIMED_ACTIONS
from datadist_sim.faults.actions import TRANSFER_OPS as TRANSFER_OPS
from datadist_sim.faults.actions import WORLD_ACTIONS as WORLD_ACTIONS
from datadist_sim.faults.actions import applies_to
from datadist_sim.faults.checks import check_rule, closest
from datadist_sim.faults.engine_codes import EngineMode

Ops = Union[str, Sequence[str], None]


class Serving(Protocol):
    """The public call being served, as rules see it: its operation's name (``pull_cache`` ...)."""

    op: str


SERVING: ContextVar[Optional[Serving]] = ContextVar("datadist_sim_call", default=None)
"""The call the face is serving in this thread or task; the face sets its own scope object here (one
context variable per call, for the trace, the door and the rules alike)."""


def current_op(default: str) -> str:
    """The public operation being served, or ``default`` outside one."""
    serving = SERVING.get()
    return default if serving is None else serving.op


@dataclass(eq=False)
class Fault:
    """One rule of a fault plan. Build it with the constructors (``Fault.fail(...)`` and so on).

    Matching: ``op`` (API method name, or several), ``cluster`` (the calling cluster; for world
    actions the cluster they hit), ``remote`` (the peer of a transfer or link), ``req_id`` (of the key a
    transfer names), ``start_s``/``end_s`` (a window of simulated time). Of the matching calls, it fires
    on the ``nth`` only, the ``first`` N, those ``after`` the Nth, or as ``sequence`` says call by call
    (True fires); then with ``probability``.
    """

    action: str
    code: Optional[Code] = None
    seconds: float = 0.0
    landed: Optional[bool] = False
    nbytes: Optional[int] = None
    side: str = "remote"
    """For ``poison``: whose memory the matched transfer finds poisoned, the peer's or the caller's."""
    op: Optional[Tuple[str, ...]] = None
    cluster: Optional[Union[int, str]] = None
    """A cluster id, or the name (``local_engine``) of a ``hixl`` engine."""
    remote: Optional[Union[int, str]] = None
    req_id: Optional[int] = None
    nth: Optional[int] = None
    first: Optional[int] = None
    after: Optional[int] = None
    sequence: Tuple[bool, ...] = ()
    probability: float = 1.0
    start_s: Optional[float] = None
    end_s: Optional[float] = None
    heal_after_s: Optional[float] = None
    name: str = ""
    any_code: bool = False
    """Inject the code even where the real engine could not give it (outside the engine's behaviour):
    without it, a ``fail``, ``timeout`` or ``poison`` rule whose code the operation cannot give is a
    ``ValueError``, or, when only the caller's mode rules it out, never fires on that caller."""

    def __post_init__(self) -> None:
        self.op = _ops(self.op)
        check_rule(self, ACTIONS)  # a typo'd op, nth=0, a negative window: ValueError naming the field
        if self.action == "fail" and self.code is None:
            raise ValueError("a fail rule needs a status code")
        if self.action in WORLD_ACTIONS and self.cluster is None:
            raise ValueError(f"a {self.action} rule needs a cluster")
        if self.action == "partition" and self.remote is None:
            raise ValueError("a partition rule needs two clusters (cluster and remote)")
        if self.action == "cap_pool" and (self.nbytes is None or self.nbytes < 0):
            raise ValueError(f"a cap_pool rule needs nbytes >= 0, got {self.nbytes!r}")
        self.sequence = tuple(bool(x) for x in self.sequence)
        if not self.name:
            self.name = self.action
        if not isinstance(self.any_code, bool):
            raise ValueError(f"any_code must be True or False, got {self.any_code!r}")
        for op in self.op or ():
            if all(refusal(self, op, mode) for mode in engine_codes.modes()):
                raise ValueError(
                    f"{op} cannot {_outcome(self)} in any mode; it gives {engine_codes.describe(op)} "
                    f"({engine_codes.OUTSIDE})"
                )

    # -- constructors ---------------------------------------------------------------------------

    @classmethod
    def fail(cls, code: Union[Code, int, str], *, op: Ops = None, **when: object) -> Fault:
        """The call fails with ``code``; nothing else changes (a link call reports it per cluster).

        ``code`` must be one the operation can give in some mode (``engine_codes``), else ValueError
        naming the codes it can give; a caller whose mode cannot give it is not hit (the plan says so).
        A ``hixl`` engine operation takes a hixl code: ``hixl.TIMEOUT`` (its integer), or ``"hixl.TIMEOUT"``.
        ``any_code=True`` injects it anyway, outside the engine's behaviour."""
        return cls("fail", code=to_code(code), op=_ops(op), **when)  # type: ignore[arg-type]

    @classmethod
    def delay(cls, seconds: float, *, op: Ops = None, **when: object) -> Fault:
        """The call takes ``seconds`` longer; a transfer or link pushed past its timeout times out."""
        return cls("delay", seconds=seconds, op=_ops(op), **when)  # type: ignore[arg-type]

    @classmethod
    def timeout(cls, *, landed: Optional[bool] = False, op: Ops = None, **when: object) -> Fault:
        """The call times out. ``landed``: False (the default) the bytes did not arrive; True they did,
        and a pull consumed the Prompt's key as a successful one does (a retry gets
        ``LLM_KV_CACHE_NOT_EXIST``); None a seeded coin decides. A client cannot tell which from the code.
        The call gives its mode's timeout code (``engine_codes.timeout_code``); an operation that cannot
        time out in any mode is a ValueError, and one that cannot in the caller's mode is not hit
        (``any_code=True`` times it out anyway, with the mode's transfer timeout code)."""
        return cls("timeout", landed=landed, op=_ops(op), **when)  # type: ignore[arg-type]

    @classmethod
    def cut_link(cls, *, op: Ops = None, **when: object) -> Fault:
        """Cut the link: mid-transfer when ``op`` names a transfer (the destination keeps its old bytes,
        the call times out), else at ``start_s``; later calls fail until the link is made again."""
        return cls("cut_link", op=_ops(op), **when)  # type: ignore[arg-type]

    @classmethod
    def poison(cls, *, side: str = "remote", op: Ops = None, **when: object) -> Fault:
        """A UCE in the memory the matched transfer touches, on the peer's ``side`` ("remote": the caller
        sees ``LLM_SUSPECT_REMOTE_ERROR``) or its own ("local": ``LLM_DEVICE_MEM_ERROR``); healed after
        ``heal_after_s``."""
        return cls("poison", side=side, op=_ops(op), **when)  # type: ignore[arg-type]

    @classmethod
    def partition(cls, a: Union[int, str], b: Union[int, str], **when: object) -> Fault:
        """No traffic between ``a`` and ``b`` (cluster ids, or ``hixl`` engine names): link set-up
        fails, transfers time out."""
        return cls("partition", cluster=a, remote=b, **when)  # type: ignore[arg-type]

    @classmethod
    def hang(cls, cluster: Union[int, str], **when: object) -> Fault:
        """``cluster`` stops answering its peers: their calls to it time out."""
        return cls("hang", cluster=cluster, **when)  # type: ignore[arg-type]

    @classmethod
    def kill(cls, cluster: Union[int, str], **when: object) -> Fault:
        """The process of ``cluster`` dies: its memory is gone, its peers see link failures."""
        return cls("kill", cluster=cluster, **when)  # type: ignore[arg-type]

    @classmethod
    def cap_pool(cls, cluster: Union[int, str], nbytes: int, **when: object) -> Fault:
        """The device pool of ``cluster`` gives out at most ``nbytes`` in use (a ``hixl`` engine: its
        connect pool takes no task, whatever ``nbytes``)."""
        return cls("cap_pool", cluster=cluster, nbytes=nbytes, **when)  # type: ignore[arg-type]

    @classmethod
    def exhaust_pool(cls, cluster: Union[int, str], **when: object) -> Fault:
        """The device pool of ``cluster`` gives out nothing more than it has already given (a ``hixl``
        engine: its connect pool's queue is full, ``connect_async`` is ``RESOURCE_EXHAUSTED``)."""
        return cls("exhaust_pool", cluster=cluster, **when)  # type: ignore[arg-type]

    def copy(self, **changes: object) -> Fault:
        """This rule with some fields changed (e.g. a scenario's probability scaled)."""
        return replace(self, **changes)  # type: ignore[arg-type]

    def __repr__(self) -> str:
        shown = []
        for name, spec in self.__dataclass_fields__.items():
            value = getattr(self, name)
            default = () if name == "sequence" else spec.default
            if name == "action" or value == default or (name == "name" and value == self.action):
                continue
            text = label(value) if isinstance(value, (LLMStatusCode, HixlCode)) else repr(value)
            shown.append(f"{name}={text}")
        return f"Fault.{self.action}({', '.join(shown)})"


def _outcome(rule: Fault) -> str:
    """What ``rule`` makes a call do, as a verb phrase: ``give LLM_TIMEOUT``, ``time out``."""
    if rule.action == "timeout":
        return "time out"
    return f"give {label(_code_of(rule))}"


def _code_of(rule: Fault, mode: Optional[EngineMode] = None) -> Code:
    if rule.action == "poison":
        if mode is EngineMode.HIXL_ENGINE:
            # A UCE under a hixl transfer fails its HCCL op or kernel: the runtime's error, FAILED
            # (adxl_utils.cc:24-48; hixl_cs_client.cc:1106-1113 latches it as FAILED).
            return HixlCode.FAILED
        remote = rule.side == "remote"
        return LLMStatusCode.LLM_SUSPECT_REMOTE_ERROR if remote else LLMStatusCode.LLM_DEVICE_MEM_ERROR
    assert rule.code is not None
    return rule.code


def refusal(rule: Fault, op: str, mode: EngineMode, force: bool = False) -> Optional[str]:
    """Why the real engine could not give ``op`` the outcome ``rule`` injects when the caller runs in
    ``mode`` (a sentence naming the codes it can give), or None when it could (or the rule gives no
    code of its own, or says ``any_code``). With ``force`` the call is the operation's ``force=True``
    form, which may give fewer codes (``engine_codes.FORCE_OPS``); the sentence then says so."""
    if rule.any_code or rule.action not in CODED_ACTIONS:
        return None
    if not applies_to(rule.action, op):
        return None  # e.g. a poison rule on a plain call: it never fires there
    if rule.action == "timeout":
        if engine_codes.timeout_code(op, mode, force) is not None:
            return None
    elif _code_of(rule, mode) in engine_codes.codes_for(op, mode, force):
        return None
    call = f"{op} with force=True" if force and op in engine_codes.FORCE_OPS else op
    gives = engine_codes.describe(op, [mode], force)
    return f"{call} cannot {_outcome(rule)} in {mode.value} mode; it gives {gives}"


def _ops(op: Ops) -> Optional[Tuple[str, ...]]:
    if op is None:
        return None
    return (op,) if isinstance(op, str) else tuple(op)


def to_code(code: Union[Code, int, str]) -> Code:
    """A status code from a member (of either package: a ``llm_datadist_v1`` code is read by its name), its
    integer value or its name (with or without ``LLM_``); a ``hixl`` code from its ``HixlCode`` member,
    its integer (``hixl.TIMEOUT`` is a plain int, and no ``LLMStatusCode`` shares it) or ``"hixl.NAME"``."""
    if isinstance(code, (LLMStatusCode, HixlCode)):
        return code
    if isinstance(code, Enum):
        code = code.name
    if isinstance(code, str):
        hixl_code = from_label(code)
        if hixl_code is not None:
            return hixl_code
        name = code if code.startswith("LLM_") else f"LLM_{code}"
        try:
            return LLMStatusCode[name.upper()]
        except KeyError:
            hint = closest(name.upper(), LLMStatusCode.__members__)
            raise ValueError(f"unknown status code {code!r}{hint}") from None
    if code in HixlCode._value2member_map_ and code not in LLMStatusCode._value2member_map_:
        return HixlCode(code)
    return LLMStatusCode(code)
