"""A member of some world: says which fabric it joined (its pid and token), initialises a cluster, lists
the clusters it can see, waits for a word, then leaves."""

from __future__ import annotations

import os
import sys

from _common import say, wait_for_go
from llm_datadist import LLMDataDist, LLMRole  # type: ignore[import-not-found]

import datadist_sim.fabric
from datadist_sim.fabric.client.client import current_client
from datadist_sim.fabric.transport.address import from_env

cluster_id = int(sys.argv[1])
dd = LLMDataDist(LLMRole.DECODER, cluster_id)
dd.init({"ge.exec.deviceId": "0", "llm.EnableCacheManager": "1"})
client = current_client()
assert client is not None
where = from_env()
assert where is not None
say("fabric_pid", client.info["pid"])
say("token", where.token)
say("socket", where.path)
say("clusters", " ".join(map(str, datadist_sim.fabric.status()["clusters"])))
if "--wait" in sys.argv:
    wait_for_go()
dd.finalize()
say("done", os.getpid())
