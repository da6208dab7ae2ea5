"""The model cache: a recipe loaded from the cache gives what training gives (weights, history, random number
generators, a notebook's printed outputs); a truncated or corrupt file is retrained; two processes that race
train once."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass

import nbformat
import numpy as np
import pytest
import torch
from nbclient import NotebookClient
from torch import nn

from course_tools import MODEL_CACHE_VARIABLE
from transformer_lib import CharTokenizer, GPTConfig, data, make_translation_task, python_docs, recipes, train_char_gpt
from transformer_lib.model_cache import (
    CACHE_VARIABLE,
    LAST_BITS_VARIABLE,
    cache_folder,
    cached_text,
    cached_training,
)

V = len(CharTokenizer(python_docs()))
TINY = GPTConfig(vocab_size=V, block_size=16, d_model=16, num_heads=2, num_layers=1, d_ff=32)


def tiny_run(steps: int = 3):
    return train_char_gpt(steps, torch.device("cpu"), config=TINY, batch_size=4)


def draws() -> tuple:
    """What a lesson's next random step would draw from each generator."""
    return torch.rand(4).tolist(), np.random.rand(3).tolist(), random.random()


@pytest.fixture
def cache(monkeypatch, tmp_path):
    monkeypatch.setenv(CACHE_VARIABLE, str(tmp_path))
    return tmp_path


def forbid_training(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("trained although the run was cached")

    monkeypatch.setattr(recipes, "train_gpt", refuse)


def test_the_library_and_the_course_tools_name_the_same_variable(monkeypatch, tmp_path):
    assert CACHE_VARIABLE == MODEL_CACHE_VARIABLE
    monkeypatch.setenv(CACHE_VARIABLE, str(tmp_path))
    assert cache_folder() == tmp_path
    monkeypatch.delenv(CACHE_VARIABLE)
    assert cache_folder().parts[-2:] == ("build", "model-cache")  # git-ignored, beside the library


def test_a_cached_run_gives_what_training_gave(cache, monkeypatch):
    cold = tiny_run()
    after_cold = draws()
    assert len(list(cache.glob("char-gpt-*.pt"))) == 1
    forbid_training(monkeypatch)
    warm = tiny_run()
    after_warm = draws()
    assert warm.history == cold.history  # the very history of the run, its seconds included
    assert warm.model.training == cold.model.training
    for name, tensor in cold.model.state_dict().items():
        assert torch.equal(warm.model.state_dict()[name], tensor), name
    assert after_warm == after_cold  # every generator left where training leaves it


def test_a_longer_run_goes_on_from_the_longest_shorter_one_cached(cache, monkeypatch):
    tiny_run(steps=2)
    tiny_run(steps=4)
    started_at = []
    original = recipes.train_gpt

    def recording(model, train, steps, *args, state, **kwargs):
        started_at.append(state.step)
        return original(model, train, steps, *args, state=state, **kwargs)

    monkeypatch.setattr(recipes, "train_gpt", recording)
    continued = tiny_run(steps=6)
    assert started_at == [4]  # not from 2, not from 0
    monkeypatch.setenv(CACHE_VARIABLE, str(cache / "empty"))
    uninterrupted = tiny_run(steps=6)
    assert started_at == [4, 0]
    assert continued.history.step_loss == uninterrupted.history.step_loss
    assert continued.history.valid_loss == uninterrupted.history.valid_loss
    for name, tensor in uninterrupted.model.state_dict().items():
        assert torch.equal(continued.model.state_dict()[name], tensor), name


@dataclass
class Draws:
    values: list[float]


def test_a_run_that_draws_random_numbers_leaves_every_generator_as_training_does(cache, monkeypatch):
    """Dropout or sampling during training moves the global generators: a load must move them alike."""

    def build() -> nn.Module:
        torch.manual_seed(0)
        return nn.Linear(3, 2)

    def train(model: nn.Module) -> Draws:
        with torch.no_grad():
            model.weight += torch.randn(2, 3)
        return Draws([float(np.random.rand()), random.random()])

    def run():
        return cached_training("draws", {}, build, train, Draws, torch.device("cpu"))

    cold_model, cold_draws = run()
    after_cold = draws()
    warm_model, warm_draws = run()
    assert draws() == after_cold and warm_draws == cold_draws
    assert torch.equal(warm_model.weight, cold_model.weight)


def test_other_arguments_or_settings_are_other_runs(cache, monkeypatch):
    tiny_run(steps=2)
    tiny_run(steps=3)
    other_rounding = "" if os.environ.get(LAST_BITS_VARIABLE) == "1" else "1"  # the test command's two roundings
    monkeypatch.setenv(LAST_BITS_VARIABLE, other_rounding)
    tiny_run(steps=3)
    threads = torch.get_num_threads()
    torch.set_num_threads(threads + 1)
    try:
        tiny_run(steps=3)
    finally:
        torch.set_num_threads(threads)
    assert len(list(cache.glob("char-gpt-*.pt"))) == 4


@pytest.mark.parametrize("damage", ["truncated", "one byte flipped", "not a cache file", "empty"])
def test_a_damaged_file_is_trained_again_not_trusted(cache, damage):
    reference = tiny_run()
    [path] = cache.glob("char-gpt-*.pt")
    blob = path.read_bytes()
    path.write_bytes({
        "truncated": blob[: len(blob) // 2],
        "one byte flipped": blob[:-100] + bytes([blob[-100] ^ 1]) + blob[-99:],
        "not a cache file": b"PK\x03\x04" + blob[4:],
        "empty": b"",
    }[damage])
    again = tiny_run()
    assert again.history != reference.history  # trained again: another wall-clock time
    assert again.history.step_loss == reference.history.step_loss  # ... and the same numbers
    assert path.read_bytes() != b"" and tiny_run().history == again.history  # the file is whole again


RACER = textwrap.dedent("""
    import hashlib, sys, torch
    from transformer_lib import CharTokenizer, GPTConfig, python_docs, train_char_gpt
    from transformer_lib.model_cache import cache_folder
    cold = not any(cache_folder().glob("char-gpt-*.pt"))
    V = len(CharTokenizer(python_docs()))
    config = GPTConfig(vocab_size=V, block_size=16, d_model=16, num_heads=2, num_layers=1, d_ff=32)
    run = train_char_gpt(60, torch.device("cpu"), config=config, batch_size=4)
    digest = hashlib.sha256(b"".join(t.numpy().tobytes() for t in run.model.state_dict().values())).hexdigest()
    print(cold, digest, repr(run.history.seconds))  # the same seconds in two processes: one trained, one loaded
""")


def test_two_processes_asking_for_the_same_run_at_once_train_it_once(cache):
    env = {**os.environ, CACHE_VARIABLE: str(cache)}
    racers = [subprocess.Popen([sys.executable, "-c", RACER], env=env, stdout=subprocess.PIPE, text=True)
              for _ in range(2)]
    results = [racer.communicate(timeout=300)[0].split() for racer in racers]
    assert all(racer.returncode == 0 for racer in racers)
    assert [cold for cold, _, _ in results] == ["True", "True"]  # both started before either had stored the run
    assert results[0][1] == results[1][1]  # the same weights
    if os.name == "posix":  # the other waited for the lock, then loaded: the same recorded training time
        assert results[0][2] == results[1][2]
    stored = [path.name for path in cache.iterdir() if path.suffix != ".lock"]
    assert stored == [next(cache.glob("char-gpt-*.pt")).name]  # no temporary left
    loaded = subprocess.run([sys.executable, "-c", RACER], env=env, stdout=subprocess.PIPE, text=True, check=True)
    assert loaded.stdout.split()[:2] == ["False", results[0][1]]  # the stored file is whole


LESSON_LIKE = [
    "import torch\nfrom transformer_lib import CharTokenizer, GPTConfig, python_docs, train_char_gpt\n"
    "from transformer_lib.decoding import generate, sampling_picker\n"
    "V = len(CharTokenizer(python_docs()))\n"
    "config = GPTConfig(vocab_size=V, block_size=16, d_model=16, num_heads=2, num_layers=1, d_ff=32)\n"
    "run = train_char_gpt(20, torch.device('cpu'), config=config, batch_size=4)\n"
    "print(repr(run.history.seconds))  # the same float twice only if the second run loaded the first",
    "print([round(loss, 4) for loss in run.history.step_loss[-3:]])",
    "prompt = run.tokenizer.encode('def ')[None]  # (1, T)\n"
    "print(repr(run.tokenizer.decode(generate(run.model, prompt, 20, sampling_picker())[0])))  # global generator\n"
    "print(torch.rand(3))",
]


def executed_outputs(cache) -> list[str]:
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in LESSON_LIKE])
    client = NotebookClient(notebook, timeout=300, kernel_name="python3")
    client.execute()
    return ["".join(output.get("text", "") for output in cell.outputs) for cell in notebook.cells]


def test_a_notebook_prints_the_same_with_an_empty_and_a_full_cache(cache):
    cold = executed_outputs(cache)
    assert list(cache.glob("char-gpt-*.pt"))
    warm = executed_outputs(cache)
    assert warm == cold
    assert float(cold[0]) > 0  # a real training time, loaded the second time (the same float to the last digit)


def test_generated_text_is_made_once_per_cache_and_again_when_damaged_or_asked_otherwise(cache):
    made = []

    def make(text: str) -> Callable[[], str]:
        return lambda: made.append(text) or text

    assert cached_text("pairs", {"seed": 0}, make("a\tb")) == "a\tb"
    assert cached_text("pairs", {"seed": 0}, make("other")) == "a\tb" and made == ["a\tb"]  # loaded, not made
    assert cached_text("pairs", {"seed": 1}, make("c\td")) == "c\td" and made == ["a\tb", "c\td"]
    for path in cache.glob("pairs-*.pt"):
        path.write_bytes(path.read_bytes()[:-10])  # truncated: made again, never half loaded
    assert cached_text("pairs", {"seed": 0}, make("a\tb")) == "a\tb" and made == ["a\tb", "c\td", "a\tb"]


def test_the_translation_task_from_the_cache_is_the_one_drawn(cache):
    def splits(task):
        return task.train, task.valid, task.test, task.unseen, task.src_vocab.tokens, task.tgt_vocab.tokens

    data._drawn_pairs.cache_clear()  # this process's copy: the first call below draws and stores
    drawn = splits(make_translation_task(num_train=300, num_valid=20, num_test=30, num_unseen=40, seed=5))
    assert any(cache.glob("translation-pairs-*.pt"))
    data._drawn_pairs.cache_clear()  # the next call reads the stored text
    assert splits(make_translation_task(num_train=300, num_valid=20, num_test=30, num_unseen=40, seed=5)) == drawn
