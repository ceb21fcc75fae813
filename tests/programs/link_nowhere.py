"""A program for ``datadist-sim exec``: one Decode instance links to a cluster nobody runs, prints the
code it got (``LLM_LINK_FAILED``) and finalizes. Three API calls, one code other than success: the
coverage tests of ``exec`` (in-process and ``--fabric``) count what each run of it received.

It imports ``llm_datadist`` by its own name: ``exec`` provides the fake (in-process, or the fabric's)."""

import llm_datadist

dd = llm_datadist.LLMDataDist(llm_datadist.LLMRole.DECODER, 1)
dd.init({"ge.exec.deviceId": "0"})
info = llm_datadist.LLMClusterInfo()
info.remote_cluster_id = 7
info.append_local_ip_info("10.0.0.2", 0)
info.append_remote_ip_info("10.0.0.9", 1)
print(dd.link_clusters([info], 1000)[0].name)
dd.finalize()
