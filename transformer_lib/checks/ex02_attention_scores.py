"""Checks for lesson 02's exercises: a stable softmax, attention weights, predicting shifted and scaled weights, a
batched softmax to debug, the temperature that gives a required top weight, and Bahdanau's additive scores."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from ..attention import additive_attention_scores, softmax
from ._feedback import CheckResult, Exercise, Hint

WORDS = ["Orange", "Phone", "Apple", "And", "An"]
FEATURES = torch.tensor(  # (5, 3) columns: tech, fruitness, other (lesson 01's word-feature table)
    [[0.0, 3.0, 0.0], [4.0, 0.0, 0.0], [2.0, 2.0, 0.0], [0.0, 0.0, 2.0], [0.0, 0.0, 3.0]], dtype=torch.float64
)


_MODIFIED = Hint(idea="your function changed the scores it was given (an in-place step such as -=, sub_ or exp_): "
                      "they are the caller's data, so compute into new tensors",
                 code="shifted = x - x.amax(dim=-1, keepdim=True), not x -= …", id="modified-input")
_MAX_OVER_OTHER_AXIS = Hint("you subtracted a maximum taken over another axis than the keys: that is a different "
                            "number for each key, so it changes the weights; subtract each row's own maximum "
                            "(amax(dim=-1, keepdim=True))", id="max-over-other-axis")
_DIM_ONE = Hint("you normalised along dim=1: on a matrix that is the last axis, but on (batch, T_q, T_k) scores it "
                "is the queries; dim=-1 is the last axis for any number of axes", id="fixed-dim-not-last")


def _softmax_over(x: torch.Tensor, max_dim: int, sum_dim: int) -> torch.Tensor:
    """Typical wrong softmaxes: the maximum subtracted over ``max_dim``, the sum taken over ``sum_dim``."""
    exps = (x - x.amax(dim=max_dim, keepdim=True)).exp()
    return exps / exps.sum(dim=sum_dim, keepdim=True)


def _unchanged(ex: Exercise, student_fn: Callable, x: torch.Tensor, **kwargs: object) -> object:
    """Call the student's function on a copy of ``x``; a change made to that copy fails one check, named."""
    given = x.clone()
    got = ex.call(student_fn, given, **kwargs)
    if not torch.equal(given, x):
        ex.require("your function leaves its input unchanged", False, problem="it changed the scores it was given",
                   hint=_MODIFIED)
    return got


def stable_softmax(student_fn: Callable[[torch.Tensor], torch.Tensor]) -> CheckResult:
    """Check a softmax over the last axis that survives huge scores, on 1, 2 and 3 axes and a non-contiguous
    tensor; the scores must come back unchanged."""
    ex = Exercise("stable_softmax")
    with ex.run():
        small = torch.tensor([1.0, 0.71, 0.0, 0.0], dtype=torch.float64)
        rows = torch.tensor([[1.0, 2.0, 3.0], [0.0, 0.0, 5.0]], dtype=torch.float64)
        huge = torch.tensor([[1000.0, 999.0, -1000.0], [1.0, 2.0, 3.0]], dtype=torch.float64)
        naive = huge.exp() / huge.exp().sum(dim=-1, keepdim=True)  # exp(1000) overflows: row 0 is [nan, nan, 0]
        global_exps = (huge - huge.max()).exp()  # row 1 becomes exp(-999) = 0 everywhere, then 0 / 0
        stored = torch.linspace(-3.0, 4.0, 24, dtype=torch.float64).reshape(2, 4, 3) ** 2  # all rows differ
        stored[1] += 500.0  # one batch element with huge scores
        batch = stored.transpose(-2, -1)  # (2, 3, 4): each row over the keys is a column of storage
        cases = (
            ("softmax of [1, 0.71, 0, 0] (Orange's row in lesson 02)", small,
             "exponentiate every score, then divide by the sum of the exponentials", {}),
            ("softmax of a (2, 3) matrix, one distribution per row", rows,
             "normalise along the last axis (dim=-1), so each row sums to 1",
             {Hint("each column sums to 1: sum over the last axis (dim=-1, keepdim=True)",
                   id="softmax-over-columns"): torch.softmax(rows, dim=0),
              _MAX_OVER_OTHER_AXIS: _softmax_over(rows, 0, -1)}),
            ("softmax of the rows [1000, 999, -1000] and [1, 2, 3]", huge,
             "subtract each row's maximum before exponentiating",
             {Hint("exp(1000) overflows to inf: subtract the row's maximum (x.amax(dim=-1, keepdim=True)) before exp",
                   id="no-max-subtracted"): naive,
              Hint("you subtracted the largest score of the whole tensor: row [1, 2, 3] then underflows to 0 / 0; "
                   "subtract each row's own maximum (x.amax(dim=-1, keepdim=True))", id="global-max"):
                 global_exps / global_exps.sum(dim=-1, keepdim=True),
              _MAX_OVER_OTHER_AXIS: _softmax_over(huge, 0, -1)}),
            ("softmax of (batch=2, T_q=3, T_k=4) scores, one batch element near 500, stored transposed "
             "(not contiguous)", batch,
             "the last axis is dim=-1 whatever the number of axes; subtract each row's own maximum",
             {_DIM_ONE: _softmax_over(batch, -1, 1), _MAX_OVER_OTHER_AXIS: _softmax_over(batch, 1, -1)}),
        )
        for what, x, hint, mistakes in cases:  # the first failure stops: one hint, one diagnosis
            got = _unchanged(ex, student_fn, x)
            if not ex.compare(what, got, softmax(x), hint=hint, mistakes=mistakes) or not ex.result.ok:
                break
    return ex.result


_KEYS_AS_COLUMNS = Hint("each column sums to 1: take the softmax over the keys, dim=-1", id="softmax-over-queries")


def attention_weights(student_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> CheckResult:
    """Check (T_q, d) queries and (T_k, d) keys -> (T_q, T_k) weights = softmax of the dot products per query."""
    ex = Exercise("attention_weights")
    with ex.run():
        random_keys = torch.randn(4, 6, generator=torch.Generator().manual_seed(2), dtype=torch.float64)  # (d, T_k)
        cases = (("weights of Apple and Orange over the five words", FEATURES[[2, 0]], FEATURES),
                 ("weights of all five words over all five (each row sums to 1)", FEATURES, FEATURES),
                 ("weights of 3 random queries over 6 random keys, d = 4 (keys not contiguous)",
                  torch.randn(3, 4, generator=torch.Generator().manual_seed(1), dtype=torch.float64),
                  random_keys.T))
        for what, queries, keys in cases:  # the first failure stops: one hint, one diagnosis
            scores = queries @ keys.T  # (T_q, T_k)
            ex.compare(what, ex.call(student_fn, queries, keys), softmax(scores),
                       hint="scores = queries @ keys.T, then softmax over the keys (the last axis)",
                       mistakes={Hint("you divided the scores by their row sum: use softmax (exp, then normalise)",
                                      id="row-sum-normalised"): scores / scores.sum(dim=-1, keepdim=True),
                                 Hint("you returned the scores: apply softmax to them", id="returned-scores"): scores,
                                 _KEYS_AS_COLUMNS: torch.softmax(scores, dim=0),
                                 Hint("no scaling yet: this exercise takes the softmax of the plain dot products "
                                      "(the 1/√d of lesson 03 comes later)", id="scaled-too-early"):
                                 softmax(scores / math.sqrt(queries.shape[-1]))})
            if not ex.result.ok:
                break
    return ex.result


def predict_weights(student_fn: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]) -> CheckResult:
    """Check a function w = softmax(s) (batch, T) -> (softmax(s + 5), softmax(2 s)), computed from w alone."""
    ex = Exercise("predict_weights")
    with ex.run():
        scores = torch.tensor([[2.0, 1.0, 0.0, -1.0], [0.5, 3.0, -2.0, 1.0]], dtype=torch.float64)  # (2, 4)
        w = softmax(scores)
        got = ex.call(student_fn, w.clone())
        if not ex.require("a pair (weights after adding 5, weights after doubling)",
                          isinstance(got, tuple | list) and len(got) == 2,
                          problem=f"got {type(got).__name__}", hint="return two tensors: `return shifted, doubled`"):
            return ex.result
        shifted, doubled = got
        ex.compare("softmax(s + 5) from w alone", shifted, softmax(scores + 5.0),
                   hint="adding the same number to every score multiplies every exp by the same factor",
                   mistakes={Hint("adding 5 to every score changes no weight: the factor e⁵ cancels",
                                  id="added-five-to-weights"): w + 5.0,
                             Hint("adding 5 to every score changes no weight, even after normalising",
                                  id="renormalised-shifted-weights"): (w + 5.0) / (w + 5.0).sum(dim=-1, keepdim=True)})
        squared = w**2
        ex.compare("softmax(2 s) from w alone", doubled, softmax(2.0 * scores),
                   hint="exp(2 s) = exp(s)², so the new weights are proportional to w²",
                   mistakes={Hint("doubling the scores does not double the weights: exp(2 s) = exp(s)², so use w²",
                                  id="doubled-weights"): 2.0 * w,
                             Hint("softmax is not scale-invariant (only dividing by the row sum is): use w², "
                                  "then normalise", id="assumed-scale-invariance"): w,
                             Hint("w² must be normalised so that each row sums to 1", id="square-not-normalised"):
                             squared,
                             Hint("normalise w² along each row (dim=-1), not along the columns",
                                  id="square-normalised-over-columns"): squared / squared.sum(dim=0, keepdim=True),
                             Hint("doubling the scores is a temperature of 1/2: it sharpens (w²), it does not flatten "
                                  "(√w)", id="square-root-not-square"): w.sqrt() / w.sqrt().sum(dim=-1, keepdim=True)})
    return ex.result


def fixed_softmax(student_fn: Callable[[torch.Tensor], torch.Tensor]) -> CheckResult:
    """Check a softmax over the keys (the last axis) of (batch, T_q, T_k) scores, also when they are stored
    transposed (not contiguous); the scores must come back unchanged."""
    ex = Exercise("fixed_softmax")
    with ex.run():
        square = (torch.arange(27, dtype=torch.float64) * 5 % 27).reshape(3, 3, 3) / 4  # (3, 3, 3) all distinct
        square[2] += 800.0  # one batch element with huge scores
        exps = (square - square.amax(dim=-1, keepdim=True)).exp()
        global_exps = (square - square.max()).exp()  # batches 0 and 1 underflow to 0, then 0 / 0
        got = _unchanged(ex, student_fn, square)
        if not ex.compare(
                "weights of (batch=3, T_q=3, T_k=3) scores", got, softmax(square),
                hint="each query's row of weights, over the keys (dim=-1), must sum to 1",
                mistakes={Hint("you still sum over dim=1, the queries: sum over the keys, dim=-1",
                               id="sum-over-queries"): exps / exps.sum(dim=1, keepdim=True),
                          Hint("you sum over dim=0, the batch: sum over the keys, dim=-1", id="sum-over-batch"):
                          exps / exps.sum(dim=0, keepdim=True),
                          Hint("without keepdim=True the (batch, T_q) sums line up with the keys' axis: keep the "
                               "summed axis (keepdim=True)", id="missing-keepdim"): exps / exps.sum(dim=-1),
                          Hint("you divided by the sum of the whole tensor: sum each row over the keys, dim=-1",
                               id="whole-tensor-sum"): exps / exps.sum(),
                          Hint("you subtracted the largest score of the whole tensor: subtract each row's own "
                               "maximum (amax(dim=-1, keepdim=True))", id="global-max"): global_exps
                          / global_exps.sum(dim=-1, keepdim=True),
                          _MAX_OVER_OTHER_AXIS: _softmax_over(square, 1, -1)}) or not ex.result.ok:
            return ex.result
        wide = (torch.linspace(-2.0, 3.0, 24, dtype=torch.float64).reshape(2, 4, 3) ** 2).transpose(-2, -1)
        ex.compare("weights of (batch=2, T_q=3, T_k=4) scores, stored transposed (not contiguous)",
                   _unchanged(ex, student_fn, wide), softmax(wide),
                   hint="the weights keep the scores' shape (batch, T_q, T_k); each row over T_k sums to 1")
    return ex.result


def _top_weight(scores: torch.Tensor, temperature: float) -> float:
    return softmax(scores / temperature).max().item()


def _temperature_for(scores: torch.Tensor, top_weight: float) -> float:
    """The temperature τ at which the largest weight of softmax(scores / τ) is top_weight (it falls as τ grows)."""
    low, high = math.log(1e-3), math.log(1e3)  # bisection on log T
    for _ in range(100):
        middle = (low + high) / 2
        low, high = (middle, high) if _top_weight(scores, math.exp(middle)) > top_weight else (low, middle)
    return math.exp((low + high) / 2)


def temperature(student_fn: Callable[[torch.Tensor, float], float]) -> CheckResult:
    """Check a function (scores (T,), top_weight) -> the temperature τ giving softmax(scores / τ) that top weight."""
    ex = Exercise("temperature")
    with ex.run():
        cases = (
            ("scores [3, 1], top weight 0.9", [3.0, 1.0], 0.9),
            ("Orange's row [1, 0.707, 0, 0], top weight 0.6", [1.0, math.sqrt(0.5), 0.0, 0.0], 0.6),
            ("scores [0.5, 2, -1, 1, 0], top weight 0.8", [0.5, 2.0, -1.0, 1.0, 0.0], 0.8),
        )
        for what, values, top_weight in cases:
            scores = torch.tensor(values, dtype=torch.float64)
            expected = _temperature_for(scores, top_weight)
            first, second = scores.topk(2).values.tolist()
            two_largest = (first - second) / math.log(top_weight / (1.0 - top_weight))
            got = ex.call(student_fn, scores.clone(), top_weight)
            mistakes = {Hint("you multiplied the scores by the temperature: divide them by it",
                             id="multiplied-by-temperature"): 1.0 / expected}
            if len(values) == 2:
                natural_log = Hint("use the natural logarithm (math.log), not log10", id="log10")
                mistakes[natural_log] = (first - second) / math.log10(top_weight / (1.0 - top_weight))
            else:
                mistakes[Hint("the closed form for two scores ignores the other scores, which take weight too: search "
                              "(bisection) on the whole row", id="closed-form-two-scores")] = two_largest
            if not ex.compare(f"the temperature for {what}", got, expected, rtol=1e-3, atol=0.0,
                              hint="the top weight falls as the temperature grows: bisect on it until "
                                   "softmax(scores / τ).max() is the target",
                              mistakes=mistakes):
                break  # the first failure stops: one hint, one diagnosis
    return ex.result


def additive_scores(student_fn: Callable[..., torch.Tensor]) -> CheckResult:
    """Check s (d_s,), h (T_k, d_h), W_a (d_s, d_a), U_a (d_h, d_a), v_a (d_a,) -> the (T_k,) scores
    e_j = tanh(s W_a + h_j U_a) · v_a."""
    ex = Exercise("additive_scores")
    with ex.run():
        generator = torch.Generator().manual_seed(0)
        draw = lambda *shape: torch.randn(*shape, generator=generator, dtype=torch.float64)  # noqa: E731
        for d_s, d_h, d_a, T_k in ((4, 4, 3, 5), (2, 3, 4, 6)):  # the second: d_s ≠ d_h, so no dot product fits
            s, h, W_a, U_a, v_a = draw(d_s), draw(T_k, d_h), draw(d_s, d_a), draw(d_h, d_a), draw(d_a)
            got = ex.call(student_fn, s.clone(), h.clone(), W_a.clone(), U_a.clone(), v_a.clone())
            expected = additive_attention_scores(s[None], h, W_a, U_a, v_a)[0]  # (T_k,)
            mistakes = {
                Hint(idea="you left out the tanh: without it the score is linear in s and h_j",
                     code="torch.tanh(s @ W_a + h @ U_a) @ v_a", id="missing-tanh"): (s @ W_a + h @ U_a) @ v_a,
                Hint(idea="the tanh goes inside, on the (T_k, d_a) hidden layer, before v_a turns it into one number",
                     code="torch.tanh(s @ W_a + h @ U_a) @ v_a", id="tanh-outside"):
                    torch.tanh((s @ W_a + h @ U_a) @ v_a),
                Hint(idea="query and key are added inside the tanh (that is why the score is called additive), "
                          "not multiplied",
                     code="torch.tanh(s @ W_a + h @ U_a) @ v_a", id="product-not-sum"):
                    torch.tanh((s @ W_a) * (h @ U_a)) @ v_a,
                Hint(idea="W_a belongs to the decoder's state s and U_a to the encoder's states h",
                     code="s @ W_a and h @ U_a", id="swapped-matrices"):
                    (torch.tanh(s @ U_a + h @ W_a) @ v_a if d_s == d_h else None),
            }
            if d_s == d_h:
                mistakes[Hint(idea="that is the dot-product score s · h_j: the additive score runs the small network "
                                   "tanh(s W_a + h_j U_a) · v_a instead",
                              code="torch.tanh(s @ W_a + h @ U_a) @ v_a", id="dot-product-score")] = h @ s
            if not ex.compare(f"additive scores of {T_k} encoder states (d_s = {d_s}, d_h = {d_h}, d_a = {d_a})",
                       got, expected,
                       hint=Hint(idea="score each encoder state: tanh of (s W_a + h_j U_a), then the dot product with "
                                      "v_a; with h as a (T_k, d_h) matrix, all rows at once",
                                 code="torch.tanh(s @ W_a + h @ U_a) @ v_a  # (T_k, d_a) -> (T_k,)"),
                       mistakes={hint: value for hint, value in mistakes.items() if value is not None}):
                break  # the first failure stops: one hint, one diagnosis
    return ex.result
