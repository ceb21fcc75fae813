"""Transfers past the inline limit travel through shared scratch files, never the socket, and arrive
intact in every direction between raw pointers and shared caches."""

from __future__ import annotations

import pytest

from .conftest import Fabric

pytestmark = pytest.mark.crossproc


def test_large_pulls_between_raw_pointers_and_shared_caches_arrive_intact(fabric: Fabric) -> None:
    prompt = fabric.start("large_pair.py", "prompt")
    decode = fabric.start("large_pair.py", "decode")
    shared_id = prompt.expect("shared_id")
    prompt.tell()
    decode.tell()
    assert prompt.expect("status") == "OK"
    assert decode.expect("status") == "OK"
    decode.tell(shared_id)
    for _ in range(2):  # the second round reuses the warm scratch files
        assert decode.expect("raw_to_raw") == "True"
        assert decode.expect("raw_to_shared") == "True"
        assert decode.expect("shared_to_raw") == "True"
    # large reads and writes went through shared files, and the second round reused them
    assert 1 <= int(decode.expect("scratch_files_made")) <= 4
    decode.expect("pulled")
    decode.tell()
    prompt.tell()
    decode.expect("done")
    prompt.expect("done")
    assert (prompt.finish(), decode.finish()) == (0, 0)
