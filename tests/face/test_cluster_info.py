"""LLMClusterInfo against the real ``llm_datadist.configs`` (reference section 4)."""

from __future__ import annotations

import socket
from typing import Any, Type

import pytest
from hypothesis import given
from hypothesis import strategies as st

from datadist_sim.llm_datadist.configs import LLMClusterInfo, LLMRole, trans_str_ip

UINT64_MAX = 2**64 - 1


def test_defaults() -> None:
    info = LLMClusterInfo()
    assert info.remote_cluster_id is None
    assert info.remote_role_type is None
    assert info.local_ip_info_list == []
    assert info.remote_ip_info_list == []


@given(st.integers(min_value=0, max_value=UINT64_MAX))
def test_remote_cluster_id_round_trips_over_uint64(cluster_id: int) -> None:
    info = LLMClusterInfo()
    info.remote_cluster_id = cluster_id
    assert info.remote_cluster_id == cluster_id


@pytest.mark.parametrize(
    ("value", "error"),
    [(-1, ValueError), (UINT64_MAX + 1, ValueError), (None, TypeError), ("1", TypeError), (1.0, TypeError)],
)
def test_remote_cluster_id_rejects(value: Any, error: Type[BaseException]) -> None:
    info = LLMClusterInfo()
    with pytest.raises(error):
        info.remote_cluster_id = value
    assert info.remote_cluster_id is None


def test_remote_role_type_accepts_role_int_and_none() -> None:
    info = LLMClusterInfo()
    info.remote_role_type = LLMRole.PROMPT
    assert info.remote_role_type is LLMRole.PROMPT
    info.remote_role_type = 7
    assert info.remote_role_type == 7
    info.remote_role_type = None
    assert info.remote_role_type is None
    with pytest.raises(TypeError, match=r"remote_role_type only support \['LLMRole', 'int'\]"):
        info.remote_role_type = "PROMPT"  # type: ignore[assignment]


@pytest.mark.parametrize("append", ["append_local_ip_info", "append_remote_ip_info"])
def test_string_ip_is_stored_as_little_endian_int(append: str) -> None:
    info = LLMClusterInfo()
    getattr(info, append)("192.168.1.2", 26000)
    expected = int.from_bytes(socket.inet_aton("192.168.1.2"), "little")
    assert expected == 0x0201A8C0
    lists = {
        "append_local_ip_info": info.local_ip_info_list,
        "append_remote_ip_info": info.remote_ip_info_list,
    }
    assert lists[append] == [(expected, 26000)]


def test_int_ip_is_kept_and_lists_accumulate_in_order() -> None:
    info = LLMClusterInfo()
    info.append_local_ip_info(12345, 0)
    info.append_local_ip_info("0.0.0.1", 65535)
    assert info.local_ip_info_list == [(12345, 0), (1 << 24, 65535)]
    assert info.remote_ip_info_list == []


def test_ip_lists_are_read_only_properties() -> None:
    info = LLMClusterInfo()
    with pytest.raises(AttributeError):
        info.local_ip_info_list = []  # type: ignore[misc]
    with pytest.raises(AttributeError):
        info.remote_ip_info_list = []  # type: ignore[misc]


@pytest.mark.parametrize("bad", ["1.2.3.4.5", "hostname", "256.1.1.1", ""])
def test_unparsable_ip_string_is_runtime_error(bad: str) -> None:
    info = LLMClusterInfo()
    with pytest.raises(RuntimeError, match=f"^Can not parse ip str:{bad}$"):
        info.append_remote_ip_info(bad, 1)
    assert info.remote_ip_info_list == []


@pytest.mark.parametrize(
    ("ip", "port", "error"),
    [
        (1.5, 1, TypeError),
        (b"1.2.3.4", 1, TypeError),
        ("1.2.3.4", -1, ValueError),
        ("1.2.3.4", 65536, ValueError),
        ("1.2.3.4", None, TypeError),
        ("1.2.3.4", "80", TypeError),
    ],
)
def test_bad_ip_or_port_types_and_ranges(ip: Any, port: Any, error: Type[BaseException]) -> None:
    info = LLMClusterInfo()
    with pytest.raises(error):
        info.append_local_ip_info(ip, port)
    assert info.local_ip_info_list == []


def test_port_is_checked_before_the_ip_string_is_parsed() -> None:
    with pytest.raises(ValueError, match="port's value is out of range"):
        LLMClusterInfo().append_local_ip_info("not-an-ip", 70000)


@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_trans_str_ip_matches_inet_aton_little_endian(addr: int) -> None:
    text = socket.inet_ntoa(addr.to_bytes(4, "little"))
    assert trans_str_ip(text) == addr
    assert trans_str_ip(addr) == addr
