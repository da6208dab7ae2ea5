"""The lesson 14 checks accept the solutions, spot stubs, and name typical mistakes."""

import torch
import torch.nn.functional as F
from torch import nn

from check_helpers import assert_diagnosed, assert_rejected_with, stub
from transformer_lib import GPT, set_seed
from transformer_lib.checks import ex14_faster_and_bigger as check
from transformer_lib.checks._feedback import NOT_ATTEMPTED
from transformer_lib.quantization import Int8Linear


def rule(p, q, bug=None):
    accept = torch.where(q > p, p / q, torch.ones_like(p))
    if bug == "always":
        accept = torch.ones_like(p)
    if bug in ("uncapped", "nan where both zero"):
        accept = p / q if bug == "uncapped" else torch.clamp(p / q, max=1.0)
    if bug == "inverted":
        accept = torch.where(p > q, q / p, torch.ones_like(p))
    missing = (q - p).clamp(min=0) if bug == "residual inverted" else (p - q).clamp(min=0)
    total = missing.sum()
    if bug == "from p":
        return accept, p
    if bug == "unnormalised":
        return accept, missing
    if bug == "nan when p equals q":
        return accept, missing / total
    return accept, missing / total if total > 0 else p


def from_rounds(kept, k, bug=None):
    if bug == "unexamined":
        return sum(kept) / (k * len(kept))
    if bug == "every round":
        return sum(kept) / (sum(kept) + len(kept))
    if bug == "per round":
        return sum(kept) / len(kept)
    examined = sum(n + (n < k) for n in kept)
    return sum(kept) / examined if examined else float("nan")


def predict(kept, k, bug=None):
    alpha = sum(kept) / len(kept)
    if bug == "no own token":
        return sum(alpha**i for i in range(1, k + 1))
    if bug == "independent":
        return 1 + alpha * k
    if bug == "one short":
        return sum(alpha**i for i in range(k))
    if bug == "scaled":
        return k * (1 + alpha)
    return sum(alpha**i for i in range(k + 1))


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
    checks = (check.acceptance_rule, check.predict_tokens_per_call, check.acceptance_from_rounds,
              check.quantization_damage)
    for check_fn in checks:
        assert not check_fn(stub).attempted
    assert capsys.readouterr().out.count(NOT_ATTEMPTED) == len(checks)


def test_acceptance_rule_accepts_the_solution_and_names_the_classic_mistakes():
    assert check.acceptance_rule(rule).ok
    assert_rejected_with(check.acceptance_rule(lambda p, q: rule(p, q, "always")),
                         "accepting when q > p without the probability p/q")
    assert_rejected_with(check.acceptance_rule(lambda p, q: rule(p, q, "from p")),
                         "sampling the correction from p")
    assert_rejected_with(check.acceptance_rule(lambda p, q: rule(p, q, "uncapped")), "cap the ratio at 1")
    assert_rejected_with(check.acceptance_rule(lambda p, q: rule(p, q, "unnormalised")), "renormalise")


def test_acceptance_rule_names_a_nan_at_the_edge_cases():
    """The rule written without care for 0 / 0 passes the ordinary inputs and fails where p = q = 0 or p = q."""
    assert_rejected_with(check.acceptance_rule(lambda p, q: rule(p, q, "nan where both zero")),
                         "p / q is 0 / 0 = NaN where both are 0")
    assert_rejected_with(check.acceptance_rule(lambda p, q: rule(p, q, "nan when p equals q")),
                         "max(0, p - q) is all zeros when p = q")


def test_acceptance_rule_takes_any_probability_where_q_is_zero():
    """Where q = 0 the token is never proposed: 0 there is as right as 1, and the output is still p."""
    def zero_where_never_proposed(p, q):
        accept = torch.where(q > 0, torch.clamp(p / q, max=1.0), torch.zeros_like(p))
        return accept, rule(p, q)[1]
    assert check.acceptance_rule(zero_where_never_proposed).ok


def test_predict_tokens_per_call():
    assert check.predict_tokens_per_call(predict).ok
    assert_rejected_with(check.predict_tokens_per_call(lambda kept, k: predict(kept, k, "no own token")),
                         "count the target's own token")
    assert_rejected_with(check.predict_tokens_per_call(lambda kept, k: predict(kept, k, "independent")),
                         "α^i, not α each")


def test_acceptance_from_rounds_counts_examined_proposals_only():
    assert check.acceptance_from_rounds(from_rounds).ok
    assert_rejected_with(check.acceptance_from_rounds(lambda kept, k: from_rounds(kept, k, "unexamined")),
                         "never examined")
    assert_rejected_with(check.acceptance_from_rounds(lambda kept, k: 0.75), "kept per round [4, 1, 0, 4, 2, 3]")
    without_guard = check.acceptance_from_rounds(lambda kept, k: sum(kept) / sum(n + (n < k) for n in kept))
    assert_rejected_with(without_guard, "ZeroDivisionError")


def test_each_acceptance_mistake_fails_a_case_the_others_pass():
    """The cases separate the mistakes: every wrong count fails some case, and any two give different answers on
    some case, so the check can name which one was made."""
    cases = (([4, 1, 0, 4, 2, 3], 4), ([3, 3, 3], 3), ([2, 0, 1], 3), ([0, 0, 0, 0], 2), ([1, 0, 1, 1], 1),
             ([1, 1, 1], 2), ([6, 6, 2, 6], 6))

    def differ(bug, other, kept, k):
        return abs(from_rounds(kept, k, bug) - from_rounds(kept, k, other)) > 1e-12

    mistakes = ("unexamined", "every round", "per round")
    for bug in mistakes:
        assert any(differ(bug, None, kept, k) for kept, k in cases), bug
        for other in mistakes:
            if other != bug:
                assert any(differ(bug, other, kept, k) for kept, k in cases), (bug, other)


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


def test_every_named_mistake_is_diagnosed_as_itself():
    assert_diagnosed(check.acceptance_rule(lambda p, q: rule(p, q, "always")), "accept-without-ratio")
    assert_diagnosed(check.acceptance_rule(lambda p, q: rule(p, q, "uncapped")), "uncapped-ratio")
    assert_diagnosed(check.acceptance_rule(lambda p, q: rule(p, q, "inverted")), "inverted-ratio")
    assert_diagnosed(check.acceptance_rule(lambda p, q: rule(p, q, "from p")), "correction-from-p")
    assert_diagnosed(check.acceptance_rule(lambda p, q: rule(p, q, "unnormalised")), "residual-not-normalised")
    assert_diagnosed(check.acceptance_rule(lambda p, q: rule(p, q, "residual inverted")), "residual-inverted")
    assert_diagnosed(check.acceptance_rule(lambda p, q: rule(p, q, "nan where both zero")), "nan-where-both-zero")
    assert_diagnosed(check.acceptance_rule(lambda p, q: rule(p, q, "nan when p equals q")), "nan-when-p-equals-q")
    assert_diagnosed(check.predict_tokens_per_call(lambda kept, k: predict(kept, k, "no own token")), "no-own-token")
    assert_diagnosed(check.predict_tokens_per_call(lambda kept, k: predict(kept, k, "independent")),
                     "independent-terms")
    assert_diagnosed(check.predict_tokens_per_call(lambda kept, k: predict(kept, k, "one short")), "one-term-short")
    assert_diagnosed(check.predict_tokens_per_call(lambda kept, k: predict(kept, k, "scaled")), "scaled-by-k")
    assert_diagnosed(check.acceptance_from_rounds(lambda kept, k: from_rounds(kept, k, "unexamined")),
                     "counted-unexamined")
    assert_diagnosed(check.acceptance_from_rounds(lambda kept, k: from_rounds(kept, k, "every round")),
                     "rejection-in-every-round")
    assert_diagnosed(check.acceptance_from_rounds(lambda kept, k: from_rounds(kept, k, "per round")), "kept-per-round")
    assert_diagnosed(check.quantization_damage(lambda *a: damage(*a, bug="not restored")), "not-restored")
    assert_diagnosed(check.quantization_damage(lambda *a: damage(*a, bug="per tensor")), "per-tensor-scales")
    assert_diagnosed(check.quantization_damage(lambda *a: damage(*a, bug="reversed")), "kl-reversed")
    assert_diagnosed(check.quantization_damage(lambda *a: damage(*a, bug="left quantized")), "model-left-quantized")
