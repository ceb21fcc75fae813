"""The KvCacheManager (v1) flow between a real Prompt process and a real Decode process."""

from __future__ import annotations

import json

import pytest

from .conftest import Fabric

pytestmark = pytest.mark.crossproc


def test_v1_flow_between_two_processes_moves_the_bytes(fabric: Fabric) -> None:
    prompt = fabric.start("kv_prompt.py")
    assert prompt.expect("tensor1_matches") == "True"  # get_cache_tensors maps the same shared bytes
    assert prompt.expect("is_kv_cache") == "True 1 2"  # the handle passes the client's isinstance checks
    prompt.expect("ready")
    decode = fabric.start("kv_decode.py")
    assert decode.expect("link") == "LLM_SUCCESS ['LLM_SUCCESS']"
    assert decode.expect("bytes_match") == "True"
    assert decode.expect("second_pull") == "LLM_KV_CACHE_NOT_EXIST"  # a pulled key is consumed
    assert decode.expect("unlink") == "LLM_SUCCESS"
    events = json.loads(decode.expect("trace"))
    # one trace for the world: both processes' calls, in simulated-time order
    assert [t for t, _, _ in events] == sorted(t for t, _, _ in events)
    assert {(cluster, op) for _, cluster, op in events} >= {(1, "allocate_cache"), (2, "pull_cache")}
    decode.expect("done")
    assert decode.finish() == 0
    prompt.tell()
    prompt.expect("done")
    assert prompt.finish() == 0


def test_two_decode_processes_pull_their_own_requests_from_one_prompt(fabric: Fabric) -> None:
    prompt = fabric.start("kv_prompt.py")
    prompt.expect("ready")
    decodes = [fabric.start("kv_decode.py", "2", "0", "1"), fabric.start("kv_decode.py", "3", "2", "3")]
    for decode in decodes:  # they link and pull concurrently
        assert decode.expect("link") == "LLM_SUCCESS ['LLM_SUCCESS']"
        assert decode.expect("bytes_match") == "True"
        assert decode.expect("second_pull") == "LLM_KV_CACHE_NOT_EXIST"
        decode.expect("done")
    assert [decode.finish() for decode in decodes] == [0, 0]
    prompt.tell()
    prompt.expect("done")
    assert prompt.finish() == 0
