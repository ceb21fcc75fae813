"""An explore target written as the README shows: ``import llm_datadist`` at the module's top, before
any world exists (explore, ``--replay`` and the pytest marker install the fake before loading it)."""

from __future__ import annotations

import llm_datadist

from datadist_sim import SimWorld


def makes_a_decode(world: SimWorld) -> None:
    dd = llm_datadist.LLMDataDist(llm_datadist.LLMRole.DECODER, 2)
    dd.init({"ge.exec.deviceId": "0", "llm.EnableCacheManager": "1"})
    dd.finalize()
