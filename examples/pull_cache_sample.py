"""Pull KV cache from a Prompt process into a Decode process (CacheManager mode), in the style of the
official ``pull_cache_sample``: CPU tensors registered by ``data_ptr()``, a rank-table ``link``, polled
``query_register_mem_status``, ``pull_cache`` and ``pull_blocks``, and a ``torch.distributed`` gloo
barrier on loopback between the phases. Nothing here knows about the simulator.

Run the two roles as two processes of one simulated world (this user's standing one)::

    datadist-sim exec --fabric=shared -- python examples/pull_cache_sample.py --role prompt &
    datadist-sim exec --fabric=shared -- python examples/pull_cache_sample.py --role decoder
"""

import argparse
import json
import logging
import time

import torch
import torch.distributed as dist
from llm_datadist import (
    BlocksCacheKey,
    CacheDesc,
    CacheKey,
    DataType,
    LLMConfig,
    LLMDataDist,
    LLMRole,
    Placement,
    RegisterMemStatus,
)

logging.basicConfig(format="%(asctime)s [%(levelname)s] %(message)s", level=logging.INFO)
PROMPT_CLUSTER_ID = 1
DECODER_CLUSTER_ID = 2
NUM_TENSORS = 4
BATCH, SEQ, HIDDEN = 2, 16, 128
NUM_BLOCKS, BLOCK_LEN = 8, 16


def expect(ok: bool, what: str) -> None:
    if not ok:
        raise RuntimeError(what)


def init_llm_datadist(role: LLMRole, cluster_id: int, device_id: int) -> LLMDataDist:
    datadist = LLMDataDist(role, cluster_id)
    llm_config = LLMConfig()
    llm_config.device_id = device_id
    llm_config.enable_cache_manager = True
    llm_config.mem_pool_cfg = '{"memory_size": 67108864}'
    datadist.init(llm_config.generate_options())
    return datadist


def rank_table() -> str:
    servers = [
        {"server_id": f"server{rank}", "device": [{"device_id": "0", "device_ip": ip, "rank_id": str(rank)}]}
        for rank, ip in enumerate(["192.168.1.1", "192.168.1.2"])
    ]
    return json.dumps({"version": "1.2", "server_count": "2", "server_list": servers, "status": "completed"})


def link(datadist: LLMDataDist) -> int:
    comm_id = datadist.link("pull_cache_sample", {PROMPT_CLUSTER_ID: 0, DECODER_CLUSTER_ID: 1}, rank_table())
    while True:
        ret = datadist.query_register_mem_status(comm_id)
        if ret == RegisterMemStatus.OK:
            logging.info("query_register_mem_status ok")
            return comm_id
        if ret == RegisterMemStatus.FAILED:
            raise RuntimeError("link failed")
        time.sleep(0.1)


def expected_tensors():
    return [
        torch.arange(BATCH * SEQ * HIDDEN, dtype=torch.float32).reshape(BATCH, SEQ, HIDDEN) + i
        for i in range(NUM_TENSORS)
    ]


def expected_blocks():
    return [
        torch.full((NUM_BLOCKS, BLOCK_LEN * HIDDEN), 100.0 + i) * torch.arange(NUM_BLOCKS).reshape(-1, 1)
        for i in range(NUM_TENSORS)
    ]


def run_prompt(datadist: LLMDataDist) -> None:
    cache_manager = datadist.cache_manager
    tensors = expected_tensors()
    cache_desc = CacheDesc(NUM_TENSORS, [BATCH, SEQ, HIDDEN], DataType.DT_FLOAT, Placement.HOST)
    cache_keys = [CacheKey(PROMPT_CLUSTER_ID, req_id=0), CacheKey(PROMPT_CLUSTER_ID, req_id=1)]
    cache = cache_manager.register_cache(cache_desc, [t.data_ptr() for t in tensors], cache_keys)
    blocks = expected_blocks()
    blocks_desc = CacheDesc(NUM_TENSORS, [NUM_BLOCKS, BLOCK_LEN * HIDDEN], DataType.DT_FLOAT, Placement.HOST)
    blocks_cache = cache_manager.register_blocks_cache(
        blocks_desc, [t.data_ptr() for t in blocks], BlocksCacheKey(PROMPT_CLUSTER_ID, 0)
    )
    logging.info("prompt registered %s and %s", cache, blocks_cache)
    dist.barrier()  # both sides registered
    comm_id = link(datadist)
    dist.barrier()  # linked
    dist.barrier()  # decoder has pulled
    cache_manager.remove_cache_key(cache_keys[0])
    cache_manager.unregister_cache(cache.cache_id)
    cache_manager.unregister_cache(blocks_cache.cache_id)
    datadist.unlink(comm_id)
    logging.info("prompt done")


def run_decoder(datadist: LLMDataDist) -> None:
    cache_manager = datadist.cache_manager
    tensors = [torch.zeros(BATCH, SEQ, HIDDEN, dtype=torch.float32) for _ in range(NUM_TENSORS)]
    cache_desc = CacheDesc(NUM_TENSORS, [BATCH, SEQ, HIDDEN], DataType.DT_FLOAT, Placement.HOST)
    cache = cache_manager.register_cache(cache_desc, [t.data_ptr() for t in tensors])
    blocks = [torch.zeros(NUM_BLOCKS, BLOCK_LEN * HIDDEN) for _ in range(NUM_TENSORS)]
    blocks_desc = CacheDesc(NUM_TENSORS, [NUM_BLOCKS, BLOCK_LEN * HIDDEN], DataType.DT_FLOAT, Placement.HOST)
    blocks_cache = cache_manager.register_blocks_cache(blocks_desc, [t.data_ptr() for t in blocks])
    dist.barrier()  # both sides registered
    comm_id = link(datadist)
    dist.barrier()  # linked
    cache_manager.pull_cache(CacheKey(PROMPT_CLUSTER_ID, req_id=0), cache, batch_index=0)
    cache_manager.pull_cache(CacheKey(PROMPT_CLUSTER_ID, req_id=1), cache, batch_index=1)
    cache_manager.pull_blocks(
        BlocksCacheKey(PROMPT_CLUSTER_ID, 0), blocks_cache, src_blocks=[1, 5], dst_blocks=[0, 2]
    )
    want, want_blocks = expected_tensors(), expected_blocks()
    expect(all(torch.equal(got, exp) for got, exp in zip(tensors, want)), "pull_cache bytes differ")
    for got, exp in zip(blocks, want_blocks):
        expect(torch.equal(got[0], exp[1]) and torch.equal(got[2], exp[5]), "pull_blocks bytes differ")
        expect(not got[1].any() and not got[3:].any(), "pull_blocks wrote blocks it was not asked to")
    logging.info("decoder pulled %d tensors and %d blocks, bytes checked", NUM_TENSORS, 2 * NUM_TENSORS)
    dist.barrier()  # decoder has pulled
    datadist.unlink(comm_id)
    cache_manager.unregister_cache(cache.cache_id)
    cache_manager.unregister_cache(blocks_cache.cache_id)
    logging.info("decoder done")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--role", choices=["prompt", "decoder"], required=True)
    parser.add_argument("--device_id", type=int, default=0)
    parser.add_argument("--master_port", type=int, default=29533)
    args = parser.parse_args()
    is_prompt = args.role == "prompt"
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{args.master_port}", rank=0 if is_prompt else 1, world_size=2
    )
    role = LLMRole.PROMPT if is_prompt else LLMRole.DECODER
    datadist = init_llm_datadist(role, PROMPT_CLUSTER_ID if is_prompt else DECODER_CLUSTER_ID, args.device_id)
    try:
        run_prompt(datadist) if is_prompt else run_decoder(datadist)
    finally:
        datadist.finalize()
        dist.destroy_process_group()
    print(f"{args.role}: sample completed")
