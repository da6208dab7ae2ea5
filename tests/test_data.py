"""The generated translation task: grammar rules, vocabularies, disjoint splits and padded batches."""

import numpy as np
import pytest
import torch

from transformer_lib.data import (
    BOS,
    EOS,
    PAD,
    Vocabulary,
    check_token_ids,
    make_sentence_pair,
    make_translation_task,
    pad_sequences,
)


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
