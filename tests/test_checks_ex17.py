"""The lesson 17 checks accept the solutions, spot stubs, and name typical mistakes."""

import math
from functools import partial

import numpy as np
import torch
import torch.nn.functional as F

from check_helpers import assert_diagnosed, assert_rejected_with, stub
from transformer_lib.checks import ex17_evaluation as check
from transformer_lib.checks._feedback import NOT_ATTEMPTED


def test_stubs_are_not_attempted(capsys):
    checks = (check.bits_per_byte, check.option_log_prob, check.mcnemar)
    for check_fn in checks:
        assert not check_fn(stub).attempted
    assert capsys.readouterr().out.count(NOT_ATTEMPTED) == len(checks)


def bpb(token_nats, token_texts, special_tokens, bug=None):
    nats = text_bytes = tokens = 0.0
    for loss, text in zip(token_nats.tolist(), token_texts, strict=True):
        special = text in special_tokens
        if special and bug not in ("special", "special nats"):
            continue
        nats += loss
        if not special or bug == "special":
            text_bytes += len(text) if bug == "characters" else len(text.encode("utf-8"))
        tokens += 1
    if bug == "nats":
        return nats / text_bytes
    if bug == "times ln 2":
        return nats * math.log(2) / text_bytes
    return nats / (math.log(2) * (tokens if bug == "per token" else text_bytes))


def test_bits_per_byte_accepts_the_solution_and_names_each_mistake():
    assert check.bits_per_byte(bpb).ok
    assert_diagnosed(check.bits_per_byte(partial(bpb, bug="per token")), "per-token")
    assert_diagnosed(check.bits_per_byte(lambda nats, texts, special: nats.mean().item() / math.log(2)), "per-token")
    assert_diagnosed(check.bits_per_byte(partial(bpb, bug="characters")), "characters")
    assert_diagnosed(check.bits_per_byte(partial(bpb, bug="special")), "special-counted")
    assert_diagnosed(check.bits_per_byte(partial(bpb, bug="special nats")), "special-nats-counted")
    assert_diagnosed(check.bits_per_byte(partial(bpb, bug="nats")), "nats")
    assert_diagnosed(check.bits_per_byte(partial(bpb, bug="times ln 2")), "nats")
    assert_rejected_with(check.bits_per_byte(partial(bpb, bug="characters")), "é, ü and ï take 2 bytes")
    assert_rejected_with(check.bits_per_byte(partial(bpb, bug="times ln 2")), "you multiplied by ln 2")


def test_bits_per_byte_accepts_other_writings():
    def vectorised(token_nats, token_texts, special_tokens):  # float32 sums and a 0-d tensor returned: right too
        text_bytes = torch.tensor([0 if t in special_tokens else len(t.encode()) for t in token_texts])
        kept = text_bytes > 0
        return token_nats[kept].sum() / (math.log(2) * text_bytes.sum())

    def in_bits_first(token_nats, token_texts, special_tokens):  # log2 of each probability, in float64: right too
        bits = -np.log2(np.exp(-token_nats.double().numpy()))
        kept = [i for i, t in enumerate(token_texts) if t not in special_tokens]
        return float(bits[kept].sum() / sum(len(bytes(token_texts[i], "utf-8")) for i in kept))

    assert check.bits_per_byte(vectorised).ok
    assert check.bits_per_byte(in_bits_first).ok


def option_lp(log_probs, tokens, bug=None):
    if bug == "not shifted":
        picked = log_probs.gather(1, tokens[:, None])
    elif bug == "bos":
        picked = log_probs[:-1].gather(1, tokens[:-1, None])
    elif bug == "no eos":
        picked = log_probs[:-2].gather(1, tokens[1:-1, None])
    else:
        picked = log_probs[:-1].gather(1, tokens[1:, None])
    return picked.mean() if bug == "mean" else picked.sum()


def test_option_log_prob_accepts_the_solution_and_names_each_mistake():
    assert check.option_log_prob(option_lp).ok
    assert_diagnosed(check.option_log_prob(partial(option_lp, bug="not shifted")), "not-shifted")
    assert_diagnosed(check.option_log_prob(partial(option_lp, bug="bos")), "bos-scored")
    assert_diagnosed(check.option_log_prob(partial(option_lp, bug="no eos")), "no-eos")
    assert_diagnosed(check.option_log_prob(partial(option_lp, bug="mean")), "mean")
    assert_rejected_with(check.option_log_prob(partial(option_lp, bug="no eos")), "<eos> is missing")
    # one mistake, one diagnosis: the other options are not tried after the first fails
    assert len(check.option_log_prob(partial(option_lp, bug="mean")).diagnoses) == 1


def test_option_log_prob_accepts_other_writings_and_leaves_the_learners_generator_alone():
    def nll(log_probs, tokens):  # minus the summed loss, in float32, as a Python float: right too
        return -F.nll_loss(log_probs[:-1].float(), tokens[1:], reduction="sum").item()

    def loop(log_probs, tokens):  # one row at a time: right too
        return sum(log_probs[t, tokens[t + 1]] for t in range(len(tokens) - 1))

    torch.manual_seed(0)
    before = torch.rand(3)
    torch.manual_seed(0)
    assert check.option_log_prob(nll).ok
    assert torch.equal(torch.rand(3), before)
    assert check.option_log_prob(loop).ok
    one_element = check.option_log_prob(lambda log_probs, tokens: option_lp(log_probs, tokens)[None])
    assert_rejected_with(one_element, "expected shape (), got shape (1,)")


def mcnemar(right_a, right_b, bug=None):
    a, b = np.asarray(right_a, dtype=bool), np.asarray(right_b, dtype=bool)
    only_a, only_b = int(np.sum(a & ~b)), int(np.sum(~a & b))
    if bug == "unpaired":
        only_a, only_b = int(a.sum()), int(b.sum())
    n = len(a) if bug == "ties" else only_a + only_b
    if bug in ("approximate", "corrected"):
        difference = abs(only_a - only_b) - (1 if bug == "corrected" else 0)
        return only_a, only_b, math.erfc(difference / math.sqrt(2 * n))
    tail = sum(math.comb(n, k) for k in range(min(only_a, only_b) + 1)) / 2**n
    p = {"one-sided": tail, "not capped": 2 * tail}.get(bug, min(1.0, 2 * tail))
    return (only_b, only_a, p) if bug == "swapped" else (only_a, only_b, p)


def test_mcnemar_accepts_the_solution_and_names_each_mistake():
    assert check.mcnemar(mcnemar).ok
    assert_diagnosed(check.mcnemar(partial(mcnemar, bug="unpaired")), "unpaired")
    assert_diagnosed(check.mcnemar(partial(mcnemar, bug="ties")), "ties-counted")
    assert_diagnosed(check.mcnemar(partial(mcnemar, bug="one-sided")), "one-sided")
    assert_diagnosed(check.mcnemar(partial(mcnemar, bug="approximate")), "approximate")
    assert_diagnosed(check.mcnemar(partial(mcnemar, bug="corrected")), "approximate")
    assert_diagnosed(check.mcnemar(partial(mcnemar, bug="swapped")), "counts-swapped")
    not_capped = check.mcnemar(partial(mcnemar, bug="not capped"))
    assert_diagnosed(not_capped, "not-capped")
    assert not_capped.passed == 1  # the uneven split passes; the even split is where twice the tail passes 1
    assert_rejected_with(check.mcnemar(partial(mcnemar, bug="ties")), "the items where both models agree are in your n")
    assert len(check.mcnemar(partial(mcnemar, bug="one-sided")).diagnoses) == 1  # the even split is not tried again


def test_mcnemar_accepts_other_writings():
    def with_tensors(right_a, right_b):  # torch counts and the tail from the other side: right too
        only_a, only_b = (right_a & ~right_b).sum(), (right_b & ~right_a).sum()
        n = int(only_a + only_b)
        upper = sum(math.comb(n, k) for k in range(int(max(only_a, only_b)), n + 1)) / 2**n  # P(X >= the larger)
        return only_a, only_b, min(1.0, 2.0 * upper)

    def in_a_loop(right_a, right_b):  # plain Python over lists of flags, the pmf in log space: right too
        pairs = list(zip(right_a.tolist(), right_b.tolist(), strict=True))
        only_a, only_b = pairs.count((True, False)), pairs.count((False, True))
        n = only_a + only_b
        pmf = [math.exp(math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1) - n * math.log(2))
               for k in range(n + 1)]
        return only_a, only_b, min(1.0, 2 * sum(pmf[: min(only_a, only_b) + 1]))

    assert check.mcnemar(with_tensors).ok
    assert check.mcnemar(in_a_loop).ok


def test_constant_answers_are_rejected():
    assert not check.bits_per_byte(lambda nats, texts, special: 1.0).ok
    assert not check.option_log_prob(lambda log_probs, tokens: 0.0).ok
    assert not check.mcnemar(lambda right_a, right_b: (0, 0, 1.0)).ok
    assert not check.mcnemar(lambda right_a, right_b: (9, 2, 0.05)).ok
