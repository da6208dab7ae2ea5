"""Checks for lesson 17's exercises: bits per byte from per-token losses and the tokens' texts, the log-probability
of one multiple-choice option from a decoder's per-position log-probabilities, and McNemar's exact test for two
models answering the same items."""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import cache

import torch

from ..confidence import mcnemar_test
from ..data import TranslationTask, make_translation_task
from ..device import single_thread
from ..evaluation import bits_per_byte as reference_bits_per_byte
from ..model import Transformer
from ..recipes import translation_model_config
from ..scoring import ChoiceItem, option_log_probs, translation_choices
from ._feedback import CheckResult, Exercise, Hint

SPECIAL = frozenset({"<|endoftext|>"})
# Two short documents, each closed by the end-of-text token; "é", "ü" and "ï" take 2 bytes in UTF-8 and "→" 3
TOKEN_TEXTS = ("Caf", "é", " über", " →", " 3", "<|endoftext|>", "Na", "ï", "ve", "<|endoftext|>")
TOKEN_NATS = (2.25, 4.0, 3.5, 5.25, 1.5, 7.5, 2.75, 6.5, 0.75, 6.0)  # -ln p of each token, as a model scored them


def _byte_counts(texts: tuple[str, ...], special: frozenset[str], measure: Callable[[str], int]) -> torch.Tensor:
    """(N,) the size of each token's text by ``measure``, 0 for a special token."""
    return torch.tensor([0 if text in special else measure(text) for text in texts])


def _utf8_length(text: str) -> int:
    return len(text.encode("utf-8"))


def bits_per_byte(student_fn: Callable) -> CheckResult:
    """Check a function (token_nats (N,), token_texts (N strings), special_tokens (a set)) -> a number: the summed
    nats of the tokens that stand for text, over ln 2 times the UTF-8 bytes of their texts."""
    ex = Exercise("bits_per_byte")
    with ex.run():
        nats = torch.tensor(TOKEN_NATS)  # (N,) float32, as F.cross_entropy returns them
        got = ex.call(student_fn, nats.clone(), list(TOKEN_TEXTS), set(SPECIAL))
        utf8 = _byte_counts(TOKEN_TEXTS, SPECIAL, _utf8_length)  # (N,)
        expected = reference_bits_per_byte(nats, utf8)
        counted = utf8 > 0  # (N,): the tokens that stand for text
        ex.compare(
            "bits per byte of 10 tokens: two documents with 2- and 3-byte characters, each closed by <|endoftext|>",
            got, expected,
            hint=Hint(idea="add up the nats of the tokens that stand for text, then divide by ln 2 and by the "
                           "number of UTF-8 bytes of those tokens' texts",
                      code='len(text.encode("utf-8"))'),
            mistakes={
                Hint(idea="you divided by the number of tokens: that is bits per token, which changes with the "
                          "tokenizer. Divide by the bytes the tokens' texts take in UTF-8", id="per-token"): (
                    reference_bits_per_byte(nats, counted.long())),
                Hint(idea="you took the mean loss over every token, <|endoftext|> included, in bits: that is bits "
                          "per token. Divide the text tokens' nats by ln 2 and by their texts' UTF-8 bytes",
                     id="per-token"): nats.mean().item() / math.log(2),
                Hint(idea="you counted characters, not bytes: in UTF-8, é, ü and ï take 2 bytes and → takes 3",
                     id="characters"): reference_bits_per_byte(nats, _byte_counts(TOKEN_TEXTS, SPECIAL, len)),
                Hint(idea="the special token <|endoftext|> counts as text here: its nats and the bytes of its name "
                          "are in your sums. It stands for no byte of the text, so it belongs in neither",
                     id="special-counted"): (
                    reference_bits_per_byte(nats, _byte_counts(TOKEN_TEXTS, frozenset(), _utf8_length))),
                Hint(idea="the nats of <|endoftext|> are in your sum: a special token counts in neither sum, its "
                          "loss as well as its bytes", id="special-nats-counted"): (
                    nats.double().sum().item() / (math.log(2) * utf8.sum().item())),
                Hint(idea="that is nats per byte: a bit is ln 2 nats, so divide the nats by ln 2 as well",
                     id="nats"): expected * math.log(2),
                Hint(idea="you multiplied by ln 2: a bit is ln 2 nats, so the number of bits is the nats divided "
                          "by ln 2", id="nats"): expected * math.log(2) ** 2,
            },
        )
    return ex.result


@cache
def _task_and_items() -> tuple[TranslationTask, tuple[ChoiceItem, ...]]:
    """Lesson 09's vocabularies and a few test sentences, each made into a multiple-choice item of three options."""
    task = make_translation_task(num_train=10, num_valid=1, num_test=5, num_unseen=0)
    return task, tuple(translation_choices(task.test))


def _untrained_translator(task: TranslationTask) -> Transformer:
    """Lesson 09's translator, untrained, drawn from a fixed seed, in float64."""
    torch.manual_seed(17)
    return Transformer(translation_model_config(task)).double().eval()


@torch.no_grad()
def _decoder_runs(model: Transformer, task: TranslationTask, item: ChoiceItem) -> list[tuple[torch.Tensor, ...]]:
    """For each option of ``item``: (log_probs (T, V) of the decoder reading the whole ``<bos> … <eos>``, the token
    ids (T,))."""
    src = torch.tensor([task.src_vocab.encode(item.source)])  # (1, S)
    runs = []
    for option in item.options:
        tokens = torch.tensor(task.tgt_vocab.encode(option, add_bos=True))  # (T,): <bos> y1 … ym <eos>
        runs.append((model(src, tokens[None])[0].log_softmax(dim=-1), tokens))  # (T, V), (T,)
    return runs


def _picked(log_probs: torch.Tensor, rows: slice, tokens: torch.Tensor) -> torch.Tensor:
    """The log-probabilities that the rows ``rows`` of ``log_probs`` (T, V) give to ``tokens``, one per row."""
    return log_probs[rows].gather(1, tokens[:, None])[:, 0]


def option_log_prob(student_fn: Callable) -> CheckResult:
    """Check a function (log_probs (T, V), tokens (T,)) -> a number: ln p of an option, the sum of what row t gives
    token t + 1 over y1 … ym and <eos>, the decoder having read ``<bos> y1 … ym <eos>``."""
    ex = Exercise("option_log_prob")
    with ex.run(), single_thread(), torch.random.fork_rng(devices=[]):  # the learner's generator left as it was
        task, items = _task_and_items()
        model = _untrained_translator(task)
        expected = option_log_probs(model, task, items)[0]  # (I, O): the batched, teacher-forced reference
        runs = [_decoder_runs(model, task, item) for item in items]
        log_probs, tokens = runs[0][0]  # (T, V), (T,)
        got = ex.call(student_fn, log_probs.clone(), tokens.clone())
        right = _picked(log_probs, slice(None, -1), tokens[1:])  # (T-1,): y1 … ym and <eos>
        words = " ".join(items[0].options[0])
        if not ex.compare(
                f"ln p of the option “{words}” ({len(tokens)} tokens with <bos> and <eos>) under an untrained "
                f"translator", got, expected[0, 0],
                hint=Hint(idea="row t is the distribution of the token after t: add up what rows 0 … T-2 give "
                               "tokens 1 … T-1 (the words and <eos>)",
                          code="log_probs[:-1] pairs with tokens[1:]"),
                mistakes={
                    Hint(idea="each row is scored against its own input token, so <bos> is scored and every word "
                              "is scored from a row that had already read it. Row t predicts token t + 1",
                         id="not-shifted"): _picked(log_probs, slice(None), tokens).sum(),
                    Hint(idea="<bos> is in your sum and <eos> is not: you dropped the last row but left the tokens "
                              "unshifted. Row t predicts token t + 1, so row 0 scores the first word",
                         id="bos-scored"): _picked(log_probs, slice(None, -1), tokens[:-1]).sum(),
                    Hint(idea="<eos> is missing: ln p of an option includes the probability of stopping after its "
                              "last word; without it you computed the probability that a translation starts with "
                              "these words",
                         id="no-eos"): _picked(log_probs, slice(None, -2), tokens[1:-1]).sum(),
                    Hint(idea="you averaged over the tokens: ln p of the whole option is the sum of its tokens' "
                              "log-probabilities (the per-token mean is another score, not a log-probability)",
                         id="mean"): right.mean(),
                }):
            return ex.result  # every option would show the same mistake again
        table = torch.tensor([[float(ex.call(student_fn, lp.clone(), ids.clone())) for lp, ids in item_runs]
                              for item_runs in runs], dtype=torch.float64)  # (I, O)
        lengths = sorted({len(ids) for item_runs in runs for _, ids in item_runs})
        ex.compare(f"ln p of all {expected.numel()} options of {len(items)} items ({lengths[0]} to {lengths[-1]} "
                   f"tokens), as option_log_probs scores them in one batch", table, expected)
    return ex.result


def _answers(only_a: int, only_b: int, both_right: int, both_wrong: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Two models' right (True) and wrong answers on the same items, (N,) bool each, the items in a seeded order."""
    a = torch.tensor([True] * only_a + [False] * only_b + [True] * both_right + [False] * both_wrong)  # (N,)
    b = torch.tensor([False] * only_a + [True] * only_b + [True] * both_right + [False] * both_wrong)  # (N,)
    order = torch.randperm(len(a), generator=torch.Generator().manual_seed(17))
    return a[order], b[order]


def _doubled_tail(smaller: int, n: int) -> float:
    """Twice P(X <= smaller) for X ~ Binomial(n, 1/2), not capped at 1: the p-value of a wrong answer's counts."""
    return 2 * sum(math.comb(n, k) for k in range(smaller + 1)) / 2**n


def mcnemar(student_fn: Callable) -> CheckResult:
    """Check a function (right_a (N,) bool, right_b (N,) bool) -> (only_a, only_b, p_value): McNemar's exact test,
    two-sided, on the items where exactly one model is right."""
    ex = Exercise("mcnemar")
    with ex.run():
        only_a, only_b = 9, 2
        a, b = _answers(only_a, only_b, both_right=15, both_wrong=4)  # (30,) each
        got = ex.call(student_fn, a.clone(), b.clone())
        expected = mcnemar_test(a, b)
        p, n = expected[2], only_a + only_b
        gap = abs(only_a - only_b) / math.sqrt(2 * n)  # the normal approximation's z / √2
        total_a, total_b = int(a.sum()), int(b.sum())
        if not ex.compare(
                f"{len(a)} items, {only_a} that only a gets right and {only_b} that only b does: (only_a, only_b, p)",
                got, expected,
                atol=1e-9, rtol=1e-6,
                hint=Hint(idea="count the items where exactly one model is right; under “no difference” each is a "
                               "fair coin's, so p is twice the chance that n = only_a + only_b tosses give at most "
                               "the smaller count", code="math.comb(n, k) / 2**n is P(X = k)"),
                mistakes={
                    Hint(idea="you compared each model's right answers in total, as if they came from different "
                              "items: on the same items, what both get right tells nothing. Count the items where "
                              "exactly one is right", id="unpaired"): (
                        total_a, total_b, _doubled_tail(min(total_a, total_b), total_a + total_b)),
                    Hint(idea="the items where both models agree are in your n: they tell nothing about which model "
                              "is better, so the coin is tossed only n = only_a + only_b times",
                         id="ties-counted"): (only_a, only_b, _doubled_tail(only_b, len(a))),
                    Hint(idea="that is one tail: the test is two-sided (either model could have been the better "
                              "one), so double it", id="one-sided"): (only_a, only_b, p / 2),
                    Hint(idea=f"that is the normal (chi-squared) approximation, poor for the {n} items that split "
                              f"here: compute the exact binomial tail", id="approximate"): (
                        only_a, only_b, math.erfc(gap)),
                    Hint(idea="that is the normal approximation with the continuity correction, still not the exact "
                              "test: compute the binomial tail", id="approximate"): (
                        only_a, only_b, math.erfc(gap - 1 / math.sqrt(2 * n))),
                    Hint(idea="only_a and only_b are swapped: only_a counts the items that a gets right and b gets "
                              "wrong", id="counts-swapped"): (only_b, only_a, p),
                }):
            return ex.result  # the cases below would show the same mistake again
        a, b = _answers(only_a=3, only_b=3, both_right=10, both_wrong=4)  # (20,) each
        got = ex.call(student_fn, a.clone(), b.clone(), description="mcnemar(an even split, 3 and 3)")
        ex.compare(
            "an even split, 3 items each way: p = 1, the largest a p-value can be", got, mcnemar_test(a, b),
            atol=1e-9, rtol=1e-6,
            mistakes={
                Hint(idea="your p is above 1: for an even split both tails hold the middle count, so twice one "
                          "tail passes 1. A probability stops at 1", code="min(1.0, 2 * tail)", id="not-capped"): (
                    3, 3, _doubled_tail(3, 6)),
            },
        )
        a, b = _answers(only_a=0, only_b=0, both_right=20, both_wrong=5)  # (25,) each
        got = ex.call(student_fn, a.clone(), b.clone(), description="mcnemar(two models that agree on every item)")
        ex.compare("two models that agree on every item: nothing tells them apart, p = 1", got, mcnemar_test(a, b),
                   atol=1e-9, rtol=1e-6)
    return ex.result
