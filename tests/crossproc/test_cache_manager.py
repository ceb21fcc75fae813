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
