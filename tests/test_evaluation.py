"""Lesson 11's language-model measurements: the baselines that count characters, and a model's mean loss on fixed
windows of a split. (The translator's chrF is tested with the other training pieces in ``test_training.py``.)"""

import math

import pytest
import torch

from transformer_lib.data import random_windows
from transformer_lib.evaluation import (
    baseline_losses,
    bigram_probabilities,
    bleu,
    evaluate_lm_loss,
    unigram_probabilities,
)
from transformer_lib.gpt import GPT, GPTConfig


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
    torch.manual_seed(0)
    model = GPT(GPTConfig(10, block_size=16, d_model=32, num_heads=2, num_layers=2, d_ff=64))
    data = torch.randint(10, (200,), generator=torch.Generator().manual_seed(2))
    first, again = evaluate_lm_loss(model, data, 16, windows=5, batch_size=2), evaluate_lm_loss(model, data, 16, 5)
    # float32 means over 80 positions, batched differently, then by one forward pass: they differ by about 1e-7
    # relative; 1e-4 is far above that and far below what other windows would change (1e-2)
    assert first == pytest.approx(again, rel=1e-4)  # the same windows, whatever the batch size
    inputs, targets = random_windows(data, 16, 5, torch.Generator().manual_seed(1234))
    with torch.no_grad():
        expected = torch.nn.functional.cross_entropy(model(inputs).flatten(0, 1), targets.flatten()).item()
    assert first == pytest.approx(expected, rel=1e-4)


def test_bleu_on_hand_computed_examples():
    reference = "den mause alt der bar alt horen".split()
    dropped = "den mause der bar alt horen".split()  # one adjective left out
    # n-gram precisions 6/6, 4/5, 2/4, 1/3; brevity penalty exp(1 - 7/6)
    by_hand = 100 * math.exp(1 - 7 / 6) * (1 * 4 / 5 * 2 / 4 * 1 / 3) ** 0.25
    assert math.isclose(bleu([dropped], [reference]), by_hand)
    assert bleu([reference], [reference]) == 100.0
    assert math.isclose(bleu([["der"] * 4], [["der", "hund"]], max_n=1), 100 * 1 / 4)  # clipped: "der" counts once
    longer = [*reference, "alt"]  # longer than the reference: no brevity penalty, precisions 7/8, 6/7, 5/6, 4/5
    assert math.isclose(bleu([longer], [reference]), 100 * (7 / 8 * 6 / 7 * 5 / 6 * 4 / 5) ** 0.25)
    assert bleu([["der", "hund"]], [["der", "hund"]]) == 0.0  # no 3-gram at all: no smoothing, the score is 0
    corpus = bleu([dropped, reference], [reference, reference])  # counts are summed over the corpus, then combined
    assert math.isclose(corpus, 100 * math.exp(1 - 14 / 13) * (13 / 13 * 10 / 11 * 7 / 9 * 5 / 7) ** 0.25)
    with pytest.raises(ValueError, match="2 hypotheses but 1 references"):
        bleu([["a"], ["b"]], [["a"]])
