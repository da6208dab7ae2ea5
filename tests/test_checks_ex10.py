"""The lesson 10 checks accept the solutions, spot stubs, and name typical mistakes."""

import torch

from check_helpers import assert_rejected_with, stub
from transformer_lib.checks import ex10_decoding as check
from transformer_lib.checks._feedback import NOT_ATTEMPTED


def greedy(model, src, bos_id, eos_id, max_len, stop_at_eos=True):
    memory = model.encode(src)
    tokens = torch.tensor([[bos_id]])
    for _ in range(max_len):
        next_token = model.decode(tokens, memory)[0, -1].argmax()
        tokens = torch.cat((tokens, next_token.view(1, 1)), dim=1)
        if stop_at_eos and next_token.item() == eos_id:
            break
    return tokens


def top_k(logits, k, fill=float("-inf")):
    kth = logits.topk(k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, fill)


def test_stubs_are_not_attempted(capsys):
    for check_fn in (check.greedy_loop, check.top_k):
        assert not check_fn(stub).attempted
    assert capsys.readouterr().out.count(NOT_ATTEMPTED) == 2


def test_greedy_loop_accepts_the_solution():
    assert check.greedy_loop(greedy).ok


def test_greedy_loop_names_a_loop_that_ignores_the_end_token():
    result = check.greedy_loop(lambda *args: greedy(*args, stop_at_eos=False))
    assert_rejected_with(result, "stop when the end token is produced")


def test_greedy_loop_names_a_missing_bos():
    assert_rejected_with(check.greedy_loop(lambda *args: greedy(*args)[:, 1:]), "start the output with <bos>")


def test_top_k_accepts_the_solution():
    assert check.top_k(top_k).ok


def test_top_k_names_zero_instead_of_minus_infinity():
    assert_rejected_with(check.top_k(lambda logits, k: top_k(logits, k, fill=0.0)), "not 0")


def test_top_k_names_probabilities_instead_of_logits():
    assert_rejected_with(check.top_k(lambda logits, k: top_k(logits, k).softmax(-1)), "not probabilities")
