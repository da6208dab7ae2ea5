"""Lesson 17's measurements (transformer_lib.scoring) against direct computations: every token's loss from its own
window, bytes per token, bits per byte by chunk, the translator's multiple-choice items and their log-probabilities,
the two ways to pick an option, and a membership check's error rates."""

import math

import pytest
import torch
import torch.nn.functional as F

from transformer_lib import (
    GPT,
    CharTokenizer,
    ChoiceItem,
    GPTConfig,
    Transformer,
    best_threshold,
    bits_per_byte,
    chunk_bits_per_byte,
    make_translation_task,
    membership_error_rates,
    option_log_probs,
    pick_by_generation,
    pick_by_log_prob,
    shortest_share,
    three_ways,
    token_byte_counts,
    token_losses,
    train_bpe,
    translation_choices,
    translation_model_config,
)
from transformer_lib.data import ADJECTIVES

# Characters of 1, 2, 3 and 4 UTF-8 bytes
TEXT = "Straße über 東京 and café 😀: naïve Größe, ½ of a crème brûlée."
BLOCK = 8
# float32 losses of one model through two batch shapes differ by about 1e-6 here; 1e-4 is far above that and below
# what predicting a token from another window changes (5e-3 or more on the long text below)
TOLERANCE = {"rtol": 1e-4, "atol": 1e-4}


@pytest.fixture(scope="module")
def tiny_gpt():
    torch.manual_seed(0)
    return GPT(GPTConfig(vocab_size=11, block_size=BLOCK, d_model=16, num_heads=2, num_layers=1, d_ff=32)).eval()


def sequence(n):
    return torch.randint(11, (n,), generator=torch.Generator().manual_seed(n))


def loss_of_token(model, context, target):
    """-ln p(target | context) from one forward pass over ``context`` (T,) alone."""
    with torch.no_grad():
        logits = model(context[None])[0, -1]  # (V,)
    return -torch.log_softmax(logits, dim=-1)[target]


@pytest.mark.parametrize("n", [BLOCK + 1, 5])
def test_token_losses_of_a_text_that_fits_one_window_are_its_cross_entropy(tiny_gpt, n):
    ids = sequence(n)
    with torch.no_grad():
        logits = tiny_gpt(ids[None, :-1])[0]  # (n-1, V)
    losses = token_losses(tiny_gpt, ids, stride=4)
    assert losses.shape == (n - 1,)
    torch.testing.assert_close(losses, F.cross_entropy(logits, ids[1:], reduction="none"), **TOLERANCE)


def test_token_losses_of_a_long_text_score_each_token_once_from_its_own_window(tiny_gpt):
    n, stride = 30, 4
    ids = sequence(n)
    # The windows start every stride tokens; the last one ends at the text's end. A token is scored by the first
    # window that predicts it.
    starts = [*range(0, n - 1 - BLOCK, stride), n - 1 - BLOCK]
    losses = token_losses(tiny_gpt, ids, stride=stride, batch_size=3)  # batches that split the windows
    assert losses.shape == (n - 1,)
    for token in range(1, n):
        start = next(s for s in starts if s < token <= s + BLOCK)
        if token > BLOCK:
            assert token - start >= BLOCK - stride  # the context it is predicted from
        expected = loss_of_token(tiny_gpt, ids[start:token], ids[token])
        torch.testing.assert_close(losses[token - 1], expected, **TOLERANCE)
    with pytest.raises(ValueError, match="stride=9 must lie in 1"):
        token_losses(tiny_gpt, ids, stride=BLOCK + 1)


def test_token_byte_counts_give_each_token_its_utf8_bytes_and_special_tokens_none():
    tokenizer = CharTokenizer("aé東😀")
    assert token_byte_counts(tokenizer)[tokenizer.encode("aé東😀")].tolist() == [1, 2, 3, 4]

    special = "<|endoftext|>"
    bpe = train_bpe(TEXT, 20, special_tokens=[special])
    counts = token_byte_counts(bpe)
    assert len(counts) == len(bpe) and counts[:256].tolist() == [1] * 256  # the single bytes
    assert counts[len(bpe.vocab)].item() == 0  # the special token's id follows the vocabulary's
    ids = torch.tensor(bpe.encode(TEXT + special + TEXT))
    assert counts[ids].sum().item() == 2 * len(TEXT.encode())


def first_char_of_each_token(tokenizer, ids):
    """The index in the decoded text of the character that holds each token's first byte."""
    if isinstance(tokenizer, CharTokenizer):
        return list(range(len(ids)))
    pieces = [tokenizer.vocab[i] for i in ids.tolist()]
    # the text before a token, decoded without a character the token starts inside of
    return [len(b"".join(pieces[:k]).decode("utf-8", errors="ignore")) for k in range(len(pieces))]


@pytest.mark.parametrize("tokenizer", [CharTokenizer(TEXT), train_bpe(TEXT, 20)], ids=["char", "bpe"])
def test_chunk_bits_per_byte_is_bits_per_byte_of_the_tokens_that_start_in_each_chunk(tokenizer):
    chunk_chars = 8
    ids = torch.as_tensor(tokenizer.encode(TEXT))
    nats = torch.rand(len(ids) - 1, generator=torch.Generator().manual_seed(0)) * 5  # any losses of tokens 1 …
    byte_counts = token_byte_counts(tokenizer)
    result = chunk_bits_per_byte(TEXT, ids, nats, byte_counts, chunk_chars)
    chunk = torch.tensor(first_char_of_each_token(tokenizer, ids)[1:]) // chunk_chars  # (N-1,)
    chunks = math.ceil(len(TEXT) / chunk_chars)
    assert result.shape == (chunks,) and result.dtype == torch.float64
    token_bytes = byte_counts[ids[1:]]  # (N-1,)
    for c in range(chunks):
        assert result[c].item() == pytest.approx(bits_per_byte(nats[chunk == c], token_bytes[chunk == c]), rel=1e-9)
    # Weighted by their bytes, the chunks add up to the whole text's bits per byte
    chunk_bytes = torch.zeros(chunks, dtype=torch.float64).index_add_(0, chunk, token_bytes.double())
    total = (result * chunk_bytes).sum().item() / chunk_bytes.sum().item()
    assert total == pytest.approx(bits_per_byte(nats, token_bytes), rel=1e-9)
    with pytest.raises(ValueError, match="ids do not encode text"):
        chunk_bits_per_byte(TEXT + "!", ids, nats, byte_counts, chunk_chars)


@pytest.fixture(scope="module")
def task():
    return make_translation_task(num_train=20, num_valid=2, num_test=10, num_unseen=0)


def test_translation_choices_are_the_reference_the_adjective_moved_and_the_adjective_dropped(task):
    source = ["the", "quiet", "bear", "finds", "some", "blue", "cats"]
    target = ["der", "bar", "still", "manche", "katzen", "blau", "findet"]
    no_adjective = (["the", "foxes", "see", "some", "bears"], ["dem", "fuchse", "einige", "bare", "sehen"])
    [item] = translation_choices([(source, target), no_adjective])
    assert item.source == source and item.options[item.answer] == target
    assert sorted(item.options) == sorted([
        target,
        ["der", "still", "bar", "manche", "katzen", "blau", "findet"],  # the first adjective before its noun
        ["der", "bar", "manche", "katzen", "blau", "findet"],  # the first adjective dropped
    ])

    adjectives = set(ADJECTIVES.values())
    with_adjective = [(s, t) for s, t in task.test if adjectives & set(t)]
    items = translation_choices(task.test)
    assert 0 < len(items) == len(with_adjective) < len(task.test)  # the test split has sentences without one
    for item, (source, target) in zip(items, with_adjective, strict=True):
        assert item.source == source and item.options[item.answer] == target
        swapped, dropped = (option for k, option in enumerate(item.options) if k != item.answer)
        if len(swapped) < len(dropped):
            swapped, dropped = dropped, swapped
        assert len(swapped) == len(target) and sorted(swapped) == sorted(target) and swapped != target
        assert len(dropped) == len(target) - 1 and any(target[:k] + target[k + 1 :] == dropped
                                                       for k, word in enumerate(target) if word in adjectives)
    assert len({item.answer for item in items}) > 1  # the reference is not always in the same place


def test_option_log_probs_are_each_options_teacher_forced_log_probability(task):
    torch.manual_seed(0)
    model = Transformer(translation_model_config(task)).eval()
    items = translation_choices(task.test)
    log_probs, lengths = option_log_probs(model, task, items)
    assert log_probs.shape == lengths.shape == (len(items), 3)
    for i, item in enumerate(items):
        src = torch.tensor([task.src_vocab.encode(item.source)])  # (1, S)
        for k, option in enumerate(item.options):
            tgt = torch.tensor([task.tgt_vocab.encode(option, add_bos=True)])  # (1, T): <bos> … <eos>
            with torch.no_grad():
                log_p = torch.log_softmax(model(src, tgt[:, :-1]), dim=-1)[0]  # (T-1, V)
            expected = log_p.gather(1, tgt[0, 1:, None]).sum()
            torch.testing.assert_close(log_probs[i, k], expected, **TOLERANCE)
            assert lengths[i, k].item() == len(option) + 1  # its words and <eos>


def test_pick_by_log_prob_per_token_divides_by_the_lengths():
    log_probs = torch.tensor([[-6.0, -5.0, -9.5], [-2.0, -4.0, -3.0]])
    lengths = torch.tensor([[6, 3, 9], [4, 4, 4]])
    # item 0: the sum favours the short option 1; per token, option 0 (-1.0 against -1.67 and -1.06). Item 1: options
    # of one length, picked alike
    assert pick_by_log_prob(log_probs, lengths).tolist() == [1, 0]
    assert pick_by_log_prob(log_probs, lengths, per_token=True).tolist() == [0, 0]


def test_membership_error_rates_count_wrong_flags_both_ways():
    leaked = [-0.75, -0.5, -0.25, 0.25]  # -0.25 sits on the threshold: not below it, so missed
    unseen = [0.5, -0.5, 0.0, 0.25, 0.75]
    false_positive, false_negative = membership_error_rates(leaked, unseen, threshold=-0.25)
    assert false_positive == pytest.approx(1 / 5) and false_negative == pytest.approx(2 / 4)
    assert membership_error_rates(leaked, unseen, threshold=-1.0) == pytest.approx((0.0, 1.0))  # flags nothing


def test_shortest_share_counts_picks_of_a_shortest_option_and_never_a_missing_pick():
    items = [ChoiceItem([], [["a", "b"], ["a"], ["c"]], 0), ChoiceItem([], [["a"], ["a", "b"], ["b", "a"]], 1)]
    assert shortest_share(torch.tensor([1, 0]), items) == 1.0  # item 0: options 1 and 2 tie for shortest
    assert shortest_share(torch.tensor([2, 0]), items) == 1.0
    assert shortest_share(torch.tensor([0, -1]), items) == 0.0  # -1: the written answer was no option


def test_three_ways_are_the_pickers_each_way(task):
    torch.manual_seed(0)
    model = Transformer(translation_model_config(task)).eval()
    items = translation_choices(task.test)
    log_probs, lengths = option_log_probs(model, task, items)
    picks = three_ways(model, task, items)
    assert list(picks) == ["write", "sum", "per token"]
    assert torch.equal(picks["write"], pick_by_generation(model, task, items))  # one code path run twice
    assert torch.equal(picks["sum"], pick_by_log_prob(log_probs, lengths))
    assert torch.equal(picks["per token"], pick_by_log_prob(log_probs, lengths, per_token=True))


def test_best_threshold_adds_the_fewest_errors_of_any_threshold():
    leaked, unseen = [-0.9, -0.6, -0.2, 0.1], [-0.5, -0.1, 0.0, 0.3, 0.4]
    threshold, false_positive, false_negative = best_threshold(leaked, unseen)
    assert (false_positive, false_negative) == membership_error_rates(leaked, unseen, threshold)
    for t in (-1.0, -0.55, -0.3, -0.15, 0.05, 0.2, 1.0):
        assert false_positive + false_negative <= sum(membership_error_rates(leaked, unseen, t)) + 1e-12
    assert best_threshold([-1.0], [1.0])[1:] == (0.0, 0.0)  # separable: no error
