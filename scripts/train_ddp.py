"""Train lesson 11's character-level GPT with DistributedDataParallel, one process per rank, started by torchrun.

One machine, 2 processes:      torchrun --standalone --nproc-per-node 2 scripts/train_ddp.py --steps 200
A cluster, 2 machines of 4:    torchrun --nnodes 2 --nproc-per-node 4 --node-rank 0 --master-addr HOST \\
                                   --master-port 29500 scripts/train_ddp.py       (--node-rank 1 on the second)

torchrun starts the processes and gives each its rank, the world size and the meeting point in environment variables
(RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT); ``init_process_group`` reads them. Every rank draws the same
seeded global batch of ``--batch-size`` windows and trains on its slice (``transformer_lib.distributed.shard``); DDP
averages the gradients, so the copies stay equal and the run trains what one process would on the whole batch.
Where the machine has a GPU for each of its processes (and ``TRANSFORMER_LIB_DEVICE`` does not say cpu), each process
uses the GPU of its LOCAL_RANK with the NCCL backend; otherwise every process trains on the CPU with gloo. Rank 0
prints the losses.
Last line: ``val_loss=<held-out loss> seconds=<training time> world_size=<processes> steps=<steps>``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

from transformer_lib import (
    GPT,
    CharTokenizer,
    GPTConfig,
    evaluate_lm_loss,
    get_device,
    python_docs,
    random_windows,
    set_seed,
    train_valid_split,
)
from transformer_lib.distributed import shard


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200, help="optimiser steps (default 200)")
    parser.add_argument("--batch-size", type=int, default=32, help="global batch: windows per step over all ranks")
    parser.add_argument("--lr", type=float, default=3e-3, help="AdamW learning rate")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per process on the CPU")
    args = parser.parse_args()

    local_processes = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))  # processes on this machine (torchrun sets it)
    gpus = torch.cuda.device_count() if get_device().type == "cuda" else 0
    use_cuda = gpus >= local_processes  # NCCL needs a GPU of its own for each process
    dist.init_process_group("nccl" if use_cuda else "gloo")  # rank and world size from torchrun's variables
    rank, world_size = dist.get_rank(), dist.get_world_size()
    if 0 < gpus < local_processes and int(os.environ.get("LOCAL_RANK", "0")) == 0:
        print(f"{local_processes} processes on this machine but {gpus} GPU(s): training on the CPU with gloo "
              f"(--nproc-per-node {gpus} trains on the GPUs)", file=sys.stderr, flush=True)
    if use_cuda:
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
        torch.set_num_threads(args.threads)
    try:
        text = python_docs()
        tokenizer = CharTokenizer(text)
        train, valid = train_valid_split(tokenizer.encode(text), valid_fraction=0.1)
        set_seed(0)  # every rank builds the same model; DDP also copies rank 0's parameters to the others
        config = GPTConfig(vocab_size=len(tokenizer), block_size=64, d_model=64, num_heads=4, num_layers=2, d_ff=256)
        model = GPT(config).to(device)
        ddp = DistributedDataParallel(model, device_ids=[device.index] if use_cuda else None)
        optimizer = torch.optim.AdamW(ddp.parameters(), lr=args.lr)
        generator = torch.Generator().manual_seed(0)  # the same global batches on every rank
        started = time.perf_counter()
        for step in range(args.steps):
            inputs, targets = random_windows(train, config.block_size, args.batch_size, generator)  # (batch, T)
            inputs = shard(inputs, rank, world_size).to(device)  # (batch / world_size, T): this rank's slice
            targets = shard(targets, rank, world_size).to(device)
            logits = ddp(inputs)  # (batch / world_size, T, V)
            loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
            optimizer.zero_grad(set_to_none=True)
            loss.backward()  # DDP averages the gradients over the ranks here
            optimizer.step()
            if rank == 0 and (step % 50 == 0 or step == args.steps - 1):
                print(f"step {step:4d}: loss of rank 0's slice {loss.item():.3f}", flush=True)
        seconds = time.perf_counter() - started
        if rank == 0:
            val_loss = evaluate_lm_loss(model, valid, config.block_size, windows=64)
            print(f"val_loss={val_loss:.3f} seconds={seconds:.1f} world_size={world_size} steps={args.steps}")
        dist.barrier()  # no rank leaves while another still talks to it: gloo aborts a process whose peer vanished
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
