"""The lesson 14 checks accept the solutions, spot stubs, and name typical mistakes."""

import math

import torch
import torch.nn.functional as F
from torch import nn

from check_helpers import assert_diagnosed, assert_rejected_with, stub
from transformer_lib import GPT, set_seed
from transformer_lib.checks import ex14_faster_and_bigger as check
from transformer_lib.checks._feedback import NOT_ATTEMPTED
from transformer_lib.quantization import Int8Linear
from transformer_lib.speculative import acceptance_interval, expected_tokens_per_call


def probability(p, q, emitted, bug=None):
    """One round's outcome probability written with the events (no division); ``bug`` makes the classic mistakes."""
    emitted = [int(t) for t in emitted]
    n, k = len(emitted) - 1, q.shape[0]
    kept = 1.0
    for i in range(n):
        x = emitted[i]
        kept *= {"always": q[i, x], "uncapped": p[i, x]}.get(bug, min(p[i, x], q[i, x]))
    x = emitted[n]
    if n == k:
        return kept * p[k, x]
    if bug in ("always", "uncapped"):
        return 0.0 * kept
    missing = (p[n] - q[n]).clamp(min=0)
    if bug == "from p":
        return kept * missing.sum() * p[n, x]
    if bug == "divided":  # reject, then draw from the renormalised residual: 0 / 0 where p = q
        return kept * missing.sum() * (missing / missing.sum())[x]
    if bug == "unweighted":
        return kept * (missing / missing.sum())[x]
    return kept * missing[x]


def probability_by_ratio(p, q, emitted):
    """Right, written another way: keep with min(1, p/q) (decided without dividing where q = 0), reject with
    1 − Σ min(p, q), draw from the residual where it has mass; returns a 1-element NumPy array."""
    emitted = torch.as_tensor(emitted)
    n, k = len(emitted) - 1, q.shape[0]
    keep = torch.where(q > 0, (p[:k] / torch.where(q > 0, q, 1)).clamp(max=1), 0)  # (k, V)
    chance = (q * keep).gather(1, emitted[:n, None]).prod()
    if n == k:
        return (chance * p[k, emitted[n]]).numpy().reshape(1)
    reject = 1 - torch.minimum(p[n], q[n]).sum()
    residual = (p[n] - q[n]).clamp(min=0)
    share = residual[emitted[n]] / residual.sum() if residual.sum() > 0 else torch.tensor(0.0, dtype=p.dtype)
    return (chance * reject * share).numpy().reshape(1)


def predicted(kept, k, k_new, bug=None):
    examined = sum(n + (n < k) for n in kept)
    if bug == "unexamined":
        examined = k * len(kept)
    if bug == "every round":
        examined = sum(kept) + len(kept)
    powers = {"no own token": range(1, k_new + 1), "one short": range(k_new), "measured k": range(k + 1)}.get(
        bug, range(k_new + 1))
    low, high = acceptance_interval(sum(kept), examined)
    return sum(low**i for i in powers), sum(high**i for i in powers)


def predicted_by_hand(kept, k, k_new):
    """Right, written another way: Wilson's interval by its formula, the sum in closed form, returned as a list."""
    accepted = sum(kept)
    examined = accepted + sum(1 for n in kept if n != k)
    rate, z = accepted / examined, 1.96
    centre = (rate + z * z / (2 * examined)) / (1 + z * z / examined)
    half = z * math.sqrt(rate * (1 - rate) / examined + z * z / (4 * examined**2)) / (1 + z * z / examined)
    ends = (max(0.0, centre - half), min(1.0, centre + half))
    return [k_new + 1 if a == 1 else (1 - a ** (k_new + 1)) / (1 - a) for a in ends]


def damage(model, tokens, bug=None):
    with torch.no_grad():
        exact = model(tokens).log_softmax(-1)
        increases, previous = [], None
        for name, layer in [(n, m) for n, m in model.named_modules() if isinstance(m, nn.Linear)]:
            parent_name, _, child = name.rpartition(".")
            parent = model.get_submodule(parent_name)
            if bug == "left quantized" and previous:  # restores the layer before, just in time: not the last one
                setattr(*previous)
            setattr(parent, child, Int8Linear(layer, per_channel=bug != "per tensor"))
            rounded = model(tokens).log_softmax(-1)
            if bug == "reversed":
                increases.append(F.kl_div(exact, rounded, log_target=True, reduction="none").sum(-1).mean().item())
            else:
                increases.append(F.kl_div(rounded, exact, log_target=True, reduction="none").sum(-1).mean().item())
            if bug == "left quantized":
                previous = (parent, child, layer)
            elif bug != "not restored":
                setattr(parent, child, layer)
    return increases


def test_stubs_are_not_attempted(capsys):
    checks = (check.round_probability_of, check.predicted_range, check.quantization_damage)
    for check_fn in checks:
        assert not check_fn(stub).attempted
    assert capsys.readouterr().out.count(NOT_ATTEMPTED) == len(checks)


def test_round_probability_accepts_the_solution_written_two_ways():
    assert check.round_probability_of(probability).ok
    assert check.round_probability_of(probability_by_ratio).ok  # another formula, NumPy arrays of one element


def test_round_probability_names_each_classic_mistake_once():
    def run(bug):
        result = check.round_probability_of(lambda p, q, e, bug=bug: probability(p, q, e, bug))
        assert len(result.diagnoses) == 1  # one diagnosis: later rounds not retried
        return result

    assert_diagnosed(run("always"), "accept-without-ratio")
    assert_diagnosed(run("uncapped"), "uncapped-ratio")
    assert_diagnosed(run("from p"), "correction-from-p")
    assert_diagnosed(run("unweighted"), "rejection-not-weighted")
    assert_rejected_with(check.round_probability_of(lambda p, q, e: probability(p, q, e, "from p")),
                         "not from p")


def test_round_probability_catches_a_nan_where_the_draft_equals_the_target():
    """The residual renormalised and then weighted is right wherever it is defined, and NaN where p = q."""
    divided = check.round_probability_of(lambda p, q, e: probability(p, q, e, "divided"))
    assert divided.passed == 2  # the first round (finite, right) passes; the second has p = q
    assert_diagnosed(divided, "nan-when-p-equals-q")
    assert_rejected_with(divided, "a draft equal to the target")


def test_round_probability_sees_the_draft_filtering_a_token_the_target_allows():
    """Dividing p by q where q = 0 (p > 0 = q) without guarding it: inf · 0 = NaN in the first round already."""
    def unguarded(p, q, emitted):
        keep = (p[: q.shape[0]] / q).clamp(max=1)  # inf where q = 0 < p, NaN where p = q = 0
        n = len(emitted) - 1
        chance = (q * keep).gather(1, emitted[:n, None]).prod()
        return chance * (p[-1, emitted[n]] if n == q.shape[0] else (p[n] - q[n]).clamp(min=0)[emitted[n]])
    result = check.round_probability_of(unguarded)
    assert_diagnosed(result, "nan-where-draft-filtered")
    assert result.passed == 0


def test_round_probability_rejects_a_constant_and_says_what_it_got():
    assert_rejected_with(check.round_probability_of(lambda p, q, e: 0.1), "the probability of each of the 84")
    assert_diagnosed(check.round_probability_of(lambda p, q, e: "0.1"), "not-a-finite-number")


def test_predicted_range_accepts_the_solution_written_two_ways():
    assert check.predicted_range(predicted).ok
    assert check.predicted_range(predicted_by_hand).ok  # a list, Wilson's formula and the closed-form sum


def test_predicted_range_names_each_classic_mistake_once():
    def run(bug):
        result = check.predicted_range(lambda kept, k, k_new, bug=bug: predicted(kept, k, k_new, bug))
        assert len(result.diagnoses) == 1
        return result

    assert_diagnosed(run("unexamined"), "counted-unexamined")
    assert_diagnosed(run("every round"), "rejection-in-every-round")
    assert_diagnosed(run("no own token"), "no-own-token")
    assert_diagnosed(run("one short"), "one-term-short")
    assert_diagnosed(run("measured k"), "measured-k-not-new-k")


def test_predicted_range_rejects_the_point_prediction():
    point = check.predicted_range(lambda kept, k, k_new: expected_tokens_per_call(
        sum(kept) / sum(n + (n < k) for n in kept), k_new))
    assert_rejected_with(point, "expected shape (2,), got shape ()")


def test_each_counting_mistake_fails_a_case_the_others_pass():
    """The cases separate the mistakes: any two give different answers on some case, so the check can name which
    one was made."""
    bugs = (None, "unexamined", "every round", "no own token", "one short", "measured k")
    for bug in bugs[1:]:
        for other in bugs:
            if other != bug:
                assert any(abs(predicted(kept, k, n, bug)[1] - predicted(kept, k, n, other)[1]) > 1e-6
                           or abs(predicted(kept, k, n, bug)[0] - predicted(kept, k, n, other)[0]) > 1e-6
                           for kept, k, n in check.RANGE_CASES), (bug, other)


def test_quantization_damage_accepts_the_solution_and_leaves_the_model_as_it_was():
    assert check.quantization_damage(damage).ok
    model, tokens = check._damage_model()
    increases = damage(model, tokens)
    names = [n for n, m in model.named_modules() if isinstance(m, nn.Linear)]
    assert len(increases) == len(names) == 13
    assert names[max(range(13), key=increases.__getitem__)] == "blocks.0.linear1"  # the planted outlier column
    set_seed(14)
    unplanted = GPT(model.config).double().eval()  # the same model before the factor 50 was moved
    with torch.no_grad():
        torch.testing.assert_close(model(tokens), unplanted(tokens))  # the same function
    assert max(damage(unplanted, tokens)) < min(increases[4] / 10, 1e-5)  # without the outlier, no layer comes near
    assert_rejected_with(check.quantization_damage(lambda *a: damage(*a, bug="left quantized")),
                         "the model computes as before your call")


def test_quantization_damage_names_each_mistake():
    assert_diagnosed(check.quantization_damage(lambda *a: damage(*a, bug="not restored")), "not-restored")
    assert_diagnosed(check.quantization_damage(lambda *a: damage(*a, bug="per tensor")), "per-tensor-scales")
    assert_diagnosed(check.quantization_damage(lambda *a: damage(*a, bug="reversed")), "kl-reversed")
    assert_diagnosed(check.quantization_damage(lambda *a: damage(*a, bug="left quantized")), "model-left-quantized")
