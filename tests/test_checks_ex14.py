"""The lesson 14 checks accept the solutions, spot stubs, and name typical mistakes."""

import torch

from check_helpers import assert_diagnosed, assert_rejected_with, stub
from transformer_lib.checks import ex14_faster_and_bigger as check
from transformer_lib.checks._feedback import NOT_ATTEMPTED


def rule(p, q, bug=None):
    accept = torch.ones_like(p) if bug == "always" else torch.clamp(p / q, max=1.0)
    if bug == "uncapped":
        accept = p / q
    if bug == "inverted":
        accept = torch.clamp(q / p, max=1.0)
    missing = (q - p).clamp(min=0) if bug == "residual inverted" else (p - q).clamp(min=0)
    correction = p if bug == "from p" else missing if bug == "unnormalised" else missing / missing.sum()
    return accept, correction


def per_channel(weight, bug=None):
    if bug == "per tensor":
        scales = (weight.abs().max() / 127).expand(weight.shape[0], 1)
    elif bug == "single":
        scales = weight.abs().max() / 127
    elif bug == "no 127":
        scales = weight.abs().amax(dim=1, keepdim=True)
    elif bug == "max":
        scales = weight.amax(dim=1, keepdim=True) / 127
    elif bug == "wrong axis":
        scales = weight.abs().amax(dim=0, keepdim=True) / 127
    else:
        scales = weight.abs().amax(dim=1, keepdim=True) / 127
    scaled = weight / scales
    values = scaled.trunc() if bug == "no rounding" else scaled.round()
    return values.clamp(-127, 127).to(torch.int8), scales


def average(model, world_size, all_reduce, bug=None):
    for p in model.parameters():
        if bug == "parameters":
            all_reduce(p.data)
            continue
        if bug == "copy":
            all_reduce(p.grad.clone())
            continue
        if bug != "no all_reduce":
            all_reduce(p.grad)
        if bug != "sum":
            p.grad /= world_size


def test_stubs_are_not_attempted(capsys):
    checks = (check.acceptance_rule, check.tokens_per_call, check.per_channel_int8, check.average_gradients)
    for check_fn in checks:
        assert not check_fn(stub).attempted
    assert capsys.readouterr().out.count(NOT_ATTEMPTED) == len(checks)


def test_acceptance_rule_accepts_the_solution_and_names_the_two_classic_mistakes():
    assert check.acceptance_rule(rule).ok
    assert_rejected_with(check.acceptance_rule(lambda p, q: rule(p, q, "always")),
                         "accepting when q > p without the probability p/q")
    assert_rejected_with(check.acceptance_rule(lambda p, q: rule(p, q, "from p")),
                         "sampling the correction from p")
    assert_rejected_with(check.acceptance_rule(lambda p, q: rule(p, q, "uncapped")), "cap the ratio at 1")
    assert_rejected_with(check.acceptance_rule(lambda p, q: rule(p, q, "unnormalised")), "renormalise")


def test_tokens_per_call():
    assert check.tokens_per_call(lambda a, k: sum(a**i for i in range(k + 1))).ok
    assert_rejected_with(check.tokens_per_call(lambda a, k: sum(a**i for i in range(1, k + 1))),
                         "count the target's own token")
    assert_rejected_with(check.tokens_per_call(lambda a, k: 1 + a * k), "a^i, not a each")


def test_per_channel_int8_rejects_per_tensor_and_the_wrong_axis():
    assert check.per_channel_int8(per_channel).ok
    assert_rejected_with(check.per_channel_int8(lambda w: per_channel(w, "per tensor")),
                         "one scale for the whole tensor")
    assert_rejected_with(check.per_channel_int8(lambda w: per_channel(w, "wrong axis")), "OUTPUT channel")
    assert_rejected_with(check.per_channel_int8(lambda w: per_channel(w, "no rounding")), "round to the nearest")


def test_average_gradients_rejects_a_sum_without_dividing():
    assert check.average_gradients(average).ok
    assert_rejected_with(check.average_gradients(lambda *a: average(*a, bug="sum")), "summing without dividing")
    assert_rejected_with(check.average_gradients(lambda *a: average(*a, bug="parameters")), "not the parameters p")


def test_average_gradients_reports_a_crash_on_one_rank():
    def crashes(model, world_size, all_reduce):
        raise ValueError("boom")

    assert_rejected_with(check.average_gradients(crashes), "boom")


def test_every_named_mistake_is_diagnosed_as_itself():
    assert_diagnosed(check.acceptance_rule(lambda p, q: rule(p, q, "always")), "accept-without-ratio")
    assert_diagnosed(check.acceptance_rule(lambda p, q: rule(p, q, "uncapped")), "uncapped-ratio")
    assert_diagnosed(check.acceptance_rule(lambda p, q: rule(p, q, "inverted")), "inverted-ratio")
    assert_diagnosed(check.acceptance_rule(lambda p, q: rule(p, q, "from p")), "correction-from-p")
    assert_diagnosed(check.acceptance_rule(lambda p, q: rule(p, q, "unnormalised")), "residual-not-normalised")
    assert_diagnosed(check.acceptance_rule(lambda p, q: rule(p, q, "residual inverted")), "residual-inverted")
    assert_diagnosed(check.tokens_per_call(lambda a, k: sum(a**i for i in range(1, k + 1))), "no-own-token")
    assert_diagnosed(check.tokens_per_call(lambda a, k: 1 + a * k), "independent-terms")
    assert_diagnosed(check.tokens_per_call(lambda a, k: sum(a**i for i in range(k))), "one-term-short")
    assert_diagnosed(check.per_channel_int8(lambda w: per_channel(w, "per tensor")), "per-tensor-scale")
    assert_diagnosed(check.per_channel_int8(lambda w: per_channel(w, "single")), "single-scale")
    assert_diagnosed(check.per_channel_int8(lambda w: per_channel(w, "wrong axis")), "wrong-axis")
    assert_diagnosed(check.per_channel_int8(lambda w: per_channel(w, "no 127")), "scale-not-divided")
    assert_diagnosed(check.per_channel_int8(lambda w: per_channel(w, "max")), "max-not-absmax")
    assert_diagnosed(check.per_channel_int8(lambda w: per_channel(w, "no rounding")), "truncated-not-rounded")
    assert_diagnosed(check.average_gradients(lambda *a: average(*a, bug="sum")), "sum-not-mean")
    assert_diagnosed(check.average_gradients(lambda *a: average(*a, bug="copy")), "reduced-a-copy")
    assert_diagnosed(check.average_gradients(lambda *a: average(*a, bug="no all_reduce")), "no-all-reduce")
    assert_diagnosed(check.average_gradients(lambda *a: average(*a, bug="parameters")), "reduced-parameters")
