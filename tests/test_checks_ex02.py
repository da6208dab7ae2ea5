"""The lesson 02 checks accept the solutions, spot stubs, and name the typical mistakes."""

import math

import torch

from check_helpers import assert_diagnosed, assert_rejected_with, stub
from transformer_lib import softmax
from transformer_lib.checks import ex02_attention_scores as check
from transformer_lib.checks._feedback import NOT_ATTEMPTED


def test_every_check_reports_a_stub_as_not_attempted(capsys):
    for check_fn in (check.stable_softmax, check.attention_weights, check.predict_weights, check.fixed_softmax,
                     check.temperature, check.additive_scores):
        result = check_fn(stub)
        assert not result.attempted and not result.ok
    assert capsys.readouterr().out.count(NOT_ATTEMPTED) == 6


def test_stable_softmax_accepts_the_solution_and_names_the_mistakes(capsys):
    def solution(x):
        exps = (x - x.amax(dim=-1, keepdim=True)).exp()
        return exps / exps.sum(dim=-1, keepdim=True)

    assert check.stable_softmax(solution).ok
    assert_rejected_with(check.stable_softmax(lambda x: x.exp() / x.exp().sum(dim=-1, keepdim=True)),
                         "exp(1000) overflows to inf: subtract the row's maximum")
    assert_rejected_with(check.stable_softmax(lambda x: torch.softmax(x, dim=0)), "each column sums to 1")

    def global_max(x):
        exps = (x - x.max()).exp()
        return exps / exps.sum(dim=-1, keepdim=True)

    assert_rejected_with(check.stable_softmax(global_max), "you subtracted the largest score of the whole tensor")
    assert "your result contains NaN" in capsys.readouterr().out


def test_attention_weights_accepts_the_solution_and_names_the_mistakes():
    assert check.attention_weights(lambda q, k: softmax(q @ k.T)).ok

    def row_sum(q, k):
        scores = q @ k.T
        return scores / scores.sum(dim=-1, keepdim=True)

    assert_rejected_with(check.attention_weights(row_sum), "you divided the scores by their row sum")
    assert_rejected_with(check.attention_weights(lambda q, k: torch.softmax(q @ k.T, dim=0)),
                         "each column sums to 1: take the softmax over the keys")


def test_predict_weights_accepts_the_solution_and_names_the_mistakes():
    def solution(w):
        return w, w**2 / (w**2).sum(dim=-1, keepdim=True)

    assert check.predict_weights(solution).ok
    assert_rejected_with(check.predict_weights(lambda w: (w + 5, solution(w)[1])), "the factor e⁵ cancels")
    assert_rejected_with(check.predict_weights(lambda w: (w, 2 * w)), "doubling the scores does not double")
    assert_rejected_with(check.predict_weights(lambda w: (w, w)), "softmax is not scale-invariant")
    assert_rejected_with(check.predict_weights(lambda w: (w, w**2)), "w² must be normalised")
    assert_rejected_with(check.predict_weights(lambda w: (w, w**2 / (w**2).sum(dim=0, keepdim=True))),
                         "not along the columns")
    assert_rejected_with(check.predict_weights(lambda w: (w, w.sqrt() / w.sqrt().sum(dim=-1, keepdim=True))),
                         "it sharpens (w²), it does not flatten")
    assert_rejected_with(check.predict_weights(lambda w: w), "a pair (weights after adding 5")


def test_fixed_softmax_accepts_the_solution_and_names_the_mistakes():
    def summed_over(dim, keepdim=True, global_max=False):
        def fn(scores):
            top = scores.max() if global_max else scores.amax(dim=-1, keepdim=True)
            exps = (scores - top).exp()
            return exps / (exps.sum() if dim is None else exps.sum(dim=dim, keepdim=keepdim))
        return fn

    assert check.fixed_softmax(summed_over(-1)).ok
    assert check.fixed_softmax(lambda s: torch.softmax(s, dim=-1)).ok
    assert_rejected_with(check.fixed_softmax(summed_over(1)), "you still sum over dim=1, the queries")
    assert_rejected_with(check.fixed_softmax(summed_over(0)), "you sum over dim=0, the batch")
    assert_rejected_with(check.fixed_softmax(summed_over(-1, keepdim=False)), "without keepdim=True")
    assert_rejected_with(check.fixed_softmax(summed_over(None)), "you divided by the sum of the whole tensor")
    assert_rejected_with(check.fixed_softmax(summed_over(-1, global_max=True)),
                         "you subtracted the largest score of the whole tensor")


def _bisect(scores, top_weight):
    low, high = 1e-3, 1e3
    for _ in range(100):
        middle = math.sqrt(low * high)
        low, high = (middle, high) if softmax(scores / middle).max() > top_weight else (low, middle)
    return middle


def _two_largest(scores, top_weight, log=math.log):
    first, second = scores.topk(2).values.tolist()
    return (first - second) / log(top_weight / (1 - top_weight))


def test_temperature_accepts_the_solution_and_names_the_mistakes():
    assert check.temperature(_bisect).ok
    assert_rejected_with(check.temperature(lambda s, p: 1 / _bisect(s, p)),
                         "you multiplied the scores by the temperature")
    closed_form = check.temperature(_two_largest)
    assert closed_form.passed == 1  # right for the two-score row
    assert_rejected_with(closed_form, "the closed form for two scores ignores the other scores")
    assert_rejected_with(check.temperature(lambda s, p: _two_largest(s, p, math.log10)), "not log10")
    assert not check.temperature(lambda s, p: p).ok


def test_additive_scores_accepts_the_solution_and_names_the_mistakes():
    assert check.additive_scores(lambda s, h, W_a, U_a, v_a: torch.tanh(s @ W_a + h @ U_a) @ v_a).ok
    assert_rejected_with(check.additive_scores(lambda s, h, W_a, U_a, v_a: (s @ W_a + h @ U_a) @ v_a),
                         "you left out the tanh")
    assert_rejected_with(check.additive_scores(lambda s, h, W_a, U_a, v_a: torch.tanh((s @ W_a + h @ U_a) @ v_a)),
                         "the tanh goes inside")
    assert_rejected_with(check.additive_scores(lambda s, h, W_a, U_a, v_a: torch.tanh((s @ W_a) * (h @ U_a)) @ v_a),
                         "query and key are added inside the tanh")
    assert_rejected_with(check.additive_scores(lambda s, h, W_a, U_a, v_a: torch.tanh(s @ U_a + h @ W_a) @ v_a),
                         "W_a belongs to the decoder's state s")
    dot = check.additive_scores(lambda s, h, W_a, U_a, v_a: h @ s)
    assert_rejected_with(dot, "that is the dot-product score")
    assert dot.passed == 0 and len(dot.diagnoses) == 1  # named once: the check stops at its first failed case


def test_each_named_mistake_is_diagnosed_as_itself():
    def normalised(exps, dim=-1, keepdim=True):
        return exps / (exps.sum() if dim is None else exps.sum(dim=dim, keepdim=keepdim))

    def stable_over(dim=-1, keepdim=True):
        return lambda x: normalised((x - x.amax(dim=-1, keepdim=True)).exp(), dim, keepdim)

    def global_max(x):
        return normalised((x - x.max()).exp())

    def square(w):
        return w**2 / (w**2).sum(dim=-1, keepdim=True)

    assert_diagnosed(check.stable_softmax(lambda x: torch.softmax(x, dim=0)), "softmax-over-columns")
    assert_diagnosed(check.stable_softmax(lambda x: normalised(x.exp())), "no-max-subtracted")
    assert_diagnosed(check.stable_softmax(global_max), "global-max")
    assert_diagnosed(check.attention_weights(lambda q, k: normalised(q @ k.T)), "row-sum-normalised")
    assert_diagnosed(check.attention_weights(lambda q, k: q @ k.T), "returned-scores")
    assert_diagnosed(check.attention_weights(lambda q, k: torch.softmax(q @ k.T, dim=0)), "softmax-over-queries")
    assert_diagnosed(check.predict_weights(lambda w: (w + 5, square(w))), "added-five-to-weights")
    assert_diagnosed(check.predict_weights(lambda w: (normalised(w + 5), square(w))), "renormalised-shifted-weights")
    assert_diagnosed(check.predict_weights(lambda w: (w, 2 * w)), "doubled-weights")
    assert_diagnosed(check.predict_weights(lambda w: (w, w)), "assumed-scale-invariance")
    assert_diagnosed(check.predict_weights(lambda w: (w, w**2)), "square-not-normalised")
    assert_diagnosed(check.predict_weights(lambda w: (w, normalised(w**2, dim=0))), "square-normalised-over-columns")
    assert_diagnosed(check.predict_weights(lambda w: (w, normalised(w.sqrt()))), "square-root-not-square")
    assert_diagnosed(check.fixed_softmax(stable_over(1)), "sum-over-queries")
    assert_diagnosed(check.fixed_softmax(stable_over(0)), "sum-over-batch")
    assert_diagnosed(check.fixed_softmax(stable_over(-1, keepdim=False)), "missing-keepdim")
    assert_diagnosed(check.fixed_softmax(stable_over(None)), "whole-tensor-sum")
    assert_diagnosed(check.fixed_softmax(global_max), "global-max")
    assert_diagnosed(check.temperature(lambda s, p: 1 / _bisect(s, p)), "multiplied-by-temperature")
    assert_diagnosed(check.temperature(lambda s, p: _two_largest(s, p, math.log10)), "log10")
    assert_diagnosed(check.temperature(_two_largest), "closed-form-two-scores")
    assert_diagnosed(check.additive_scores(lambda s, h, W_a, U_a, v_a: (s @ W_a + h @ U_a) @ v_a), "missing-tanh")
    assert_diagnosed(check.additive_scores(lambda s, h, W_a, U_a, v_a: torch.tanh((s @ W_a + h @ U_a) @ v_a)),
                     "tanh-outside")
    assert_diagnosed(check.additive_scores(lambda s, h, W_a, U_a, v_a: torch.tanh((s @ W_a) * (h @ U_a)) @ v_a),
                     "product-not-sum")
    assert_diagnosed(check.additive_scores(lambda s, h, W_a, U_a, v_a: torch.tanh(s @ U_a + h @ W_a) @ v_a),
                     "swapped-matrices")
    assert_diagnosed(check.additive_scores(lambda s, h, W_a, U_a, v_a: h @ s), "dot-product-score")


def test_softmaxes_are_checked_on_three_axes_other_layouts_and_left_inputs_alone():
    def subtracted_in_place(x):
        x -= x.amax(dim=-1, keepdim=True)
        return x.exp() / x.exp().sum(dim=-1, keepdim=True)

    def summed_over_dim_one(x):  # right on a matrix, wrong on (batch, T_q, T_k)
        exps = (x - x.amax(dim=-1, keepdim=True)).exp()
        return exps / exps.sum(dim=1 if x.dim() > 1 else 0, keepdim=True)

    def max_over_queries(x):
        exps = (x - x.amax(dim=-2 if x.dim() > 1 else -1, keepdim=True)).exp()
        return exps / exps.sum(dim=-1, keepdim=True)

    def flattened_with_view(x):  # view needs a contiguous tensor
        rows = x.view(-1, x.shape[-1])
        exps = (rows - rows.amax(dim=-1, keepdim=True)).exp()
        return (exps / exps.sum(dim=-1, keepdim=True)).view(x.shape)

    assert_diagnosed(check.stable_softmax(subtracted_in_place), "modified-input")
    assert_diagnosed(check.fixed_softmax(subtracted_in_place), "modified-input")
    assert_diagnosed(check.stable_softmax(summed_over_dim_one), "fixed-dim-not-last")
    assert_diagnosed(check.stable_softmax(max_over_queries), "max-over-other-axis")
    assert_diagnosed(check.fixed_softmax(max_over_queries), "max-over-other-axis")
    for check_fn in (check.stable_softmax, check.fixed_softmax):
        assert_rejected_with(check_fn(flattened_with_view), "raised RuntimeError")
        assert check_fn(lambda x: (x - torch.logsumexp(x, dim=-1, keepdim=True)).exp()).ok
        assert check_fn(lambda x: (lambda e: e / e.sum(-1)[..., None])((x - x.amax(-1, keepdim=True)).exp())).ok
        assert check_fn(lambda x: (lambda e: e / e.sum(-1, keepdim=True))((x - x.amax(-1, keepdim=True)).exp())
                        .float()).ok  # float32 weights are close enough


def test_attention_weights_names_an_early_scale_and_takes_keys_of_any_layout():
    assert_diagnosed(check.attention_weights(lambda q, k: torch.softmax(q @ k.T / math.sqrt(q.shape[-1]), -1)),
                     "scaled-too-early")
    assert check.attention_weights(lambda q, k: torch.softmax(torch.einsum("qd,kd->qk", q, k), dim=-1)).ok
    assert check.attention_weights(lambda q, k: torch.softmax(k @ q.T, dim=0).T).ok
    result = check.attention_weights(lambda q, k: torch.softmax(q @ k.T, dim=0))
    assert len([line for line in result.lines if line.startswith("  hint:")]) == 1, result.lines
