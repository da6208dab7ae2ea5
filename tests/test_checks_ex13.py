"""The lesson 13 checks accept the solutions, spot stubs, and name typical mistakes."""

import torch
import torch.nn.functional as F

from check_helpers import assert_diagnosed, assert_rejected_with, stub
from transformer_lib.checks import ex13_inside_a_trained_model as check
from transformer_lib.checks._feedback import NOT_ATTEMPTED
from transformer_lib.induction import half_losses
from transformer_lib.interpret import ablate_heads, head_output_means


def score(weights, tokens, shift=1, all_queries=False):
    total, counted = 0.0, 0
    for i in range(len(tokens)):
        earlier = [j for j in range(i) if tokens[j] == tokens[i]]
        if earlier:
            total += sum(weights[i, j + shift].item() for j in earlier)
            counted += 1
    return total / (len(tokens) if all_queries else counted)


def fixed_offset(weights, tokens):
    half = len(tokens) // 2
    return sum(weights[i, i - half + 1].item() for i in range(half, len(tokens))) / half


def ablation(model, tokens, kind="mean", which=1):
    means = head_output_means(model, tokens)
    losses = torch.zeros(model.config.num_layers, model.config.num_heads)
    for layer in range(model.config.num_layers):
        for head in range(model.config.num_heads):
            with ablate_heads(model, [(layer, head)], kind, means), torch.no_grad():
                logits = model(tokens)
            if which == 2:
                losses[layer, head] = F.cross_entropy(logits[:, :-1].flatten(0, 1), tokens[:, 1:].flatten())
            else:
                losses[layer, head] = half_losses(logits, tokens)[which]
    return losses


def ablation_leaving_a_hook(model, tokens):
    losses = ablation(model, tokens)
    model.blocks[0].self_attn.out_proj.register_forward_pre_hook(lambda module, args: None)
    return losses


@torch.no_grad()
def patch(model, tokens, depth, position, replacement, offset=0, everywhere=False, returned=True, remove=True):
    modules = [model.dropout, *model.blocks]

    def overwrite(module, args, output):
        output = output.clone()
        if everywhere:
            output[:] = replacement[:, None]
        else:
            output[:, position] = replacement
        return output if returned else None

    handle = modules[depth + offset].register_forward_hook(overwrite)
    try:
        return model(tokens)
    finally:
        if remove:
            handle.remove()


def test_stubs_are_not_attempted(capsys):
    checks = (check.induction_score_of, check.head_ablation_losses, check.patch_residual)
    for check_fn in checks:
        assert not check_fn(stub).attempted
    assert capsys.readouterr().out.count(NOT_ATTEMPTED) == len(checks)


def test_induction_score_accepts_the_solution_as_a_float_or_a_tensor():
    assert check.induction_score_of(score).ok
    assert check.induction_score_of(lambda w, t: torch.tensor(score(w, t))).ok


def test_induction_score_names_the_off_by_one():
    result = check.induction_score_of(lambda w, t: score(w, t, shift=0))
    assert_rejected_with(result, "off by one: you measured the weight on the earlier occurrence itself")
    assert_diagnosed(result, "weight-on-occurrence")


def test_induction_score_names_averaging_over_every_query_and_a_fixed_offset():
    assert_rejected_with(check.induction_score_of(lambda w, t: score(w, t, all_queries=True)),
                         "average only over the queries whose token occurred before")
    assert_rejected_with(check.induction_score_of(fixed_offset), "a fixed distance back")
    assert_diagnosed(check.induction_score_of(lambda w, t: score(w, t, all_queries=True)), "mean-over-all-queries")
    assert_diagnosed(check.induction_score_of(fixed_offset), "fixed-offset")


def test_head_ablation_losses_accepts_the_solution():
    assert check.head_ablation_losses(ablation).ok


def test_head_ablation_losses_names_zero_ablation_and_the_wrong_half():
    assert_rejected_with(check.head_ablation_losses(lambda m, t: ablation(m, t, kind="zero")), "you zero-ablated")
    assert_rejected_with(check.head_ablation_losses(lambda m, t: ablation(m, t, which=0)), "the loss on the first half")
    assert_rejected_with(check.head_ablation_losses(lambda m, t: ablation(m, t, which=2)), "the whole sequence")
    assert_diagnosed(check.head_ablation_losses(lambda m, t: ablation(m, t, kind="zero")), "zero-ablation")
    assert_diagnosed(check.head_ablation_losses(lambda m, t: ablation(m, t, which=0)), "first-half-loss")
    assert_diagnosed(check.head_ablation_losses(lambda m, t: ablation(m, t, which=2)), "whole-sequence-loss")


def test_head_ablation_losses_notices_a_hook_left_behind():
    assert_rejected_with(check.head_ablation_losses(ablation_leaving_a_hook), "a hook is still registered")
    assert_diagnosed(check.head_ablation_losses(ablation_leaving_a_hook), "hook-left-behind")


def test_patch_residual_accepts_the_solution():
    assert check.patch_residual(patch).ok


def test_patch_residual_names_typical_mistakes():
    assert_rejected_with(check.patch_residual(lambda *a: patch(*a, offset=1)), "off by one in depth")
    assert_rejected_with(check.patch_residual(lambda *a: patch(*a, everywhere=True)), "you replaced every position")
    assert_rejected_with(check.patch_residual(lambda *a: patch(*a, returned=False)), "nothing changed")
    assert_rejected_with(check.patch_residual(lambda *a: patch(*a, remove=False)), "a forward hook is still registered")
    assert_diagnosed(check.patch_residual(lambda *a: patch(*a, offset=1)), "depth-off-by-one")
    assert_diagnosed(check.patch_residual(lambda *a: patch(*a, everywhere=True)), "every-position")
    assert_diagnosed(check.patch_residual(lambda *a: patch(*a, returned=False)), "output-not-returned")
    assert_diagnosed(check.patch_residual(lambda *a: patch(*a, remove=False)), "hook-left-behind")
