"""What the test programs share: the fake installed, and a deterministic fill for each key."""

from __future__ import annotations

import hashlib
import json
import sys

import numpy as np

import datadist_sim

datadist_sim.install()

PROMPT_ID = 1
DECODE_ID = 2
PROMPT_IP = "192.168.1.1"
DECODE_IP = "192.168.2.1"
PORT = 26000


def pattern(seed: int, shape: list[int], dtype: np.dtype[np.generic]) -> np.ndarray:
    """The bytes the Prompt side writes for ``seed``, which the Decode side expects to receive."""
    return np.random.default_rng(seed).integers(0, 1000, size=shape).astype(dtype)


def say(*parts: object) -> None:
    print(*parts, flush=True)


def wait_for_go() -> None:
    sys.stdin.readline()


def line() -> str:
    """The next line the test sends, without its newline."""
    return sys.stdin.readline().strip()


def digest(data: object) -> str:
    """A short fingerprint of bytes a side reports, so the test compares both sides' without sending them."""
    return hashlib.sha256(bytes(data)).hexdigest()  # type: ignore[call-overload]


RANK_TABLE = json.dumps(
    {
        "version": "1.2",
        "server_count": "2",
        "status": "completed",
        "server_list": [
            {
                "server_id": f"s{r}",
                "device": [{"device_id": "0", "device_ip": f"10.0.0.{r + 1}", "rank_id": str(r)}],
            }
            for r in range(2)
        ],
    }
)


def poll_until_ready(dd: object, comm_id: int) -> str:
    """Poll ``query_register_mem_status`` as real clients do: a short sleep between polls."""
    import time

    for _ in range(2000):
        status = dd.query_register_mem_status(comm_id)  # type: ignore[attr-defined]
        if status.name != "PREPARING":
            return str(status.name)
        time.sleep(0.005)
    return "PREPARING"


def wait_until_gone(cluster_id: int) -> bool:
    """Wait (bounded) until the fabric has noticed that ``cluster_id``'s process died."""
    import time

    import datadist_sim.fabric

    for _ in range(1000):
        if cluster_id not in datadist_sim.fabric.status()["clusters"]:
            return True
        time.sleep(0.01)
    return False


def code_of(call: object) -> str:
    """The status-code name a call raises with (``LLM_SUCCESS`` if it returns)."""
    from llm_datadist import LLMException  # type: ignore[import-not-found]
    from llm_datadist_v1 import LLMException as V1LLMException  # type: ignore[import-not-found]

    try:
        call()  # type: ignore[operator]
    except (LLMException, V1LLMException) as exc:  # a KvCacheManager raises the v1 package's class
        return str(exc.status_code.name)
    return "LLM_SUCCESS"
