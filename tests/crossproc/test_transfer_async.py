"""transfer_cache_async between processes: the user's LayerSynchronizer runs in its own process, called
back by the fabric before each layer, and the layers land in the other process's registered memory."""

from __future__ import annotations

import pytest

from .conftest import Fabric

pytestmark = pytest.mark.crossproc


def test_async_push_calls_the_synchronizer_back_in_its_process(fabric: Fabric) -> None:
    prompt = fabric.start("async_pair.py", "prompt")
    decode = fabric.start("async_pair.py", "decode")
    addrs = decode.expect("addrs")
    prompt_pid = prompt.expect("pid")
    decode.expect("pid")
    prompt.tell()
    decode.tell()
    assert prompt.expect("status") == "OK"
    assert decode.expect("status") == "OK"
    prompt.tell(addrs)
    assert prompt.expect("sync") == f"0 {prompt_pid}"  # ran in the Prompt process, layer by layer
    assert prompt.expect("sync") == f"1 {prompt_pid}"
    assert prompt.expect("result") == "LLM_SUCCESS [0, 1]"
    decode.tell()
    assert decode.expect("received") == "True"
    decode.expect("done")
    prompt.tell()
    prompt.expect("done")
    assert (prompt.finish(), decode.finish()) == (0, 0)
