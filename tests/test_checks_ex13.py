"""The lesson 13 checks accept the solutions, spot stubs, and name typical mistakes."""

import torch

from check_helpers import assert_diagnosed, assert_rejected_with, stub
from transformer_lib.checks import ex13_inside_a_trained_model as check
from transformer_lib.checks._feedback import NOT_ATTEMPTED


def duplicate(weights, tokens, shift=0, self_included=False, all_queries=False):
    """Every head's duplicate-token score over a batch, vectorised: weights (batch, heads, T, T), tokens (batch, T)
    -> (heads,). The keyword arguments make the classic mistakes."""
    length = tokens.shape[1]
    same = tokens[:, :, None] == tokens[:, None, :]  # (batch, T_q, T_k)
    mask = same & torch.ones(length, length, dtype=torch.bool).tril(0 if self_included else -1)
    keys = torch.zeros_like(mask)
    keys[:, :, shift:] = mask[:, :, : length - shift]  # shift 1: the key after each occurrence
    queries = mask.any(-1)  # (batch, T)
    per_query = (weights * keys[:, None]).sum(-1)  # (batch, heads, T)
    total = (per_query * queries[:, None]).sum(dim=(0, 2))  # (heads,)
    return total / (queries.numel() if all_queries else queries.sum())


def chance(tokens, keys_seen=1, one_occurrence=False, all_queries=False):
    """The uniform head's induction score counted: query i puts 1 / (i + keys_seen) on each of its targets."""
    total, counted = 0.0, 0
    for i in range(len(tokens)):
        occurrences = sum(1 for j in range(i) if tokens[j] == tokens[i])
        if occurrences:
            total += (1 if one_occurrence else occurrences) / (i + keys_seen)
            counted += 1
    return total / (len(tokens) if all_queries else counted)


@torch.no_grad()
def patch(model, tokens, depth, position, replacement, offset=0, everywhere=False, returned=True, remove=True,
          blocks_only=False):
    """The patch written out; the keyword arguments make the classic mistakes (``blocks_only``: ``model.blocks[depth
    - 1]`` for every depth, so depth 0 hooks the last block)."""
    modules = [model.blocks[-1], *model.blocks] if blocks_only else [model.dropout, *model.blocks]

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


@torch.no_grad()
def patch_by_pre_hook_left_behind(model, tokens, depth, position, replacement):
    """The same patch made on the next module's input, with the forward pre-hook never removed."""
    def overwrite(module, args):
        x = args[0].clone()
        x[:, position] = replacement
        return (x,)

    [*model.blocks, model.final_norm][depth].register_forward_pre_hook(overwrite)
    return model(tokens)


def patch_leaving_a_silent_hook(model, tokens, depth, position, replacement):
    """A right patch, plus a forward hook that changes nothing and stays on the model."""
    model.head.register_forward_hook(lambda module, args, output: None)
    return patch(model, tokens, depth, position, replacement)


def patch_then_change_a_weight(model, tokens, depth, position, replacement):
    logits = patch(model, tokens, depth, position, replacement)
    with torch.no_grad():
        model.head.weight.mul_(1.5)
    return logits


def test_stubs_are_not_attempted(capsys):
    checks = (check.duplicate_token_score_of, check.uniform_induction_score, check.patch_residual)
    for check_fn in checks:
        assert not check_fn(stub).attempted
    assert capsys.readouterr().out.count(NOT_ATTEMPTED) == len(checks)


def test_duplicate_token_score_accepts_the_solution():
    assert check.duplicate_token_score_of(duplicate).ok


def test_duplicate_token_score_rejects_a_constant():
    assert_rejected_with(check.duplicate_token_score_of(lambda w, t: 0.5), "duplicate-token scores")


def test_duplicate_token_score_names_typical_mistakes():
    induction = check.duplicate_token_score_of(lambda w, t: duplicate(w, t, shift=1))
    assert_rejected_with(induction, "which is the induction score")
    assert_diagnosed(induction, "induction-offset")
    with_self = check.duplicate_token_score_of(lambda w, t: duplicate(w, t, self_included=True))
    assert_rejected_with(with_self, "every token equals itself")
    assert_diagnosed(with_self, "self-included")
    every_query = check.duplicate_token_score_of(lambda w, t: duplicate(w, t, all_queries=True))
    assert_rejected_with(every_query, "average only over the queries whose token occurred before")
    assert_diagnosed(every_query, "mean-over-all-queries")


def test_uniform_induction_score_accepts_the_solution():
    assert check.uniform_induction_score(chance).ok


def test_uniform_induction_score_rejects_the_lessons_rounded_guess():
    assert_rejected_with(check.uniform_induction_score(lambda t: 0.07), "the chance induction score")


def test_uniform_induction_score_names_typical_mistakes():
    without_self = check.uniform_induction_score(lambda t: chance(t, keys_seen=0))
    assert_rejected_with(without_self, "query i sees i + 1 keys")
    assert_diagnosed(without_self, "prefix-without-self")
    one = check.uniform_induction_score(lambda t: chance(t, one_occurrence=True))
    assert_rejected_with(one, "has that many targets")
    assert_diagnosed(one, "one-occurrence-only")
    every_query = check.uniform_induction_score(lambda t: chance(t, all_queries=True))
    assert_diagnosed(every_query, "mean-over-all-queries")


def test_patch_residual_accepts_the_solution():
    assert check.patch_residual(patch).ok


def test_patch_residual_names_typical_mistakes():
    assert_rejected_with(check.patch_residual(lambda *a: patch(*a, offset=1)), "off by one in depth")
    assert_rejected_with(check.patch_residual(lambda *a: patch(*a, everywhere=True)), "you replaced every position")
    assert_rejected_with(check.patch_residual(lambda *a: patch(*a, returned=False)), "nothing changed")
    assert_diagnosed(check.patch_residual(lambda *a: patch(*a, offset=1)), "depth-off-by-one")
    assert_diagnosed(check.patch_residual(lambda *a: patch(*a, everywhere=True)), "every-position")
    assert_diagnosed(check.patch_residual(lambda *a: patch(*a, returned=False)), "output-not-returned")
    assert_diagnosed(check.patch_residual(lambda *a: patch(*a, blocks_only=True)), "depth-zero-is-last-block")


def test_patch_residual_catches_every_kind_of_hook_left_behind():
    forward = check.patch_residual(lambda *a: patch(*a, remove=False))
    assert_rejected_with(forward, "a hook is still registered on blocks.0")
    assert_diagnosed(forward, "hook-left-behind")
    pre = check.patch_residual(patch_by_pre_hook_left_behind)
    assert_rejected_with(pre, "a hook is still registered on blocks.1")
    assert_diagnosed(pre, "hook-left-behind")
    silent = check.patch_residual(patch_leaving_a_silent_hook)  # computes as before, but the hook is there
    assert_rejected_with(silent, "a hook is still registered on head")
    assert_diagnosed(silent, "hook-left-behind")


def test_patch_residual_compares_with_the_logits_from_before_the_call():
    changed = check.patch_residual(patch_then_change_a_weight)
    assert_rejected_with(changed, "its logits on the same tokens changed")
    assert_diagnosed(changed, "model-changed")
