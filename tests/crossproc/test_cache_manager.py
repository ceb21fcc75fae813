"""The CacheManager (v2) flow between two real processes, with caches registered by raw pointer."""

from __future__ import annotations

import pytest

from .conftest import Fabric

pytestmark = pytest.mark.crossproc


def test_v2_flow_link_poll_pull_and_pull_blocks_into_raw_pointers(fabric: Fabric) -> None:
    prompt = fabric.start("cm_prompt.py")
    decode = fabric.start("cm_decode.py")
    prompt.expect("up")
    decode.expect("up")
    prompt.tell()
    decode.tell()
    assert prompt.expect("status") == "OK"
    assert decode.expect("status") == "OK"
    # the fabric read the Prompt process's arrays and wrote the Decode process's arrays
    assert decode.expect("pull_cache_bytes") == "True"
    assert decode.expect("pull_blocks_bytes") == "True"
    assert decode.expect("after_unlink") == "LLM_NOT_YET_LINK"
    decode.expect("done")
    assert decode.finish() == 0
    prompt.tell()
    prompt.expect("done")
    assert prompt.finish() == 0


def test_remote_cache_access_reads_the_prompts_table_once_per_link_across_processes(fabric: Fabric) -> None:
    """hixl ``cache_access_table.cc:290-294``: with ``llm.EnableRemoteCacheAccessible`` the Decode reads
    the Prompt's cache table at its first pull of a link; a cache the Prompt process registers after that
    is ``LLM_KV_CACHE_NOT_EXIST`` to the Decode process until it links again."""
    prompt = fabric.start("rca_prompt.py")
    decode = fabric.start("rca_decode.py")
    first_id = prompt.expect("up")
    decode.expect("up")
    decode.tell(first_id)
    assert decode.expect("link") == "LLM_SUCCESS"
    assert decode.expect("first_bytes") == "True"
    prompt.tell()
    late_id = prompt.expect("late")
    decode.tell(late_id)
    assert decode.expect("late") == "LLM_KV_CACHE_NOT_EXIST"
    assert decode.expect("untouched") == "True"
    assert decode.expect("after_relink") == "LLM_SUCCESS"
    assert decode.expect("late_bytes") == "True"
    decode.expect("done")
    assert decode.finish() == 0
    prompt.tell()
    prompt.expect("done")
    assert prompt.finish() == 0
