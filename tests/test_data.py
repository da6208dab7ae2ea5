"""The generated translation task: grammar rules, vocabularies, disjoint splits and padded batches; and lesson 11's
character-level text: corpora shipped with Python, the tokenizer, the held-out split and the windows."""

import hashlib
import importlib
import json

import numpy as np
import pytest
import torch

from transformer_lib.data import (
    BOS,
    EOS,
    PAD,
    CharTokenizer,
    Vocabulary,
    check_token_ids,
    distinct_indices,
    make_sentence_pair,
    make_translation_task,
    pad_sequences,
    python_docs,
    random_windows,
    train_valid_split,
    zen_of_python,
)

# CPython 3.11.7's help topics, joined: the text every lesson model is trained on (3.12's differ)
PYTHON_DOCS_SHA256 = "37d06970fc926e60c16dff401e441b84752446a36b6b64516c229fdec77e992c"
# Lessons 09 and 10's task (seed 0), every split as JSON: the draw numpy's Generator.choice made when it was written
LESSON_TASK_SHA256 = "2dc4f07e497b541d8275626da5ae20987ea2754ceb13297cd2ffcb7e80b309f9"


def test_vocabulary_reserves_special_ids_and_round_trips():
    vocab = Vocabulary(["b", "a"])
    assert vocab.tokens[:3] == [PAD, BOS, EOS]
    ids = vocab.encode(["a", "b"], add_bos=True)
    assert ids == [1, 3, 4, 2]
    assert vocab.decode(ids + [0, 0]) == ["a", "b"]


def test_target_puts_the_verb_last_and_reverses_adjectives():
    rng = np.random.default_rng(3)
    for _ in range(50):
        source, target = make_sentence_pair(rng)
        assert len(source) == len(target)
        assert target[-1] in {"sieht", "sehen", "mag", "mogen", "folgt", "folgen", "findet", "finden",
                               "hort", "horen", "jagt", "jagen"}
    source, target = make_sentence_pair(np.random.default_rng(0))
    assert set(source).isdisjoint(target)


def test_splits_are_disjoint_and_sized():
    task = make_translation_task(num_train=300, num_valid=50, num_test=80, seed=1)
    sources = [{tuple(s) for s, _ in split} for split in (task.train, task.valid, task.test)]
    assert [len(s) for s in sources] == [300, 50, 80]
    assert not (sources[0] & sources[2]) and not (sources[0] & sources[1]) and not (sources[1] & sources[2])


def test_distinct_indices_are_numpys_choice_without_replacement_and_leave_the_generator_alike():
    for seed in range(5):
        ours, numpys = np.random.default_rng(seed), np.random.default_rng(seed)
        for n in (3, 4, 17, 1000):
            for count in (0, 1, 2, 3, 2, 1, 2):
                assert distinct_indices(ours, n, count) == numpys.choice(n, size=count, replace=False).tolist()
        assert ours.integers(2**62) == numpys.integers(2**62)  # the same state after every draw


def test_the_lessons_task_is_the_draw_it_always_was():
    task = make_translation_task(seed=0)
    splits = json.dumps([task.train, task.valid, task.test, task.unseen])
    assert hashlib.sha256(splits.encode()).hexdigest() == LESSON_TASK_SHA256


def test_same_seed_same_task():
    assert make_translation_task(100, 10, 10, seed=4).test == make_translation_task(100, 10, 10, seed=4).test


def test_batches_are_padded_and_framed():
    task = make_translation_task(num_train=64, num_valid=8, num_test=8)
    src, tgt = next(task.batches("train", 16))
    assert src.shape[0] == tgt.shape[0] == 16
    assert (tgt[:, 0] == task.tgt_vocab.bos_id).all()
    assert ((src == task.src_vocab.eos_id).sum(1) == 1).all() and ((tgt == task.tgt_vocab.eos_id).sum(1) == 1).all()
    assert torch.equal(pad_sequences([[5], [6, 7, 8]], 0), torch.tensor([[5, 0, 0], [6, 7, 8]]))


def test_check_token_ids_accepts_ids_in_range_and_names_each_problem():
    check_token_ids(torch.tensor([[0, 4]]), 5)
    check_token_ids(torch.tensor([[0, 4]], dtype=torch.int32), 5)
    problems = [
        ([[1, 2]], TypeError, r"tokens must be a torch.Tensor .* got list: wrap the ids with torch.tensor"),
        (torch.tensor([[1.0]]), TypeError, r"integer token ids \(int64 or int32\), got dtype torch.float32"),
        (torch.tensor([[True]]), TypeError, "got dtype torch.bool"),
        (torch.tensor([1, 2]), ValueError, r"shaped \(batch, T\), got shape \(2,\)"),
        (torch.zeros(1, 0, dtype=torch.long), ValueError, r"tokens is empty, shape \(1, 0\)"),
        (torch.tensor([[5]]), ValueError, r"token id 5 in tokens is outside the vocabulary of 5 tokens \(valid ids "
                                          r"are 0 … 4\): encode with the same vocabulary"),
        (torch.tensor([[-1, 2]]), ValueError, "token id -1 in tokens is outside the vocabulary"),
    ]
    for tokens, error, message in problems:
        with pytest.raises(error, match=message):
            check_token_ids(tokens, 5)


def test_zen_of_python_is_the_text_of_import_this(capsys):
    text = zen_of_python()
    assert text.startswith("The Zen of Python, by Tim Peters")
    assert capsys.readouterr().out == ""  # importing `this` printed nothing into the caller's output


def test_python_docs_is_the_stored_snapshot_on_every_python(monkeypatch):
    """The same characters whatever Python runs the course: the running Python's own help topics are never read."""
    real_import = importlib.import_module

    def no_pydoc_data(name, *args):
        if name.startswith("pydoc_data"):
            raise ModuleNotFoundError(f"No module named {name!r}")
        return real_import(name, *args)

    monkeypatch.setattr(importlib, "import_module", no_pydoc_data)
    text = python_docs()
    assert len(text) == 464_970 and "Assignment statements" in text
    assert hashlib.sha256(text.encode()).hexdigest() == PYTHON_DOCS_SHA256


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
