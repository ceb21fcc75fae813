"""Virtual and real clocks."""

from __future__ import annotations

import pytest

from datadist_sim import RealClock, SimWorld, VirtualClock


def test_virtual_clock_advances_only_when_told_and_never_backwards() -> None:
    clock = VirtualClock()
    assert clock.now() == 0.0
    clock.sleep(2.5)
    assert clock.now() == 2.5
    clock.advance_to(1.0)
    assert clock.now() == 2.5
    clock.advance_to(4.0)
    assert clock.now() == 4.0
    with pytest.raises(ValueError, match="seconds"):
        clock.sleep(-1)


def test_a_world_uses_the_virtual_clock_by_default() -> None:
    world = SimWorld()
    assert isinstance(world.clock, VirtualClock)
    world.elapse(600.0)
    assert world.now() == 600.0


def test_real_clock_scaled_lets_simulated_time_pass_faster() -> None:
    clock = RealClock(speed=1000.0)
    clock.sleep(0.5)
    assert clock.now() >= 0.5
    with pytest.raises(ValueError, match="speed"):
        RealClock(speed=0)


def test_a_world_on_the_real_clock_still_links() -> None:
    from datadist_sim.llm_datadist import LLMClusterInfo, LLMDataDist, LLMRole, LLMStatusCode

    world = SimWorld(clock=RealClock(speed=100.0))
    with world.activate():
        p = LLMDataDist(LLMRole.PROMPT, 0)
        p.init({"ge.exec.deviceId": "0", "llm.listenIpInfo": "10.0.0.1:1"})
        d = LLMDataDist(LLMRole.DECODER, 1)
        d.init({"ge.exec.deviceId": "0"})
        c = LLMClusterInfo()
        c.remote_cluster_id = 0
        c.append_local_ip_info("10.0.0.2", 0)
        c.append_remote_ip_info("10.0.0.1", 1)
        assert d.link_clusters([c])[0] is LLMStatusCode.LLM_SUCCESS
        assert world.now() >= world.config.link_setup_s
        d.finalize()
        p.finalize()
