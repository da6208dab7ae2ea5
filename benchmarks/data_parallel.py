"""Data-parallel training steps on 2 processes against 1, with the same global batches, side by side.

Each run starts its processes with ``transformer_lib.distributed.train_data_parallel`` (gloo, CPU) and takes plain
SGD steps of lesson 11's character GPT (4 blocks of width 128, context 64) with ``DistributedDataParallel``. The
cores are shared fairly: 1 process uses all of them as torch threads, 2 processes half each. The step time is the
median over the steps after the first (which includes DDP's set-up); the ratio compares 2 processes with 1, each
taking the whole global batch of 32 windows per step (each of the 2 takes 16).

Last line: ``step_ratio=<2-process step time / 1-process step time> …`` (below 1: the 2 processes are faster).
Run: ``python benchmarks/data_parallel.py`` or ``--quick`` (3 steps of a tiny model, a smoke test).
"""

from __future__ import annotations

import argparse
import os
import statistics

import torch

from transformer_lib import GPT, GPTConfig, random_windows, set_seed
from transformer_lib.distributed import train_data_parallel


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 steps of a tiny model (a smoke test)")
    args = parser.parse_args()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    set_seed(0)
    if args.quick:
        config = GPTConfig(vocab_size=50, block_size=16, d_model=16, num_heads=2, num_layers=1, d_ff=32)
        steps, batch = 3, 4
    else:
        config = GPTConfig(vocab_size=103, block_size=64, d_model=128, num_heads=4, num_layers=4, d_ff=512)
        steps, batch = 30, 32
    model = GPT(config)
    data = torch.randint(config.vocab_size, (10_000,), generator=torch.Generator().manual_seed(0))
    generator = torch.Generator().manual_seed(1)
    windows = [random_windows(data, config.block_size, batch, generator) for _ in range(steps)]
    inputs, targets = torch.stack([w[0] for w in windows]), torch.stack([w[1] for w in windows])  # (steps, batch, T)
    step_s = {}
    for world_size in (1, 2):
        threads = max(1, cores // world_size)
        result = train_data_parallel(model, inputs, targets, lr=0.1, world_size=world_size, methods=("ddp",),
                                     optimizer="sgd", threads=threads)["ddp"]
        step_s[world_size] = statistics.median(result.seconds[1:])
        print(f"{world_size} process(es) x {threads} thread(s): {step_s[world_size] * 1e3:.1f} ms per step "
              f"(median of {steps - 1})")
    print(f"step_ratio={step_s[2] / step_s[1]:.2f} one_process_ms={step_s[1] * 1e3:.1f} "
          f"two_processes_ms={step_s[2] * 1e3:.1f} steps={steps} batch={batch} cores={cores} device=cpu")


if __name__ == "__main__":
    main()
