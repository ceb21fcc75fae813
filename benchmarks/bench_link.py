"""Control-plane benchmark: link set-up and a 5-second link timeout on the virtual clock.

Each figure is the best of N, reported as a ratio against a baseline measured in the same run: a bare
Python call that does the same argument validation (``check_int32`` + ``isinstance`` checks) as
``link_clusters``. The 5-second timeout case shows simulated time costing no wall time.

    python benchmarks/bench_link.py [--repeat 2000]
"""

from __future__ import annotations

import argparse
import time
from typing import Callable

from datadist_sim import SimWorld
from datadist_sim.llm_datadist import LLMClusterInfo, LLMDataDist, LLMRole
from datadist_sim.llm_datadist.utils.utils import check_int32, check_isinstance


def per_call(repeat: int, action: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(repeat):
            action()
        best = min(best, (time.perf_counter() - start) / repeat)
    return best


def info(remote: int, port: int) -> LLMClusterInfo:
    c = LLMClusterInfo()
    c.remote_cluster_id = remote
    c.append_local_ip_info("192.168.2.1", 0)
    c.append_remote_ip_info("192.168.1.1", port)
    return c


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=2000)
    repeat = parser.parse_args().repeat
    world = SimWorld(seed=0)
    with world.activate():
        prompt = LLMDataDist(LLMRole.PROMPT, 0)
        prompt.init({"ge.exec.deviceId": "0", "llm.listenIpInfo": "192.168.1.1:26000"})
        decode = LLMDataDist(LLMRole.DECODER, 1)
        decode.init({"ge.exec.deviceId": "0"})
        good, nobody = [info(0, 26000)], [info(5, 26005)]

        def baseline() -> None:
            check_int32("timeout", 3000)
            check_isinstance("clusters", good, [list, tuple], LLMClusterInfo)

        def link_unlink() -> None:
            decode.link_clusters(good)
            decode.unlink_clusters(good)

        base = per_call(repeat, baseline)
        cycle = per_call(repeat, link_unlink)
        t0 = world.now()
        timeout = per_call(repeat, lambda: decode.link_clusters(nobody, timeout=5000))
        simulated = (world.now() - t0) / (5 * repeat)
    print(f"baseline (validation only)          {base * 1e6:8.2f} us/call")
    print(f"link + unlink cycle                 {cycle * 1e6:8.2f} us/cycle  ({cycle / base:6.1f}x baseline)")
    ratio = timeout / base
    print(f"link with a 5 s timeout, nobody up  {timeout * 1e6:8.2f} us/call   ({ratio:6.1f}x baseline)")
    per_sim_second = timeout / 5 * 1e6
    print(
        f"  simulated seconds per call: {simulated:.1f}; wall per simulated second: {per_sim_second:.2f} us"
    )


if __name__ == "__main__":
    main()
