"""The ``datadist_sim`` logger: quiet by default, one DEBUG line per world event when enabled."""

from __future__ import annotations

import io
import logging

import pytest

from datadist_sim import _log


def test_quiet_by_default(capsys: pytest.CaptureFixture[str]) -> None:
    _log.world_event("0.000000  1  init  -> ok")
    captured = capsys.readouterr()
    assert captured.out == captured.err == ""
    assert not logging.getLogger("datadist_sim").isEnabledFor(logging.DEBUG)


def test_enable_writes_one_line_per_event_and_disable_stops_it() -> None:
    stream = io.StringIO()
    handler = _log.enable(stream=stream)
    try:
        _log.world_event("first event")
        _log.world_event("second event")
    finally:
        _log.disable(handler)
    _log.world_event("after disable")
    assert stream.getvalue().splitlines() == [
        "datadist_sim.world: first event",
        "datadist_sim.world: second event",
    ]


def test_records_reach_caplog_under_the_package_logger(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="datadist_sim"):
        _log.world_event("link_clusters -> LLM_SUCCESS")
    assert [(r.name, r.levelno, r.getMessage()) for r in caplog.records] == [
        ("datadist_sim.world", logging.DEBUG, "link_clusters -> LLM_SUCCESS")
    ]
