"""The argument-check helpers: wrong type -> TypeError, out of range -> ValueError (reference §2.4)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from datadist_sim.llm_datadist.utils import utils

BOUNDS = {
    "uint8": (0, 2**8 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint64": (0, 2**64 - 1),
}


@pytest.mark.parametrize("kind", list(BOUNDS))
def test_range_checks_accept_bounds_and_reject_one_past(kind: str) -> None:
    check = getattr(utils, f"check_{kind}")
    low, high = BOUNDS[kind]
    check("arg", low)
    check("arg", high)
    for bad in (low - 1, high + 1):
        with pytest.raises(ValueError, match=f"arg's value is out of range,{bad} is not a {kind} value."):
            check("arg", bad)


@pytest.mark.parametrize("kind", list(BOUNDS))
@pytest.mark.parametrize("value", [None, "1", 1.0])
def test_range_checks_reject_non_int_with_type_error_naming_the_argument(kind: str, value: object) -> None:
    with pytest.raises(TypeError, match="the_arg only support \\['int'\\]"):
        getattr(utils, f"check_{kind}")("the_arg", value)


@given(st.integers())
def test_uint64_accepts_exactly_its_range(value: int) -> None:
    if 0 <= value < 2**64:
        utils.check_uint64("v", value)
    else:
        with pytest.raises(ValueError, match="v's value"):
            utils.check_uint64("v", value)


def test_check_isinstance_allows_none_unless_told_and_checks_inner_types() -> None:
    assert utils.check_isinstance("x", None, int) is None
    with pytest.raises(TypeError, match="x only support \\['int'\\]"):
        utils.check_isinstance("x", None, int, allow_none=False)
    with pytest.raises(TypeError, match="inner type"):
        utils.check_isinstance("xs", [1, "a"], list, int)


def test_check_dict_names_the_offending_key_or_value() -> None:
    utils.check_dict("m", {1: 2}, int, int)
    with pytest.raises(TypeError, match="m dict key"):
        utils.check_dict("m", {"a": 2}, int, int)
    with pytest.raises(TypeError, match="m dict value"):
        utils.check_dict("m", {1: "b"}, int, int)


def test_check_positive_or_set_default() -> None:
    assert utils.check_positive_or_set_default("o", None) == -1
    assert utils.check_positive_or_set_default("o", 5) == 5
    with pytest.raises(ValueError, match="should be >= 0"):
        utils.check_positive_or_set_default("o", -2)
