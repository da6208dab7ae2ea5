"""Data-parallel training: slices of a batch, every rank of 2 processes equal to 1 process over several AdamW steps
(float64, a tolerance), and the torchrun script."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bounds import bound
from transformer_lib import GPT, GPTConfig, random_windows, set_seed
from transformer_lib.distributed import shard, train_data_parallel, train_steps

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "train_ddp.py"


def test_shard_splits_a_batch_into_equal_slices():
    batch = torch.arange(12).reshape(6, 2)
    assert torch.equal(torch.cat([shard(batch, rank, 3) for rank in range(3)]), batch)
    with pytest.raises(ValueError, match="divisible by 4"):
        shard(batch, 0, 4)


def test_every_rank_takes_the_steps_of_one_process_on_the_whole_batch():
    """3 AdamW steps: every rank's parameters equal one process's on the whole batch, by hand and with DDP."""
    set_seed(0)
    model = GPT(GPTConfig(vocab_size=20, block_size=16, d_model=16, num_heads=2, num_layers=1, d_ff=32)).double()
    data = torch.randint(20, (500,), generator=torch.Generator().manual_seed(0))
    generator = torch.Generator().manual_seed(1)
    windows = [random_windows(data, 16, 8, generator) for _ in range(3)]  # 3 steps of a global batch of 8
    inputs, targets = torch.stack([w[0] for w in windows]), torch.stack([w[1] for w in windows])  # (3, 8, 16)
    results = train_data_parallel(model, inputs, targets, lr=1e-2, world_size=2)
    one_process = GPT(model.config).double()
    one_process.load_state_dict(model.state_dict())
    train_steps(one_process, inputs, targets, 1e-2)
    for method in ("manual", "ddp"):
        assert len(results[method].seconds) == 3 and len(results[method].state_dicts) == 2
        for rank_state in results[method].state_dicts:
            for name, parameter in one_process.state_dict().items():
                torch.testing.assert_close(rank_state[name], parameter, rtol=1e-10, atol=1e-12)
        moved = max((results[method].state_dicts[1][n] - p).abs().max().item() for n, p in model.state_dict().items())
        assert moved > 1e-3  # the steps really changed the parameters (AdamW moves each by about lr per step)
    tensors = len(list(model.parameters()))
    assert results["manual"].all_reduces == [tensors] * 3  # by hand: one all-reduce per parameter tensor
    assert all(0 < calls < tensors for calls in results["ddp"].all_reduces)  # DDP: one per bucket
    with pytest.raises(ValueError, match="unknown methods"):
        train_data_parallel(model, inputs, targets, 0.5, methods=("allgather",))
    with pytest.raises(ValueError, match="unknown optimizer"):
        train_data_parallel(model, inputs, targets, 0.5, optimizer="lamb")


@pytest.mark.trained
def test_the_torchrun_script_trains_on_two_processes():
    """The script trains with its own fixed seed (it takes no --seed): the bound is recorded without one."""
    finished = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", str(SCRIPT),
         "--steps", "3", "--batch-size", "4"],
        capture_output=True, text=True, timeout=300,
    )
    assert finished.returncode == 0, finished.stderr[-3000:]
    values = dict(pair.split("=", 1) for pair in finished.stdout.strip().splitlines()[-1].split())
    assert values["world_size"] == "2" and values["steps"] == "3" and float(values["val_loss"]) > 0
    bound("held-out loss after 3 steps", float(values["val_loss"]), at_most=6)
