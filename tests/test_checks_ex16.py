"""The lesson 16 checks accept the solutions, spot stubs, and name typical mistakes."""

import torch
import torch.nn.functional as F

from check_helpers import assert_diagnosed, assert_rejected_with, stub
from transformer_lib.checks import ex16_preferences_and_rewards as check
from transformer_lib.checks._feedback import NOT_ATTEMPTED


def log_probs(model, pairs, pad_id, bug=None):
    length = max(len(p) + len(r) for p, r in pairs) - 1
    inputs = torch.full((len(pairs), length), pad_id)
    targets = torch.full((len(pairs), length), pad_id)
    keep = torch.zeros(len(pairs), length, dtype=torch.bool)
    for row, (prompt, response) in enumerate(pairs):
        sequence = torch.cat((prompt, response))
        n = len(sequence) - 1
        inputs[row, :n] = sequence[:-1]
        targets[row, :n] = sequence[:-1] if bug == "unshifted" else sequence[1:]
        first = {"prompt": 0, "first": len(prompt)}.get(bug, len(prompt) - 1)
        keep[row, first:length if bug == "padding" else n] = True
    if bug == "no grad":
        with torch.no_grad():
            logits = model(inputs)
    else:
        logits = model(inputs)
    picked = logits.log_softmax(-1).gather(-1, targets[..., None])[..., 0]  # (batch, T)
    total = (picked * keep).sum(-1)
    if bug == "padded mean":
        return total / length
    return total / keep.sum(-1) if bug == "mean" else total


def log_probs_with(bug):
    return lambda model, pairs, pad_id: log_probs(model, pairs, pad_id, bug)


def test_stubs_are_not_attempted(capsys):
    checks = (check.sequence_log_probs, check.dpo_loss, check.group_advantages, check.clipped_objective)
    for check_fn in checks:
        assert not check_fn(stub).attempted
    assert capsys.readouterr().out.count(NOT_ATTEMPTED) == len(checks)


def test_sequence_log_probs_accepts_the_solution_and_names_each_mistake():
    assert check.sequence_log_probs(log_probs).ok
    assert_diagnosed(check.sequence_log_probs(log_probs_with("prompt")), "prompt-counted")
    assert_diagnosed(check.sequence_log_probs(log_probs_with("padding")), "padding-counted")
    assert_diagnosed(check.sequence_log_probs(log_probs_with("mean")), "mean-not-sum")
    assert_diagnosed(check.sequence_log_probs(log_probs_with("padded mean")), "mean-over-padded-length")
    assert_diagnosed(check.sequence_log_probs(log_probs_with("unshifted")), "labels-not-shifted")
    assert_diagnosed(check.sequence_log_probs(log_probs_with("first")), "first-token-dropped")
    assert_diagnosed(check.sequence_log_probs(log_probs_with("no grad")), "log-probs-detached")
    assert_rejected_with(check.sequence_log_probs(log_probs_with("prompt")), "the prompt's tokens are in your sum")


def dpo(policy_chosen, policy_rejected, reference_chosen, reference_rejected, beta, bug=None):
    if bug != "not frozen":
        reference_chosen, reference_rejected = reference_chosen.detach(), reference_rejected.detach()
    if bug == "policy detached":
        policy_chosen, policy_rejected = policy_chosen.detach(), policy_rejected.detach()
    chosen = policy_chosen - (0 if bug == "no reference" else reference_chosen)
    rejected = policy_rejected - (0 if bug == "no reference" else reference_rejected)
    logits = (1.0 if bug == "no beta" else beta) * (chosen - rejected)
    if bug == "sign":
        logits = -logits
    if bug == "log of sigmoid":
        losses = -torch.log(torch.sigmoid(logits))
    else:
        losses = -F.logsigmoid(logits)
    return losses.mean() if bug == "mean" else losses


def dpo_with(bug):
    return lambda pc, pr, rc, rr, beta: dpo(pc, pr, rc, rr, beta, bug)


def test_dpo_loss_accepts_the_solution_and_names_each_mistake():
    assert check.dpo_loss(dpo).ok
    assert_diagnosed(check.dpo_loss(dpo_with("sign")), "sign-flipped")
    assert_diagnosed(check.dpo_loss(dpo_with("no reference")), "reference-not-subtracted")
    assert_diagnosed(check.dpo_loss(dpo_with("no beta")), "beta-missing")
    assert_diagnosed(check.dpo_loss(dpo_with("mean")), "averaged-over-pairs")
    assert_diagnosed(check.dpo_loss(dpo_with("not frozen")), "reference-not-frozen")
    assert_diagnosed(check.dpo_loss(dpo_with("policy detached")), "policy-detached")
    assert_diagnosed(check.dpo_loss(dpo_with("log of sigmoid")), "log-of-sigmoid")
    assert_rejected_with(check.dpo_loss(dpo_with("not frozen")), "no gradient reaches the reference")
    # the unstable form agrees with the stable one on ordinary margins: only the far pair tells them apart
    assert check.dpo_loss(dpo_with("log of sigmoid")).passed == check.dpo_loss(dpo).passed - 1


def advantages(rewards, bug=None, eps=1e-6):
    rows = rewards.reshape(1, -1) if bug == "batch" else rewards.T if bug == "axis" else rewards
    mean = rows.mean(dim=1, keepdim=True)
    std = rows.std(dim=1, unbiased=bug == "sample", keepdim=True)
    centred = rows if bug == "uncentred" else rows - mean
    if bug == "std axis":
        std = rows.std(dim=0, unbiased=False)  # (G,), broadcast over the groups
    result = centred / std if bug == "no eps" else centred / (std + eps)
    result = result.reshape(rewards.shape) if bug == "batch" else result.T if bug == "axis" else result
    if bug is None:  # the solution: a tied group gets exactly 0, whatever its mean rounds to
        result = result.masked_fill((rewards == rewards[:, :1]).all(dim=1, keepdim=True), 0.0)
    return result


def test_group_advantages_accepts_the_solution_and_names_each_mistake():
    assert check.group_advantages(advantages).ok
    # handling a group of equal rewards explicitly, without eps, is right too
    assert check.group_advantages(
        lambda r: advantages(r, "no eps").masked_fill((r == r[:, :1]).all(dim=1, keepdim=True), 0.0)).ok
    assert_diagnosed(check.group_advantages(lambda r: advantages(r, "no eps")), "zero-std-nan")
    # eps alone: no NaN, but a tied group whose float32 mean rounds (3.3 here) gets 0.19, not 0
    eps_only = check.group_advantages(lambda r: advantages(r, "eps only"))
    assert_diagnosed(eps_only, "tie-rounds")
    assert eps_only.passed == check.group_advantages(advantages).passed - 1
    assert_diagnosed(check.group_advantages(lambda r: advantages(r, "uncentred")), "not-centred")
    assert_diagnosed(check.group_advantages(lambda r: advantages(r, "batch")), "batch-normalised")
    assert_diagnosed(check.group_advantages(lambda r: advantages(r, "axis")), "wrong-axis")
    # the sample std is TRL's convention, accepted like the population std, with TRL's eps = 1e-4 too
    assert check.group_advantages(
        lambda r: advantages(r, "sample").masked_fill((r == r[:, :1]).all(dim=1, keepdim=True), 0.0)).ok
    assert check.group_advantages(
        lambda r: advantages(r, "sample", eps=1e-4).masked_fill((r == r[:, :1]).all(dim=1, keepdim=True), 0.0)).ok
    # TRL's formula as it is (no tie test): a tied group whose mean rounds gets about 2e-3, and the hint names it
    trl = check.group_advantages(lambda r: advantages(r, "sample", eps=1e-4))
    assert_diagnosed(trl, "tie-rounds")
    assert_rejected_with(trl, "(std + 0.0001)")
    assert_diagnosed(check.group_advantages(lambda r: advantages(r, "std axis")), "std-wrong-axis")
    assert_rejected_with(check.group_advantages(lambda r: advantages(r, "no eps")), "your result contains NaN")
    # forgetting keepdim on a non-square batch raises, and the check says where
    no_keepdim = check.group_advantages(lambda r: (r - r.mean(dim=1)) / (r.std(dim=1) + 1e-6))
    assert_rejected_with(no_keepdim, "raised RuntimeError")


def clipped(new, old, adv, clip_eps, bug=None):
    if bug != "old attached":
        old = old.detach()
    if bug == "new detached":
        new = new.detach()
    ratio = torch.exp(old - new) if bug == "inverted" else torch.exp(new - old)
    unclipped = ratio * adv
    if bug == "advantage":
        other = ratio * adv.clamp(1 - clip_eps, 1 + clip_eps)
    elif bug == "no clip":
        other = unclipped
    else:
        other = ratio.clamp(1 - clip_eps, 1 + clip_eps) * adv
    result = torch.maximum(unclipped, other) if bug == "max" else torch.minimum(unclipped, other)
    return -result if bug == "negated" else result


def clipped_with(bug):
    return lambda new, old, adv, clip_eps: clipped(new, old, adv, clip_eps, bug)


def test_clipped_objective_accepts_the_solution_and_names_each_mistake():
    assert check.clipped_objective(clipped).ok
    assert_diagnosed(check.clipped_objective(clipped_with("max")), "max-not-min")
    assert_diagnosed(check.clipped_objective(clipped_with("inverted")), "ratio-inverted")
    assert_diagnosed(check.clipped_objective(clipped_with("advantage")), "advantage-clipped")
    assert_diagnosed(check.clipped_objective(clipped_with("no clip")), "no-clip")
    assert_diagnosed(check.clipped_objective(clipped_with("negated")), "objective-negated")
    assert_diagnosed(check.clipped_objective(clipped_with("old attached")), "old-not-detached")
    assert_diagnosed(check.clipped_objective(clipped_with("new detached")), "new-detached")
    assert_rejected_with(check.clipped_objective(clipped_with("max")), "max instead of min")


def test_constant_answers_and_the_notebooks_buggy_code_are_rejected():
    assert not check.dpo_loss(lambda pc, pr, rc, rr, beta: torch.zeros(len(pc))).ok
    assert not check.group_advantages(torch.zeros_like).ok
    assert not check.clipped_objective(lambda new, old, adv, clip_eps: torch.zeros_like(new)).ok
    colleagues = check.group_advantages(lambda r: (r - r.mean()) / r.std(unbiased=False))  # the notebook's version
    assert_diagnosed(colleagues, "batch-normalised")
