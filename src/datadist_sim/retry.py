"""Retry policies for llm_datadist calls, on the simulated clock: small stop / wait / retry parts.

A policy is three parts, tenacity-style, each a function of a ``RetryState``: *stop* (give up now?),
*wait* (how long before the next attempt) and *retry* (is this outcome worth another attempt?), plus an
optional *relink* part (re-establish the link before the next attempt, the documented remedy for a
transfer that timed out) and an optional shared ``RetryBudget``. Parts combine with ``|`` and ``&``
(stop, retry) and ``+`` (wait). Time is read from, and slept on, one clock, so ``stop_after_delay`` and
every wait are simulated seconds, never wall time.

``policy.call(fn, clock=...)`` runs attempts until done; ``policy.start(now)`` gives a ``Session`` whose
``decide(code, now)`` says what to do after each attempt (for event-driven runs of many clients).
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Deque, FrozenSet, Iterable, List, Optional, TypeVar, Union

from datadist_sim._status import LLMStatusCode
from datadist_sim._status_table import STATUS_TABLE, retryable_codes
from datadist_sim._status_v1 import LLMStatusCode as V1Code
from datadist_sim._status_v1 import as_code, code_of
from datadist_sim._world.surface import Clock

T = TypeVar("T")
CodeLike = Union[LLMStatusCode, V1Code, int, str]


@dataclass
class RetryState:
    """What the parts see: the attempt just made, its outcome and the simulated times."""

    attempt: int
    """Attempts made so far (1 after the first)."""
    code: Optional[LLMStatusCode]
    """The last attempt's status code; ``None`` if it raised something that is not an LLMException."""
    started: float
    now: float
    op: str = ""
    error: Optional[BaseException] = None

    @property
    def elapsed(self) -> float:
        return self.now - self.started


# -- the three kinds of part ----------------------------------------------------------------------


class _Part:
    label: str

    def __repr__(self) -> str:
        return self.label


class Stop(_Part):
    """Give up after this attempt? ``a | b`` stops when either does, ``a & b`` when both do."""

    def __init__(self, test: Callable[[RetryState], bool], label: str) -> None:
        self._test, self.label = test, label

    def __call__(self, state: RetryState) -> bool:
        return self._test(state)

    def __or__(self, other: Stop) -> Stop:
        return Stop(lambda s: self(s) or other(s), f"{self.label} | {other.label}")

    def __and__(self, other: Stop) -> Stop:
        return Stop(lambda s: self(s) and other(s), f"{self.label} & {other.label}")


class Wait(_Part):
    """Simulated seconds before the next attempt; ``a + b`` adds them."""

    def __init__(self, seconds: Callable[[RetryState], float], label: str) -> None:
        self._seconds, self.label = seconds, label

    def __call__(self, state: RetryState) -> float:
        return max(0.0, self._seconds(state))

    def __add__(self, other: Wait) -> Wait:
        return Wait(lambda s: self(s) + other(s), f"{self.label} + {other.label}")


class RetryIf(_Part):
    """Is this outcome worth another attempt (or, for ``relink``, a re-link first)?"""

    def __init__(self, test: Callable[[RetryState], bool], label: str) -> None:
        self._test, self.label = test, label

    def __call__(self, state: RetryState) -> bool:
        return self._test(state)

    def __or__(self, other: RetryIf) -> RetryIf:
        return RetryIf(lambda s: self(s) or other(s), f"({self.label} | {other.label})")

    def __and__(self, other: RetryIf) -> RetryIf:
        return RetryIf(lambda s: self(s) and other(s), f"({self.label} & {other.label})")


def stop_after_attempt(attempts: int) -> Stop:
    return Stop(lambda s: s.attempt >= attempts, f"stop_after_attempt({attempts})")


def stop_after_delay(seconds: float) -> Stop:
    """Stop once ``seconds`` of simulated time have passed since the first attempt began."""
    return Stop(lambda s: s.elapsed >= seconds, f"stop_after_delay({seconds})")


stop_never = Stop(lambda s: False, "stop_never")


def wait_none() -> Wait:
    return Wait(lambda s: 0.0, "wait_none()")


def wait_fixed(seconds: float) -> Wait:
    return Wait(lambda s: seconds, f"wait_fixed({seconds})")


def wait_exponential(base: float, cap: float = float("inf")) -> Wait:
    """``base * 2**(attempt-1)``, at most ``cap``."""
    return Wait(lambda s: min(cap, base * 2 ** (s.attempt - 1)), f"wait_exponential({base}, {cap})")


def wait_full_jitter(base: float, cap: float, rng: random.Random) -> Wait:
    """AWS "full jitter": uniform in ``[0, min(cap, base * 2**(attempt-1))]`` from a seeded ``rng``."""
    return Wait(
        lambda s: rng.uniform(0.0, min(cap, base * 2 ** (s.attempt - 1))), f"wait_full_jitter({base}, {cap})"
    )


def _codes(codes: Iterable[CodeLike]) -> FrozenSet[LLMStatusCode]:
    """Codes of either package (or their integers or names) as ``llm_datadist`` members."""
    return frozenset(as_code(c) for c in codes)


def retry_if_code(codes: Iterable[CodeLike]) -> RetryIf:
    wanted = _codes(codes)
    names = ",".join(sorted(c.name for c in wanted))
    return RetryIf(lambda s: s.code in wanted, f"retry_if_code({names})")


def retry_if_retryable() -> RetryIf:
    """The codes the status table marks retryable (``datadist_sim.status_info(code).is_retryable``)."""
    wanted = retryable_codes()
    return RetryIf(lambda s: s.code in wanted, "retry_if_retryable()")


retry_always = RetryIf(lambda s: s.code not in (None, LLMStatusCode.LLM_SUCCESS), "retry_always")
retry_never = RetryIf(lambda s: False, "retry_never")

TRANSFER_OPS = frozenset({"pull_cache", "pull_blocks", "transfer_cache_async", "push_cache", "push_blocks"})


def relink_codes() -> FrozenSet[LLMStatusCode]:
    """Codes whose documented remedy is to re-establish the link (read from the status table)."""
    return frozenset(c for c, info in STATUS_TABLE.items() if "re-established" in info.remedy)


def relink_after_timeout() -> RetryIf:
    """Re-link before retrying a transfer that timed out (the remedy of LLM_TIMEOUT and
    LLM_WAIT_PROCESS_TIMEOUT), or any call that found no link (LLM_NOT_YET_LINK: the upper layer checks
    the link, and finds it gone)."""
    timeouts = relink_codes()
    return RetryIf(
        lambda s: (
            (s.code in timeouts and (not s.op or s.op in TRANSFER_OPS))
            or s.code is LLMStatusCode.LLM_NOT_YET_LINK
        ),
        "relink_after_timeout()",
    )


# -- the retry budget -----------------------------------------------------------------------------


class RetryBudget:
    """Retries capped at a share of recent traffic, shared by every client that holds it (Finagle's
    ``RetryBudget``, Envoy's ``retry_budget``): within the last ``window_s`` simulated seconds, retries
    may not exceed ``ratio`` of the calls plus ``min_per_s * window_s``. A storm of failures therefore
    cannot multiply the load by more than ``1 + ratio``."""

    def __init__(self, ratio: float = 0.2, window_s: float = 10.0, min_per_s: float = 1.0) -> None:
        if ratio < 0 or window_s <= 0 or min_per_s < 0:
            raise ValueError("ratio and min_per_s must be >= 0 and window_s > 0")
        self.ratio, self.window_s, self.min_per_s = ratio, window_s, min_per_s
        self._calls: Deque[float] = deque()
        self._retries: Deque[float] = deque()
        self.refused = 0

    def _trim(self, now: float) -> None:
        for times in (self._calls, self._retries):
            while times and times[0] <= now - self.window_s:
                times.popleft()

    def deposit(self, now: float) -> None:
        """A new call (not a retry) was made."""
        self._calls.append(now)

    def withdraw(self, now: float) -> bool:
        """May one more retry go out now? Counts it if so."""
        self._trim(now)
        if len(self._retries) + 1 > self.ratio * len(self._calls) + self.min_per_s * self.window_s:
            self.refused += 1
            return False
        self._retries.append(now)
        return True

    def __repr__(self) -> str:
        return f"RetryBudget(ratio={self.ratio}, window_s={self.window_s}, min_per_s={self.min_per_s})"


# -- policies -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Decision:
    """What to do after an attempt: ``retry`` after ``wait_s`` (re-linking first if ``relink``), or stop
    with ``reason`` ("success", "not retryable", "stopped", "budget")."""

    retry: bool
    wait_s: float = 0.0
    relink: bool = False
    reason: str = ""


@dataclass
class RetryPolicy:
    """A named combination of parts. Build one with the factories below, or from your own parts."""

    name: str
    stop: Stop = field(default_factory=lambda: stop_after_attempt(1))
    wait: Wait = field(default_factory=wait_none)
    retry: RetryIf = field(default_factory=lambda: retry_never)
    relink: RetryIf = field(default_factory=lambda: retry_never)
    budget: Optional[RetryBudget] = None

    def start(self, now: float, op: str = "") -> Session:
        """Begin one call's attempts at simulated time ``now``."""
        if self.budget is not None:
            self.budget.deposit(now)
        return Session(self, now, op)

    def call(
        self,
        fn: Callable[[], T],
        *,
        clock: Clock,
        op: str = "",
        relink: Optional[Callable[[], object]] = None,
    ) -> T:
        """Run ``fn`` until it succeeds or the policy gives up (then the last error is raised).

        ``LLMException`` (anything with a ``status_code``) is judged by the policy; other exceptions
        (``TypeError``, ``ValueError``) are raised at once, as real clients do.
        """
        session = self.start(clock.now(), op)
        while True:
            try:
                result = fn()
            except Exception as exc:
                code = code_of(exc)  # either package's exception, matched by the code's name
                if code is None:
                    raise
                decision = session.decide(code, clock.now(), exc)
                if not decision.retry:
                    raise
                clock.sleep(decision.wait_s)
                if decision.relink and relink is not None:
                    relink()
                continue
            session.decide(None, clock.now())
            return result


@dataclass
class Session:
    """The attempts of one call under a policy; ``decide`` after each one."""

    policy: RetryPolicy
    started: float
    op: str = ""
    attempts: int = 0
    codes: List[Optional[LLMStatusCode]] = field(default_factory=list)

    def decide(self, code: Optional[CodeLike], now: float, error: Optional[BaseException] = None) -> Decision:
        """``code`` is the attempt's status (``None`` or ``LLM_SUCCESS`` for success), of either package."""
        code = None if code is None else as_code(code)
        self.attempts += 1
        self.codes.append(code)
        if code is None or code is LLMStatusCode.LLM_SUCCESS:
            return Decision(False, reason="success")
        state = RetryState(self.attempts, code, self.started, now, self.op, error)
        p = self.policy
        if not p.retry(state):
            return Decision(False, reason="not retryable")
        if p.stop(state):
            return Decision(False, reason="stopped")
        if p.budget is not None and not p.budget.withdraw(now):
            return Decision(False, reason="budget")
        return Decision(True, p.wait(state), p.relink(state), "retry")


# -- the policies of the benchmark ----------------------------------------------------------------

OMNI_INFER_CODES = (
    LLMStatusCode.LLM_REPEAT_REQUEST,
    LLMStatusCode.LLM_CLUSTER_NUM_EXCEED_LIMIT,
    LLMStatusCode.LLM_PROCESSING_LINK,
    LLMStatusCode.LLM_DEVICE_OUT_OF_MEMORY,
    LLMStatusCode.LLM_TIMEOUT,
    LLMStatusCode.LLM_WAIT_PROCESS_TIMEOUT,
    LLMStatusCode.LLM_LINK_BUSY,
)
"""omni-infer's ``RETRYABLE_CODES`` (``omni/accelerators/pd/llmdatadist_manager.py`` at ``02ce24d9``)."""


def no_retry() -> RetryPolicy:
    return RetryPolicy("no-retry")


def immediate(attempts: int = 5) -> RetryPolicy:
    """Retry anything at once: the naive loop."""
    return RetryPolicy("immediate", stop_after_attempt(attempts), wait_none(), retry_always)


def fixed_delay(seconds: float = 0.5, attempts: int = 5) -> RetryPolicy:
    return RetryPolicy("fixed-delay", stop_after_attempt(attempts), wait_fixed(seconds), retry_always)


def exponential_jitter(base: float = 0.1, cap: float = 5.0, attempts: int = 6, seed: int = 0) -> RetryPolicy:
    """Exponential backoff with full jitter; ``seed`` makes the jitter repeatable."""
    rng = random.Random(f"jitter:{seed}")
    return RetryPolicy(
        "exp-jitter", stop_after_attempt(attempts), wait_full_jitter(base, cap, rng), retry_always
    )


def code_aware(base: float = 0.1, cap: float = 5.0, attempts: int = 6, seed: int = 0) -> RetryPolicy:
    """Retry only what the status table marks retryable, with jittered backoff; re-link after a
    transfer timeout (the documented remedy) or when the link is gone; give up on the rest at once."""
    rng = random.Random(f"jitter:{seed}")
    return RetryPolicy(
        "code-aware",
        stop_after_attempt(attempts),
        wait_full_jitter(base, cap, rng),
        retry_if_retryable(),
        relink_after_timeout(),
    )


def omni_infer() -> RetryPolicy:
    """omni-infer's ``_pull_blocks`` loop (same file as ``OMNI_INFER_CODES``): 3 tries, 2 s apart, on a
    fixed code list; other codes, ``TypeError`` and ``ValueError`` re-raise at once."""
    return RetryPolicy("omni-infer", stop_after_attempt(3), wait_fixed(2.0), retry_if_code(OMNI_INFER_CODES))


def budgeted(
    ratio: float = 0.2, window_s: float = 10.0, min_per_s: float = 1.0, seed: int = 0
) -> RetryPolicy:
    """The code-aware policy under a shared retry budget (``ratio`` of recent calls)."""
    policy = code_aware(seed=seed)
    policy.name = "budget"
    policy.budget = RetryBudget(ratio, window_s, min_per_s)
    return policy


__all__ = [
    "OMNI_INFER_CODES",
    "Decision",
    "RetryBudget",
    "RetryIf",
    "RetryPolicy",
    "RetryState",
    "Session",
    "Stop",
    "Wait",
    "budgeted",
    "code_aware",
    "exponential_jitter",
    "fixed_delay",
    "immediate",
    "no_retry",
    "omni_infer",
    "relink_after_timeout",
    "relink_codes",
    "retry_always",
    "retry_if_code",
    "retry_if_retryable",
    "retry_never",
    "stop_after_attempt",
    "stop_after_delay",
    "stop_never",
    "wait_exponential",
    "wait_fixed",
    "wait_full_jitter",
    "wait_none",
]
