"""Training checkpoints: a run saved, loaded in a fresh process's objects and continued equals the run that never
stopped (same machine and setting); a damaged or foreign file is refused by name; a failed save keeps the old one."""

from __future__ import annotations

import os
import random

import numpy as np
import pytest
import torch

from transformer_lib import (
    GPT,
    CharTokenizer,
    DamagedFileError,
    GPTConfig,
    LMTrainingState,
    load_training_checkpoint,
    save_training_checkpoint,
    set_seed,
    train_gpt,
    train_valid_split,
    zen_of_python,
)

SETTINGS = {"batch_size": 8, "lr": 3e-3, "eval_every": 10, "eval_windows": 4, "seed": 2}


@pytest.fixture(scope="module")
def splits():
    tokenizer = CharTokenizer(zen_of_python())
    return len(tokenizer), *train_valid_split(tokenizer.encode(zen_of_python()), 0.2)


def fresh_model(vocab_size: int) -> GPT:
    set_seed(0)  # every global generator, so both runs start from the same states
    return GPT(GPTConfig(vocab_size, block_size=16, d_model=16, num_heads=2, num_layers=1, d_ff=32))


def test_a_run_saved_loaded_and_continued_equals_the_run_that_never_stopped(splits, tmp_path):
    vocab_size, train, valid = splits
    whole_model = fresh_model(vocab_size)
    whole = train_gpt(whole_model, train, 30, valid, **SETTINGS)
    after_whole = torch.rand(3), np.random.rand(), random.random()

    first, state = fresh_model(vocab_size), LMTrainingState()
    train_gpt(first, train, 13, valid, state=state, **SETTINGS)
    save_training_checkpoint(tmp_path / "run.pt", first, state)
    torch.manual_seed(123), np.random.seed(123), random.seed(123)  # a new session's generators
    del first, state
    model, state = load_training_checkpoint(tmp_path / "run.pt")
    continued = train_gpt(model, train, 30, valid, state=state, **SETTINGS)

    assert (continued.step_loss, continued.eval_steps, continued.valid_loss) == (whole.step_loss, whole.eval_steps,
                                                                                whole.valid_loss)
    for name, tensor in whole_model.state_dict().items():
        assert torch.equal(model.state_dict()[name], tensor), name
    after_continued = torch.rand(3), np.random.rand(), random.random()
    assert torch.equal(after_continued[0], after_whole[0]) and after_continued[1:] == after_whole[1:]


@pytest.fixture
def saved(splits, tmp_path):
    vocab_size, train, valid = splits
    model, state = fresh_model(vocab_size), LMTrainingState()
    train_gpt(model, train, 3, state=state, **SETTINGS)
    path = tmp_path / "run.pt"
    save_training_checkpoint(path, model, state)
    return path, model, state


@pytest.mark.parametrize("damage, message", [
    ("truncated", "is truncated or corrupt"),
    ("one byte flipped", "is truncated or corrupt"),
    ("another kind of file", "is not a transformer-course training checkpoint 1 file"),
    ("a plain torch.save", "is not a transformer-course training checkpoint 1 file"),
])
def test_a_damaged_or_foreign_file_is_refused_by_name(saved, damage, message):
    path, model, _ = saved
    blob = path.read_bytes()
    if damage == "a plain torch.save":
        torch.save({"state_dict": model.state_dict()}, path)
    else:
        path.write_bytes({"truncated": blob[: len(blob) // 2],
                          "one byte flipped": blob[:-50] + bytes([blob[-50] ^ 1]) + blob[-49:],
                          "another kind of file": b"transformer-course model cache 1\n" + blob[41:]}[damage])
    with pytest.raises(DamagedFileError, match=message) as refused:
        load_training_checkpoint(path)
    assert str(path) in str(refused.value)


def test_a_save_that_fails_midway_leaves_the_old_file(saved, monkeypatch):
    path, model, state = saved
    before = path.read_bytes()

    def crash(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", crash)
    with torch.no_grad():
        next(model.parameters()).add_(1.0)
    with pytest.raises(OSError, match="disk full"):
        save_training_checkpoint(path, model, state)
    assert path.read_bytes() == before
    load_training_checkpoint(path)  # still whole


def test_a_missing_file_says_so():
    with pytest.raises(FileNotFoundError):
        load_training_checkpoint("no/such/run.pt")
