"""The lesson 03 checks accept the solutions, spot stubs, and name the typical mistakes."""

import math

import pytest
import torch

from check_helpers import assert_diagnosed, assert_rejected_with, stub
from transformer_lib.checks import ex03_queries_keys_values as check
from transformer_lib.checks._feedback import NOT_ATTEMPTED

CHECKS = (check.cross_attention_qkv, check.fixed_attention, check.unscaled_score_std, check.favourite_keys)


def test_every_check_reports_a_stub_as_not_attempted(capsys):
    for check_fn in CHECKS:
        result = check_fn(stub)
        assert not result.attempted and not result.ok
    assert capsys.readouterr().out.count(NOT_ATTEMPTED) == len(CHECKS)


# -- exercise 1: cross-attention's queries, keys and values --------------------------------------------------------


def test_cross_attention_qkv_accepts_the_solution():
    assert check.cross_attention_qkv(lambda t, s, wq, wk, wv: (t @ wq, s @ wk, s @ wv)).ok


@pytest.mark.parametrize(("wrong", "hint"), [
    (lambda t, s, wq, wk, wv: (t @ wq, t @ wk, t @ wv), "your keys came from the target: that is self-attention"),
    (lambda t, s, wq, wk, wv: (s @ wq, s @ wk, s @ wv), "your queries came from the source"),
    (lambda t, s, wq, wk, wv: (t @ wq, s @ wk, t @ wv), "your values came from the target"),
    (lambda t, s, wq, wk, wv: (t @ wk, s @ wq, s @ wv), "your queries used the key matrix"),
    (lambda t, s, wq, wk, wv: (t @ wk, s @ wq, s @ wv), "your keys used the query matrix"),
    (lambda t, s, wq, wk, wv: t @ wq, "returns three tensors (q, k, v): got Tensor"),
])
def test_cross_attention_qkv_names_the_mistakes(wrong, hint):
    assert_rejected_with(check.cross_attention_qkv(wrong), hint)


def test_the_notes_cross_attention_mix_up_is_rejected():
    """Q and K from the encoder output, V from the decoder: the mix-up lesson 06 warns about."""
    result = check.cross_attention_qkv(lambda t, s, wq, wk, wv: (s @ wq, s @ wk, t @ wv))
    assert_rejected_with(result, "your queries came from the source")
    assert_rejected_with(result, "your values came from the target")


# -- exercise 2: debug an attention function ------------------------------------------------------------------------


def _solution(q, k, v):
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) @ v


def _with_scores(scale, dim=-1):
    """Attention with the keys transposed correctly, a given scale (a function of q, k, v) and softmax axis."""
    return lambda q, k, v: torch.softmax(q @ k.transpose(-2, -1) / scale(q, k, v), dim=dim) @ v


def broken_attention(query, key, value):  # the exercise notebook's function, verbatim
    scores = query @ key.T / query.norm(dim=-1, keepdim=True).sqrt()
    weights = torch.softmax(scores, dim=0)
    return weights @ value


def test_fixed_attention_accepts_the_solution_and_torch_own():
    assert check.fixed_attention(_solution).ok
    assert check.fixed_attention(lambda q, k, v: torch.nn.functional.scaled_dot_product_attention(q, k, v)).ok


@pytest.mark.filterwarnings("ignore:The use of `x.T` on tensors")  # k.T on 4-D keys, as the broken function does
def test_the_broken_function_is_recognised_once():
    result = check.fixed_attention(broken_attention)
    assert_rejected_with(result, "this is still the broken function")
    assert result.passed == 0 and len(result.diagnoses) == 1  # the check stops at its first failed case


@pytest.mark.parametrize(("wrong", "hint"), [
    (_with_scores(lambda q, k, v: q.norm(dim=-1, keepdim=True).sqrt()), "you divide by √‖q‖"),
    (_with_scores(lambda q, k, v: math.sqrt(q.shape[-1]), dim=-2), "your softmax runs over the queries"),
    (_with_scores(lambda q, k, v: 1.0), "you dropped the scale"),
    (_with_scores(lambda q, k, v: q.shape[-1]), "you divided by d_k"),
    (_with_scores(lambda q, k, v: math.sqrt(v.shape[-1])), "you divided by √d_v"),
    (lambda q, k, v: _solution(q, k, v).transpose(-2, -1), "your output is transposed"),
])
def test_fixed_attention_names_each_mistake_once(wrong, hint):
    result = check.fixed_attention(wrong)
    assert_rejected_with(result, hint)
    assert sum(hint in line for line in result.lines) == 1  # the check stops at its first failed case


def test_softmax_over_dim_0_is_named_on_one_matrix_and_on_the_batch():
    result = check.fixed_attention(_with_scores(lambda q, k, v: math.sqrt(q.shape[-1]), dim=0))
    assert_rejected_with(result, "your softmax runs over the queries")  # 2-D: dim 0 is the queries
    batch_only = _with_scores(lambda q, k, v: math.sqrt(q.shape[-1]), dim=0)
    result = check.fixed_attention(lambda q, k, v: (batch_only if q.dim() == 4 else _solution)(q, k, v))
    assert_rejected_with(result, "your softmax runs over dim=0")  # 4-D: dim 0 is the batch


def test_fixed_attention_names_d_k_from_axis_1_and_an_in_place_scale():
    result = check.fixed_attention(_with_scores(lambda q, k, v: math.sqrt(q.shape[1])))
    assert result.passed == 1  # right on one (T_q, d_k) matrix
    assert_diagnosed(result, "d-k-from-fixed-axis")

    def scaled_in_place(q, k, v):  # the right value, but the caller's queries are changed
        q /= math.sqrt(q.shape[-1])
        return torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ v

    assert_diagnosed(check.fixed_attention(scaled_in_place), "modified-input")  # not "you dropped the scale"
    assert check.fixed_attention(lambda q, k, v: torch.softmax(q @ k.mT / math.sqrt(k.shape[-1]), dim=-1) @ v).ok
    assert check.fixed_attention(lambda q, k, v: torch.einsum(
        "...qk,...kd->...qd", torch.softmax(torch.einsum("...qd,...kd->...qk", q, k) / q.shape[-1] ** 0.5, -1), v)).ok
    assert check.fixed_attention(lambda q, k, v: _solution(q.float(), k.float(), v.float())).ok


@pytest.mark.filterwarnings("ignore:The use of `x.T` on tensors")
def test_fixed_attention_with_k_T_passes_alone_and_fails_on_the_batch():
    result = check.fixed_attention(lambda q, k, v: torch.softmax(q @ k.T / math.sqrt(q.shape[-1]), dim=-1) @ v)
    assert result.passed == 1
    assert_rejected_with(result, "`key.T` reverses every axis there")


# -- exercise 3: the spread of unscaled scores ---------------------------------------------------------------------


def test_unscaled_score_std_accepts_the_prediction():
    assert check.unscaled_score_std(lambda: 8.0).ok
    assert check.unscaled_score_std(lambda: math.sqrt(64)).ok


@pytest.mark.parametrize(("prediction", "hint"), [
    (64.0, "that is the variance"),
    (1.0, "1 is the spread after dividing by √d_k"),
    (0.125, "that is the scale factor 1/√d_k"),
    (4.0, "each product q_i k_i has variance 1"),
])
def test_unscaled_score_std_names_the_mistakes(prediction, hint):
    assert_rejected_with(check.unscaled_score_std(lambda: prediction), hint)


# -- exercise 4: which key each query attends to most --------------------------------------------------------------


def test_favourite_keys_accepts_the_prediction_as_a_list_or_a_tensor():
    assert check.favourite_keys(lambda: [1, 3, 2, 1]).ok
    q, k = check.X @ check.W_Q, check.X @ check.W_K
    assert check.favourite_keys(lambda: (q @ k.T).argmax(dim=-1)).ok


@pytest.mark.parametrize(("prediction", "hint"), [
    ([0, 1, 2, 3], "a token need not attend most to itself"),
    ([2, 3, 2, 1], "you took the largest entry of each column"),
    ([2, 1, 2, 3], "you compared the token vectors directly"),
    ([1, 3, 2, 2], "each ROW is one query"),
])
def test_favourite_keys_names_the_mistakes(prediction, hint):
    assert_rejected_with(check.favourite_keys(lambda: prediction), hint)


def test_favourite_keys_example_has_no_near_tie():
    """Each row's winner beats the runner-up by at least 1, so the prediction is the same on every machine."""
    scores = (check.X @ check.W_Q) @ (check.X @ check.W_K).T  # (4, 4)
    top_two = scores.topk(2, dim=-1).values
    assert (top_two[:, 0] - top_two[:, 1]).min() >= 1
    assert (scores.argmax(dim=-1) != torch.arange(4)).sum() == 3  # three of the four look elsewhere


# -- each named mistake is diagnosed as itself (the grader's class report counts these ids) -------------------------


def test_each_named_mistake_is_diagnosed_as_itself():
    assert_diagnosed(check.cross_attention_qkv(lambda t, s, wq, wk, wv: t @ wq), "not-three-tensors")
    assert_diagnosed(check.cross_attention_qkv(lambda t, s, wq, wk, wv: (s @ wq, s @ wk, s @ wv)),
                     "queries-from-source")
    assert_diagnosed(check.cross_attention_qkv(lambda t, s, wq, wk, wv: (t @ wk, s @ wk, s @ wv)),
                     "queries-use-key-matrix")
    assert_diagnosed(check.cross_attention_qkv(lambda t, s, wq, wk, wv: (t @ wq, t @ wk, t @ wv)), "keys-from-target")
    assert_diagnosed(check.cross_attention_qkv(lambda t, s, wq, wk, wv: (t @ wq, s @ wq, s @ wv)),
                     "keys-use-query-matrix")
    assert_diagnosed(check.cross_attention_qkv(lambda t, s, wq, wk, wv: (t @ wq, s @ wk, t @ wv)),
                     "values-from-target")

    def still_broken(query, key, value):  # the exercise's function with only `key.T` repaired
        scores = query @ key.transpose(-2, -1) / query.norm(dim=-1, keepdim=True).sqrt()
        return torch.softmax(scores, dim=0) @ value

    assert_diagnosed(check.fixed_attention(still_broken), "still-broken")
    assert_diagnosed(check.fixed_attention(_with_scores(lambda q, k, v: q.norm(dim=-1, keepdim=True).sqrt())),
                     "scaled-by-query-norm")
    assert_diagnosed(check.fixed_attention(_with_scores(lambda q, k, v: math.sqrt(q.shape[-1]), dim=-2)),
                     "softmax-not-over-keys")
    assert_diagnosed(check.fixed_attention(_with_scores(lambda q, k, v: math.sqrt(q.shape[-1]), dim=1)),
                     "softmax-over-heads")
    assert_diagnosed(check.fixed_attention(_with_scores(lambda q, k, v: 1.0)), "missing-sqrt-dk")
    assert_diagnosed(check.fixed_attention(_with_scores(lambda q, k, v: q.shape[-1])), "divided-by-dk")
    assert_diagnosed(check.fixed_attention(_with_scores(lambda q, k, v: math.sqrt(v.shape[-1]))), "scaled-by-sqrt-dv")
    assert_diagnosed(check.fixed_attention(lambda q, k, v: _solution(q, k, v).transpose(-2, -1)),
                     "output-transposed")
    assert_diagnosed(check.unscaled_score_std(lambda: 64.0), "variance-not-std")
    assert_diagnosed(check.unscaled_score_std(lambda: 1.0), "spread-after-scaling")
    assert_diagnosed(check.unscaled_score_std(lambda: 1 / math.sqrt(64)), "scale-factor-not-spread")
    q, k = check.X @ check.W_Q, check.X @ check.W_K
    assert_diagnosed(check.favourite_keys(lambda: [0, 1, 2, 3]), "attends-to-itself")
    assert_diagnosed(check.favourite_keys(lambda: (q @ k.T).argmax(dim=0)), "argmax-over-queries")
    assert_diagnosed(check.favourite_keys(lambda: (check.X @ check.X.T).argmax(dim=-1)), "unprojected-tokens")


def test_softmax_over_dim_1_passes_one_matrix_and_is_named_on_the_batch():
    """dim=1 is the keys of one (T_q, T_k) matrix but the heads of (batch, heads, T_q, T_k) scores."""
    result = check.fixed_attention(_with_scores(lambda q, k, v: math.sqrt(q.shape[-1]), dim=1))
    assert result.passed == 1
    assert_rejected_with(result, "your softmax runs over dim=1")
