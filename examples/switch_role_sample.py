"""Swap the Prompt and Decoder roles of two processes, in the style of the official
``switch_role_sample`` (CacheManager mode with ``local_comm_res``): the Prompt listens on loopback, the
Decoder links and pulls blocks, both switch roles, the new Decoder links to the new Prompt's listener
and pushes blocks to it. CPU tensors are registered by ``data_ptr()``; the two processes meet only
through the library and a ``torch.distributed`` gloo barrier.

    datadist-sim exec --fabric=shared -- python examples/switch_role_sample.py --role prompt &
    datadist-sim exec --fabric=shared -- python examples/switch_role_sample.py --role decoder
"""

import argparse
import logging

import torch
import torch.distributed as dist
from llm_datadist import (
    BlocksCacheKey,
    CacheDesc,
    DataType,
    LLMClusterInfo,
    LLMConfig,
    LLMDataDist,
    LLMRole,
    LLMStatusCode,
    Placement,
)

logging.basicConfig(format="%(asctime)s [%(levelname)s] %(message)s", level=logging.INFO)
PROMPT_CLUSTER_ID = 0
DECODER_CLUSTER_ID = 1
PROMPT_IP, DECODER_IP = "127.0.0.1", "127.0.0.1"
PROMPT_PORT, DECODER_PORT = 26000, 26001
NUM_TENSORS, NUM_BLOCKS, BLOCK_ELEMS = 2, 4, 1024


def expect(ok: bool, what: str) -> None:
    if not ok:
        raise RuntimeError(what)


def make_config(device_id: int, listen: str = "") -> dict:
    llm_config = LLMConfig()
    llm_config.device_id = device_id
    llm_config.local_comm_res = ""
    if listen:
        llm_config.listen_ip_info = listen
    return llm_config.generate_options()


def cluster_info(remote_id: int, remote_ip: str, remote_port: int, local_ip: str) -> LLMClusterInfo:
    info = LLMClusterInfo()
    info.remote_cluster_id = remote_id
    info.append_local_ip_info(local_ip, 0)
    info.append_remote_ip_info(remote_ip, remote_port)
    return info


def check(ret: LLMStatusCode, what: str) -> None:
    if ret != LLMStatusCode.LLM_SUCCESS:
        raise RuntimeError(f"{what} failed: {ret}")


def block_values(cluster_id: int) -> list:
    return [
        torch.arange(NUM_BLOCKS * BLOCK_ELEMS, dtype=torch.float16).reshape(NUM_BLOCKS, -1)
        + 10 * cluster_id
        + i
        for i in range(NUM_TENSORS)
    ]


def run_prompt(device_id: int) -> None:
    datadist = LLMDataDist(LLMRole.PROMPT, PROMPT_CLUSTER_ID)
    datadist.init(make_config(device_id, f"{PROMPT_IP}:{PROMPT_PORT}"))
    cache_manager = datadist.cache_manager
    tensors = block_values(PROMPT_CLUSTER_ID)
    cache_desc = CacheDesc(NUM_TENSORS, [NUM_BLOCKS, BLOCK_ELEMS], DataType.DT_FLOAT16, Placement.HOST)
    # local_comm_res turns remote cache access on, and a host cache is not remote accessible unless
    # registered so (hixl v2/llm_datadist.py:422-434, v2/cache_manager.py:625-634): the pulls and pushes
    # below are one-sided and need both caches accessible.
    cache = cache_manager.register_blocks_cache(
        cache_desc,
        [t.data_ptr() for t in tensors],
        BlocksCacheKey(PROMPT_CLUSTER_ID, 0),
        remote_accessible=True,
    )
    dist.barrier()  # registered, listening
    dist.barrier()  # decoder pulled and unlinked
    datadist.switch_role(LLMRole.DECODER)
    logging.info("prompt switched to decoder")
    dist.barrier()  # both switched
    cluster = cluster_info(DECODER_CLUSTER_ID, DECODER_IP, DECODER_PORT, PROMPT_IP)
    ret, rets = datadist.link_clusters([cluster], 5000)
    check(ret, f"link_clusters {rets}")
    cache_manager.push_blocks(
        BlocksCacheKey(DECODER_CLUSTER_ID, 0),
        cache,
        src_blocks=[0, 1],
        dst_blocks=[2, 3],
        tensor_num_per_layer=1,
    )
    logging.info("new decoder pushed blocks")
    dist.barrier()  # pushed
    datadist.unlink_clusters([cluster], 5000, force=True)
    cache_manager.unregister_cache(cache.cache_id)
    datadist.finalize()


def run_decoder(device_id: int) -> None:
    datadist = LLMDataDist(LLMRole.DECODER, DECODER_CLUSTER_ID)
    datadist.init(make_config(device_id))
    cache_manager = datadist.cache_manager
    tensors = [torch.zeros(NUM_BLOCKS, BLOCK_ELEMS, dtype=torch.float16) for _ in range(NUM_TENSORS)]
    cache_desc = CacheDesc(NUM_TENSORS, [NUM_BLOCKS, BLOCK_ELEMS], DataType.DT_FLOAT16, Placement.HOST)
    cache = cache_manager.register_blocks_cache(
        cache_desc,
        [t.data_ptr() for t in tensors],
        BlocksCacheKey(DECODER_CLUSTER_ID, 0),
        remote_accessible=True,
    )
    dist.barrier()  # registered, listening
    cluster = cluster_info(PROMPT_CLUSTER_ID, PROMPT_IP, PROMPT_PORT, DECODER_IP)
    ret, rets = datadist.link_clusters([cluster], 5000)
    check(ret, f"link_clusters {rets}")
    cache_manager.pull_blocks(
        BlocksCacheKey(PROMPT_CLUSTER_ID, 0), cache, src_blocks=[0, 1], dst_blocks=[0, 2]
    )
    sent = block_values(PROMPT_CLUSTER_ID)
    for got, exp in zip(tensors, sent):
        expect(torch.equal(got[0], exp[0]) and torch.equal(got[2], exp[1]), "pull_blocks bytes differ")
    ret, _ = datadist.unlink_clusters([cluster], 5000)
    check(ret, "unlink_clusters")
    dist.barrier()  # decoder pulled and unlinked
    datadist.switch_role(LLMRole.PROMPT, make_config(device_id, f"{DECODER_IP}:{DECODER_PORT}"))
    logging.info("decoder switched to prompt")
    dist.barrier()  # both switched
    dist.barrier()  # pushed
    for got, exp in zip(tensors, sent):
        expect(torch.equal(got[2], exp[0]) and torch.equal(got[3], exp[1]), "push_blocks bytes differ")
    logging.info("pull and push bytes checked")
    back = cluster_info(PROMPT_CLUSTER_ID, PROMPT_IP, 0, DECODER_IP)
    datadist.unlink_clusters([back], 5000, force=True)
    cache_manager.unregister_cache(cache.cache_id)
    datadist.finalize()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--role", choices=["prompt", "decoder"], required=True)
    parser.add_argument("--device_id", type=int, default=0)
    parser.add_argument("--master_port", type=int, default=29534)
    args = parser.parse_args()
    is_prompt = args.role == "prompt"
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{args.master_port}", rank=0 if is_prompt else 1, world_size=2
    )
    try:
        run_prompt(args.device_id) if is_prompt else run_decoder(args.device_id)
    finally:
        dist.destroy_process_group()
    print(f"{args.role}: sample completed")
