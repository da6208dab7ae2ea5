"""Data-parallel training on several processes with ``torch.distributed``: one model copy per process, one slice of
every batch each, the gradients averaged before each step.

Every process (a *rank*, 0 … world_size - 1) holds the same parameters, takes its own slice of the global batch
(:func:`shard`), computes the mean loss of its slice and its gradient. Averaging those gradients over the ranks gives
the gradient of the mean loss over the whole batch (the slices have equal size), so after the same optimiser step
every copy holds the parameters one process would reach on the whole batch. The average is written by hand in
:func:`average_gradients` (an *all-reduce*, ``dist.all_reduce``, sums a tensor over the ranks and leaves the sum, in
place, on every rank), and PyTorch's ``DistributedDataParallel`` does the same inside ``backward``: it groups the
gradients into *buckets* (up to 25 MiB each, in the reverse order of the parameters) and all-reduces a bucket as soon
as all its gradients are computed. Backward computes the last layers' gradients first, so their buckets travel while
the earlier layers' gradients are still being computed.

The worker :func:`data_parallel_worker` is a function of this module, not of a notebook: ``torch.multiprocessing``
starts fresh Python processes (the "spawn" method), which must import it. :func:`train_data_parallel` starts them
from a lesson; ``scripts/train_ddp.py`` does the same training under ``torchrun``. The backend is gloo, which runs on
the CPU everywhere; the processes meet through a file in a temporary folder, so no network port is needed.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel

from .gpt import GPT, GPTConfig

METHODS = ("manual", "ddp")  # the gradient average by hand, or by DistributedDataParallel


def shard(batch: torch.Tensor, rank: int, world_size: int) -> torch.Tensor:
    """Rank ``rank``'s slice of a global batch (batch, …): rows ``rank · b`` … ``(rank + 1) · b - 1``, b = batch /
    world_size. The batch must split evenly, so that the mean of the slices' mean losses is the batch's mean loss."""
    if batch.shape[0] % world_size:
        raise ValueError(f"a global batch of {batch.shape[0]} rows does not split evenly over world_size="
                         f"{world_size} processes: use a batch size divisible by {world_size}")
    size = batch.shape[0] // world_size
    return batch[rank * size : (rank + 1) * size]


def average_gradients(model: nn.Module, world_size: int) -> int:
    """Replace every gradient by its mean over the ranks: ``all_reduce`` (a sum, in place, on every rank), then
    divide by ``world_size``. Call it on every rank after ``backward`` and before the optimiser step. Returns the
    number of all-reduce calls (one per parameter tensor)."""
    calls = 0
    for parameter in model.parameters():
        if parameter.grad is not None:
            dist.all_reduce(parameter.grad, op=dist.ReduceOp.SUM)  # every rank now holds the sum
            parameter.grad /= world_size
            calls += 1
    return calls


def counting_allreduce_hook(calls: list[int], bucket):  # noqa: ANN001, ANN201 (DDP refuses string annotations)
    """A DDP communication hook that does what DDP does by default (divide a ``dist.GradBucket`` by the world size,
    all-reduce it, return the future) and appends 1 to ``calls`` for each all-reduce, so DDP's calls can be
    counted."""
    calls.append(1)
    return default_hooks.allreduce_hook(None, bucket)


def lm_loss(model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy of ``inputs`` (batch, T) against ``targets`` (batch, T)."""
    logits = model(inputs)  # (batch, T, V)
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


OPTIMIZERS = {"sgd": torch.optim.SGD, "adamw": torch.optim.AdamW}  # plain SGD, or AdamW with its defaults


def make_optimizer(name: str, parameters: Iterable[torch.Tensor], lr: float) -> torch.optim.Optimizer:
    """``"sgd"`` or ``"adamw"`` over ``parameters`` at learning rate ``lr``."""
    if name not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {name!r}: choose from {sorted(OPTIMIZERS)}")
    return OPTIMIZERS[name](parameters, lr=lr)


def train_steps(model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor, lr: float,
                optimizer: str = "adamw") -> list[float]:
    """One process: an optimiser step on each global batch ``inputs[s]``, ``targets[s]`` (steps, batch, T), in
    place. Returns the seconds of each step."""
    optimizer = make_optimizer(optimizer, model.parameters(), lr)
    seconds = []
    for step_inputs, step_targets in zip(inputs, targets, strict=True):
        started = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        lm_loss(model, step_inputs, step_targets).backward()
        optimizer.step()
        seconds.append(time.perf_counter() - started)
    return seconds


@dataclass
class DataParallelJob:
    """What every process of :func:`train_data_parallel` needs: the model to rebuild, the global batches and how to
    average. ``inputs``/``targets``: (steps, batch, T); ``optimizer``: ``"sgd"`` or ``"adamw"``; ``threads``:
    torch threads per process."""

    config: GPTConfig
    state_dict: dict[str, torch.Tensor]
    inputs: torch.Tensor
    targets: torch.Tensor
    lr: float
    methods: tuple[str, ...] = METHODS
    optimizer: str = "adamw"
    threads: int = 1


def data_parallel_worker(rank: int, world_size: int, job: DataParallelJob, folder: str) -> None:
    """The code one process runs (``torch.multiprocessing.spawn`` passes ``rank`` first).

    Joins the gloo process group through a file in ``folder``; for each method, rebuilds the model from
    ``job.state_dict`` and takes one optimiser step per global batch on its :func:`shard`, averaging the gradients
    by hand (``"manual"``: :func:`average_gradients`) or with ``DistributedDataParallel`` (``"ddp"``). Every rank
    saves the parameters it ends with, the seconds and the all-reduce calls of each step to
    ``folder/<method>-<rank>.pt``.
    """
    torch.set_num_threads(job.threads)
    dist.init_process_group("gloo", init_method=f"file://{Path(folder) / 'rendezvous'}", rank=rank,
                            world_size=world_size)
    try:
        dtype = next(iter(job.state_dict.values())).dtype
        for method in job.methods:
            model = GPT(job.config).to(dtype)
            model.load_state_dict(job.state_dict)
            model.train()
            runner = DistributedDataParallel(model) if method == "ddp" else model  # DDP averages inside backward
            ddp_calls: list[int] = []
            if method == "ddp":
                runner.register_comm_hook(ddp_calls, counting_allreduce_hook)
            optimizer = make_optimizer(job.optimizer, model.parameters(), job.lr)
            seconds, all_reduces = [], []
            for step_inputs, step_targets in zip(job.inputs, job.targets, strict=True):
                dist.barrier()  # every rank starts the step together, so the times are the step's
                started = time.perf_counter()
                optimizer.zero_grad(set_to_none=True)
                lm_loss(runner, shard(step_inputs, rank, world_size), shard(step_targets, rank, world_size)).backward()
                calls = average_gradients(model, world_size) if method == "manual" else len(ddp_calls)
                optimizer.step()
                seconds.append(time.perf_counter() - started)
                all_reduces.append(calls)
                ddp_calls.clear()
            torch.save({"state_dict": model.state_dict(), "seconds": seconds, "all_reduces": all_reduces},
                       Path(folder) / f"{method}-{rank}.pt")
        dist.barrier()  # no rank leaves while another still talks to it: gloo aborts a process whose peer vanished
    finally:
        dist.destroy_process_group()


@dataclass
class DataParallelResult:
    """One method's outcome: every rank's parameters after the last step, rank 0's seconds of every step and its
    number of all-reduce calls in every step."""

    state_dicts: list[dict[str, torch.Tensor]]  # one per rank
    seconds: list[float]
    all_reduces: list[int]


def train_data_parallel(
    model: GPT,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    lr: float,
    world_size: int = 2,
    methods: Sequence[str] = METHODS,
    optimizer: str = "adamw",
    threads: int = 1,
) -> dict[str, DataParallelResult]:
    """Train copies of ``model`` (on the CPU) in ``world_size`` processes, one ``optimizer`` step (``"adamw"`` or
    ``"sgd"``) per global batch ``inputs[s]`` (steps, batch, T), once per method in ``methods`` (``"manual"``,
    ``"ddp"``), each from the model's current parameters. ``model`` itself is not changed. Returns each method's
    :class:`DataParallelResult`, with every rank's parameters.

    The processes are started here and finish before it returns (a few seconds to start on a busy machine).
    """
    unknown = set(methods) - set(METHODS)
    if unknown:
        raise ValueError(f"unknown methods {sorted(unknown)}: choose from {METHODS}")
    if optimizer not in OPTIMIZERS:  # refused here, before any process starts
        raise ValueError(f"unknown optimizer {optimizer!r}: choose from {sorted(OPTIMIZERS)}")
    state = {name: tensor.detach().cpu().clone() for name, tensor in model.state_dict().items()}
    job = DataParallelJob(model.config, state, inputs.cpu(), targets.cpu(), lr, tuple(methods), optimizer, threads)
    with tempfile.TemporaryDirectory() as folder:
        mp.spawn(data_parallel_worker, args=(world_size, job, folder), nprocs=world_size, join=True)
        results = {}
        for method in methods:
            saved = [torch.load(Path(folder) / f"{method}-{rank}.pt", weights_only=True) for rank in range(world_size)]
            results[method] = DataParallelResult([s["state_dict"] for s in saved], saved[0]["seconds"],
                                                 saved[0]["all_reduces"])
    return results
