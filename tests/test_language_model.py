"""Lesson 11's text pipeline: corpora shipped with Python, the tokenizer, the held-out split, the baselines, the
training loop and its evaluation."""

import importlib
import math

import pytest
import torch

from transformer_lib.gpt import GPT, GPTConfig
from transformer_lib.lm_evaluation import (
    baseline_losses,
    bigram_probabilities,
    evaluate_lm_loss,
    unigram_probabilities,
)
from transformer_lib.lm_training import LMHistory, train_gpt
from transformer_lib.text_data import CharTokenizer, python_docs, random_windows, train_valid_split, zen_of_python


def _small_gpt(vocab_size: int) -> GPT:
    torch.manual_seed(0)
    return GPT(GPTConfig(vocab_size, block_size=16, d_model=32, num_heads=2, num_layers=2, d_ff=64))


def test_zen_of_python_is_the_text_of_import_this(capsys):
    text = zen_of_python()
    assert text.startswith("The Zen of Python, by Tim Peters")
    assert capsys.readouterr().out == ""  # importing `this` printed nothing into the caller's output


def test_python_docs_is_long_real_text():
    text = python_docs()
    assert len(text) > 300_000 and "Assignment statements" in text


def test_python_docs_without_pydoc_data_says_what_to_do(monkeypatch):
    real_import = importlib.import_module

    def no_pydoc_data(name, *args):
        if name.startswith("pydoc_data"):
            raise ModuleNotFoundError(f"No module named {name!r}")
        return real_import(name, *args)

    monkeypatch.setattr(importlib, "import_module", no_pydoc_data)
    with pytest.raises(ImportError, match="no pydoc_data module .* train on zen_of_python"):
        python_docs()


def test_tokenizer_round_trip_and_unknown_characters():
    tokenizer = CharTokenizer(zen_of_python())
    text = "Simple is better than complex."
    assert tokenizer.decode(tokenizer.encode(text)) == text
    with pytest.raises(ValueError, match="not in the vocabulary"):
        tokenizer.encode("€")


def test_the_held_out_split_is_the_contiguous_end():
    train, valid = train_valid_split(torch.arange(100), valid_fraction=0.1)
    assert train.tolist() == list(range(90)) and valid.tolist() == list(range(90, 100))
    with pytest.raises(ValueError, match="valid_fraction=1.0 must be between 0 and 1"):
        train_valid_split(torch.arange(10), 1.0)


def test_windows_are_shifted_by_one():
    inputs, targets = random_windows(torch.arange(100), 8, 4, torch.Generator().manual_seed(0))
    assert inputs.shape == targets.shape == (4, 8)
    assert torch.equal(targets, inputs + 1)
    with pytest.raises(ValueError, match=r"N > block_size=16 .* got shape \(16,\): pass a longer text"):
        random_windows(torch.zeros(16, dtype=torch.long), 16, 1, torch.Generator())


def test_baselines_count_as_by_hand():
    train = torch.tensor([0, 1, 0, 1, 0, 2])  # pairs 0→1 twice, 1→0 twice, 0→2 once
    valid = torch.tensor([0, 1, 2])
    unigram = unigram_probabilities(train, 3)
    torch.testing.assert_close(unigram, torch.tensor([4, 3, 2], dtype=torch.float64) / 9)  # counts + 1
    bigram = bigram_probabilities(train, 3)
    torch.testing.assert_close(bigram.sum(dim=1), torch.ones(3, dtype=torch.float64))
    assert bigram[0, 1] == pytest.approx(3 / 6) and bigram[1, 2] == pytest.approx(1 / 5)
    losses = baseline_losses(train, valid, 3)
    assert losses["uniform"] == pytest.approx(math.log(3))
    assert losses["unigram"] == pytest.approx(-(math.log(4 / 9) + math.log(3 / 9) + math.log(2 / 9)) / 3)
    assert losses["bigram"] == pytest.approx(-(math.log(3 / 6) + math.log(1 / 5)) / 2)


def test_evaluation_uses_fixed_windows_and_the_mean_loss():
    model = _small_gpt(10)
    data = torch.randint(10, (200,), generator=torch.Generator().manual_seed(2))
    first, again = evaluate_lm_loss(model, data, 16, windows=5, batch_size=2), evaluate_lm_loss(model, data, 16, 5)
    assert first == pytest.approx(again, rel=1e-6)  # the same windows, whatever the batch size
    inputs, targets = random_windows(data, 16, 5, torch.Generator().manual_seed(1234))
    with torch.no_grad():
        expected = torch.nn.functional.cross_entropy(model(inputs).flatten(0, 1), targets.flatten()).item()
    assert first == pytest.approx(expected, rel=1e-5)


def test_training_lowers_the_loss_is_repeatable_and_measures_both_splits():
    tokenizer = CharTokenizer(zen_of_python())
    train, valid = train_valid_split(tokenizer.encode(zen_of_python()), 0.2)
    runs = [train_gpt(_small_gpt(len(tokenizer)), train, 60, valid, batch_size=16, lr=3e-3, eval_every=20,
                      eval_windows=4) for _ in range(2)]
    assert runs[0].step_loss == runs[1].step_loss
    assert runs[0].eval_steps == [0, 20, 40, 60] and len(runs[0].valid_loss) == len(runs[0].train_loss) == 4
    assert runs[0].train_loss[-1] < 0.8 * runs[0].train_loss[0]


def test_train_gpt_needs_more_data_than_one_block():
    with pytest.raises(ValueError, match=r"N > block_size=16 .* got shape \(16,\): pass a longer text"):
        train_gpt(_small_gpt(10), torch.zeros(16, dtype=torch.long), steps=1)


def test_the_best_step_is_where_the_held_out_loss_is_lowest():
    history = LMHistory(eval_steps=[0, 100, 200], train_loss=[3.0, 2.0, 1.0], valid_loss=[3.1, 2.2, 2.4])
    assert history.best_step() == 100
    with pytest.raises(ValueError, match="no held-out loss was measured"):
        LMHistory().best_step()
