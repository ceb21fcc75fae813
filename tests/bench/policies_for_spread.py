"""A user policy given to ``bench retry`` as ``NAME=module:factory``, built in each worker."""

from __future__ import annotations

from datadist_sim.retry import RetryPolicy, fixed_delay


def two_tries(seed: int = 0) -> RetryPolicy:
    return fixed_delay()
