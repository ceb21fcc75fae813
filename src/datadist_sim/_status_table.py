"""What each status code means, whether a client may retry it, and the documented remedy.

The rows come from the user's status-code table (``status_codes.txt``); the six codes it lacks come from
the API reference the project was built from (the ``source`` column says which). Retry policies, the
CLI and the docs read this table; nothing restates it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Union

from datadist_sim._status import LLMStatusCode

Retryable = Literal["yes", "no", "n.a."]


@dataclass(frozen=True)
class StatusInfo:
    """One row of the table: the code, its meaning, whether it is retryable, and what to do about it."""

    code: LLMStatusCode
    description: str
    retryable: Retryable
    remedy: str
    source: str

    @property
    def name(self) -> str:
        return self.code.name

    @property
    def value(self) -> int:
        return int(self.code)

    @property
    def is_retryable(self) -> bool:
        return self.retryable == "yes"

    @property
    def origin(self) -> str:
        """Where this row's retryable flag and remedy come from: ``status table`` (the user's code table)
        or ``reference`` (the API reference, for the codes the user's table lacks, e.g. ``LLM_TIMEOUT``)."""
        return "status table" if self.source == _TABLE else "reference"


_TABLE = "status_codes.txt"
_REF = "llm_datadist_api.md"
_C = LLMStatusCode

_ROWS: tuple[tuple[LLMStatusCode, str, Retryable, str, str], ...] = (
    (_C.LLM_SUCCESS, "Success", "n.a.", "None.", _TABLE),
    (
        _C.LLM_FAILED,
        "General failure",
        "no",
        "Restart the host or container. Preserve the fault context, collect host/device logs, "
        "and back them up.",
        _TABLE,
    ),
    (
        _C.LLM_WAIT_PROCESS_TIMEOUT,
        "Processing timeout",
        "yes",
        "If reported by a transmission API (pull_cache, pull_blocks, transfer_cache_async), the link is "
        "unrecoverable and must be re-established. If reported by another API, increase the timeout "
        "and try again.",
        _TABLE,
    ),
    (_C.LLM_PARAM_INVALID, "Incorrect parameter", "yes", "Locate the fault based on logs.", _TABLE),
    (
        _C.LLM_KV_CACHE_NOT_EXIST,
        "KV cache not found",
        "yes",
        "Check whether the corresponding Prefill-side request is completed, whether duplicate pulls "
        "exist, and whether the parameters marking the destination cache are correct.",
        _TABLE,
    ),
    (_C.LLM_REPEAT_REQUEST, "Duplicate request", "yes", "Check whether duplicate calls exist.", _TABLE),
    (
        _C.LLM_REQUEST_ALREADY_COMPLETED,
        "Request already completed (legacy model mode; not produced by the current KV APIs)",
        "n.a.",
        "Do not complete or reuse a request that was already completed.",
        _REF + " §12",
    ),
    (
        _C.LLM_ENGINE_FINALIZED,
        "Engine already finalized: a CacheManager taken before its engine's finalize() (also legacy "
        "model mode)",
        "no",
        "Obtain the manager again after LLMDataDist.init(); one taken before finalize() never works again.",
        _REF + " §12; hixl cache_manager.py@3f38f679 _check_is_inited",
    ),
    (
        _C.LLM_NOT_YET_LINK,
        "No link established",
        "yes",
        "Verify the link status between the Decode and Prompt sides at the upper layer.",
        _TABLE,
    ),
    (
        _C.LLM_ALREADY_LINK,
        "Link already established",
        "yes",
        "Verify the link status between the Decode and Prompt sides at the upper layer.",
        _TABLE,
    ),
    (
        _C.LLM_LINK_FAILED,
        "Link establishment failed",
        "yes",
        "If returned in the second value of link_clusters, check the network connectivity between "
        "the corresponding clusters.",
        _TABLE,
    ),
    (
        _C.LLM_UNLINK_FAILED,
        "Link disconnection failed",
        "yes",
        "If returned in the second value of unlink_clusters, check the network connectivity between "
        "the corresponding clusters.",
        _TABLE,
    ),
    (
        _C.LLM_NOTIFY_PROMPT_UNLINK_FAILED,
        "Failed to notify the Prompt side of link disconnection",
        "yes",
        "Check the network connectivity between the Decode and Prompt sides, then call "
        "unlink_clusters on the Prompt side to clean up residual resources.",
        _TABLE,
    ),
    (
        _C.LLM_CLUSTER_NUM_EXCEED_LIMIT,
        "Excessive clusters",
        "yes",
        "Check the input of link_clusters and unlink_clusters: at most 16 clusters per call.",
        _TABLE,
    ),
    (
        _C.LLM_PROCESSING_LINK,
        "Link operation in progress",
        "yes",
        "A link establishment or disconnection is in progress. Try again later.",
        _TABLE,
    ),
    (
        _C.LLM_DEVICE_OUT_OF_MEMORY,
        "Insufficient device memory",
        "yes",
        "Check whether the allocated memory has been properly released.",
        _TABLE,
    ),
    (
        _C.LLM_PREFIX_ALREADY_EXIST,
        "Prefix already loaded",
        "yes",
        "Check whether a common prefix with the same prefix ID has been loaded; if so, release it first.",
        _TABLE,
    ),
    (
        _C.LLM_PREFIX_NOT_EXIST,
        "Prefix not found",
        "yes",
        "Check whether the prefix ID in the request has been loaded.",
        _TABLE,
    ),
    (
        _C.LLM_SEQ_LENOVERLIMIT,
        "Sequence length over the limit (legacy model mode; not produced by the current KV APIs)",
        "n.a.",
        "Shorten the request or raise the model's sequence-length limit.",
        _REF + " §12",
    ),
    (
        _C.LLM_NO_FREE_BLOCK,
        "No free block (legacy model mode; not produced by the current KV APIs)",
        "n.a.",
        "Release blocks of finished requests before scheduling new ones.",
        _REF + " §12",
    ),
    (
        _C.LLM_BLOCKS_OUT_OF_MEMORY,
        "Blocks out of memory (legacy model mode; not produced by the current KV APIs)",
        "n.a.",
        "Check whether the allocated blocks have been properly released.",
        _REF + " §12",
    ),
    (
        _C.LLM_EXIST_LINK,
        "Unreleased links when switch_role is called",
        "yes",
        "Call unlink_clusters to disconnect all links before switching the role of the instance.",
        _TABLE,
    ),
    (
        _C.LLM_FEATURE_NOT_ENABLED,
        "Feature not enabled",
        "yes",
        "Check whether the required options are passed at initialisation; for switch_role, whether "
        "enable_switch_role was set to True in LLMConfig.",
        _TABLE,
    ),
    (
        _C.LLM_TIMEOUT,
        "Timeout (CacheManager mode: pull, push, transfer or link message exchange)",
        "yes",
        "For a transfer, the link must be re-established; otherwise increase sync_kv_timeout or the "
        "link timeout and try again.",
        _REF + " §12",
    ),
    (
        _C.LLM_LINK_BUSY,
        "Link busy",
        "yes",
        "Check whether APIs called at the same time conflict, e.g. pull_cache and transfer_cache_async "
        "over the same link, or check_link_status and pull_cache.",
        _TABLE,
    ),
    (
        _C.LLM_OUT_OF_MEMORY,
        "Insufficient memory (CacheManager mode only)",
        "yes",
        "Check whether the memory pool is large enough for the requested KV size and whether allocated "
        "memory has been properly released.",
        _TABLE,
    ),
    (
        _C.LLM_DEVICE_MEM_ERROR,
        "Faulty virtual address of an uncorrectable memory error (UCE); reserved",
        "yes",
        "Obtain the faulty virtual address of the UCE and recover it with torch_npu.npu.restart_device.",
        _TABLE,
    ),
    (
        _C.LLM_SUSPECT_REMOTE_ERROR,
        "Suspected UCE memory fault",
        "no",
        "Diagnose together with other faults whether the issue is a UCE memory fault or another fault.",
        _TABLE,
    ),
    (
        _C.LLM_UNKNOWN_ERROR,
        "Unknown error",
        "no",
        "Preserve the fault context, collect host/device logs, and back them up.",
        _TABLE,
    ),
)

STATUS_TABLE: dict[LLMStatusCode, StatusInfo] = {
    row[0]: StatusInfo(code=row[0], description=row[1], retryable=row[2], remedy=row[3], source=row[4])
    for row in _ROWS
}


def find_codes(text: str) -> list[StatusInfo]:
    """The rows a user's text names, as logs print codes: a decimal (``1343270938``, ``507057``) or hex
    (``0x5010B01A``) integer is that exact value; anything else is a case-insensitive part of the name
    (``TIMEOUT``, ``llm_link_busy``)."""
    try:
        value = int(text, 0)
    except ValueError:
        part = text.strip().upper()
        return [row for row in STATUS_TABLE.values() if part in row.name]
    return [row for row in STATUS_TABLE.values() if row.value == value]


def status_info(code: Union[LLMStatusCode, int, str]) -> StatusInfo:
    """The table row of ``code``, given as a member, its integer, or its name."""
    if isinstance(code, str):
        return STATUS_TABLE[LLMStatusCode[code]]
    return STATUS_TABLE[LLMStatusCode(code)]


def retryable_codes() -> frozenset[LLMStatusCode]:
    """Every code the table marks retryable."""
    return frozenset(info.code for info in STATUS_TABLE.values() if info.is_retryable)
