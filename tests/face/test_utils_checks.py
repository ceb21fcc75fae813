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


# The contracts hixl's tests/python/test_parameter_validation.py (at 02ffb84b) states for these helpers.

LIST_KINDS = {"int32": BOUNDS["int32"], "int64": BOUNDS["int64"], "uint64": BOUNDS["uint64"]}


@pytest.mark.parametrize("kind", list(BOUNDS))
def test_range_checks_refuse_any_size_of_int_outside_the_range(kind: str) -> None:
    for value in (2**128, -(2**128)):
        with pytest.raises(ValueError, match="n's value is out of range"):
            getattr(utils, f"check_{kind}")("n", value)


@pytest.mark.parametrize("kind", list(LIST_KINDS))
def test_list_checks_take_tuples_and_empty_lists_and_name_the_argument_at_any_position(kind: str) -> None:
    check = getattr(utils, f"check_list_{kind}")
    low, high = LIST_KINDS[kind]
    values = [low, 0, high]
    check("ids", values)
    assert values == [low, 0, high]
    check("ids", ())
    check("ids", (low, high))
    for position in range(3):
        for bad in (None, "1", 1.0, []):
            items: list = [0, 1, 2]
            items[position] = bad
            with pytest.raises(TypeError, match="ids only support"):
                check("ids", items)
    with pytest.raises(ValueError, match="ids's value"):
        check("ids", [0, high + 1])


def test_check_isinstance_returns_its_value_and_checks_the_outer_type_first() -> None:
    class Values(list):  # type: ignore[type-arg]
        pass

    value = Values([1])
    assert utils.check_isinstance("values", value, list) is value
    assert utils.check_isinstance("values", value, [tuple, list], int) is value
    with pytest.raises(TypeError, match=r"values only support \['list'\]"):
        utils.check_isinstance("values", 1, list, inner_class=int)
    with pytest.raises(TypeError) as caught:
        utils.check_isinstance("values", 1.5, [list, tuple], extra_fmt="RegisterMem: ")
    assert str(caught.value).startswith("RegisterMem: values only support ['list', 'tuple']")
    assert "float" in str(caught.value)


def test_check_dict_takes_scalar_values_and_names_an_inner_element() -> None:
    utils.check_dict("options", {"first": 1, "second": 2}, str, int)
    utils.check_dict("options", {"values": [1, "two"]}, str, list)  # no inner class: not looked into
    with pytest.raises(TypeError, match="dict value inner type"):
        utils.check_dict("options", {"valid": [1], "bad": [2, "3"]}, str, list, int)


def test_check_positive_or_set_default_keeps_zero_and_its_range() -> None:
    assert utils.check_positive_or_set_default("size", None, default=128) == 128
    assert utils.check_positive_or_set_default("size", 0, default=128) == 0
    assert utils.check_positive_or_set_default("size", 2**63 - 1) == 2**63 - 1
    for bad in (-(2**63) - 1, 2**63):
        with pytest.raises(ValueError, match="size"):
            utils.check_positive_or_set_default("size", bad)
    for wrong in ("1", 1.0, []):
        with pytest.raises(TypeError, match="size"):
            utils.check_positive_or_set_default("size", wrong)
