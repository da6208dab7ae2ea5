"""The lesson 16 checks accept the solutions, spot stubs, and name typical mistakes."""

import numpy as np
import torch
import torch.nn.functional as F

from check_helpers import assert_diagnosed, assert_rejected_with, stub
from transformer_lib import sft_batch
from transformer_lib.checks import ex16_preferences_and_rewards as check
from transformer_lib.checks._feedback import NOT_ATTEMPTED


def diagnoses(result):
    return [d["mistake"] for d in result.diagnoses]


def once(result):
    """``result``, after asserting that it names one mistake at most: one mistake, one diagnosis."""
    assert len(result.diagnoses) <= 1, result.lines
    return result


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
    if bug == "by value":  # the padding found by its value: the end token, which pads here, is dropped too
        keep &= targets != pad_id
    normalised = logits if bug == "raw logits" else logits.log_softmax(1 if bug == "axis" else -1)
    picked = normalised.gather(-1, targets[..., None])[..., 0]  # (batch, T)
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
    assert_diagnosed(check.sequence_log_probs(log_probs_with("by value")), "padding-masked-by-value")
    assert_diagnosed(check.sequence_log_probs(log_probs_with("axis")), "log-softmax-wrong-axis")
    assert_diagnosed(check.sequence_log_probs(log_probs_with("raw logits")), "logits-not-log-probs")


def test_sequence_log_probs_pads_with_the_end_token_and_accepts_other_writings():
    assert all(response[-1].item() == check.PAD for _, response in check._pairs())  # as lesson 16's training pads

    def cross_entropy(model, pairs, pad_id):  # right too: minus the per-token loss, summed
        inputs, labels = sft_batch(pairs, pad_id)
        return -F.cross_entropy(model(inputs).transpose(1, 2), labels, reduction="none").sum(-1)

    def one_pair_at_a_time(model, pairs, pad_id):  # right too: no padding at all
        totals = []
        for prompt, response in pairs:
            sequence = torch.cat((prompt, response))
            log_probs = model(sequence[None, :-1])[0].log_softmax(-1)  # (T, V)
            totals.append(log_probs[len(prompt) - 1:].gather(-1, response[:, None]).sum())
        return torch.stack(totals)

    assert check.sequence_log_probs(cross_entropy).ok
    assert check.sequence_log_probs(one_pair_at_a_time).ok


def dpo(policy_chosen, policy_rejected, reference_chosen, reference_rejected, beta, bug=None):
    if bug != "not frozen":
        reference_chosen, reference_rejected = reference_chosen.detach(), reference_rejected.detach()
    if bug == "policy detached":
        policy_chosen, policy_rejected = policy_chosen.detach(), policy_rejected.detach()
    chosen = policy_chosen - (0 if bug == "no reference" else reference_chosen)
    rejected = policy_rejected - (0 if bug == "no reference" else reference_rejected)
    logits = (1.0 if bug == "no beta" else beta) * (chosen - rejected)
    if bug == "beta on one":
        logits = beta * chosen - rejected
    if bug == "sign":
        logits = -logits
    if bug == "log of sigmoid":
        losses = -torch.log(torch.sigmoid(logits))
    elif bug == "log1p exp":  # overflows the other way: exp(200) is inf in float32
        losses = torch.log1p(torch.exp(-logits))
    elif bug == "softplus":  # right too: −log σ(x) = softplus(−x)
        losses = F.softplus(-logits)
    else:
        losses = -F.logsigmoid(logits)
    return {"mean": losses.mean(), "sum": losses.sum()}.get(bug, losses)


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
    assert check.dpo_loss(dpo_with("softplus")).ok
    log1p_exp = check.dpo_loss(dpo_with("log1p exp"))
    assert_diagnosed(log1p_exp, "log-of-sigmoid")
    assert_rejected_with(log1p_exp, "exp(200) to inf")  # the hint holds for this writing too
    assert_diagnosed(check.dpo_loss(dpo_with("sum")), "summed-over-pairs")
    assert_diagnosed(check.dpo_loss(dpo_with("beta on one")), "beta-on-one-reward")
    # one mistake, one diagnosis: a mean still carries the policy's gradient, and the far pair is not tried again
    assert_diagnosed(once(check.dpo_loss(dpo_with("mean"))), "averaged-over-pairs")
    assert_diagnosed(once(check.dpo_loss(dpo_with("sign"))), "sign-flipped")


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
    # eps alone: no NaN, but a tied group whose float32 mean rounds gets about 0.1, not 0
    eps_only = check.group_advantages(lambda r: advantages(r, "eps only"))
    assert_diagnosed(once(eps_only), "tie-rounds")
    assert eps_only.passed == 1  # the ordinary groups pass
    assert_diagnosed(check.group_advantages(lambda r: advantages(r, "uncentred")), "not-centred")
    assert_diagnosed(check.group_advantages(lambda r: advantages(r, "batch")), "batch-normalised")
    assert_diagnosed(check.group_advantages(lambda r: advantages(r, "axis")), "wrong-axis")
    # the sample std is TRL's convention, accepted like the population std, with TRL's eps = 1e-4 too
    assert check.group_advantages(
        lambda r: advantages(r, "sample").masked_fill((r == r[:, :1]).all(dim=1, keepdim=True), 0.0)).ok
    assert check.group_advantages(
        lambda r: advantages(r, "sample", eps=1e-4).masked_fill((r == r[:, :1]).all(dim=1, keepdim=True), 0.0)).ok
    # TRL's formula as it is (no tie test): a tied group whose mean rounds gets about 1e-3, and the hint names it
    trl = check.group_advantages(lambda r: advantages(r, "sample", eps=1e-4))
    assert_diagnosed(trl, "tie-rounds")
    assert_rejected_with(trl, "dividing by (std + ε)")
    assert_diagnosed(check.group_advantages(lambda r: advantages(r, "std axis")), "std-wrong-axis")
    assert_rejected_with(check.group_advantages(lambda r: advantages(r, "no eps")), "your result contains NaN")
    # forgetting keepdim on a non-square batch raises, and the check says where
    no_keepdim = check.group_advantages(lambda r: (r - r.mean(dim=1)) / (r.std(dim=1) + 1e-6))
    assert_rejected_with(no_keepdim, "raised RuntimeError")


def test_the_tied_rewards_mean_rounds_in_any_summation_order():
    """Three equal float32 values have one sum whatever the order, fl(fl(2v) + v) = fl(3v) (2v is exact), and for
    every value the check uses, the mean of that sum, divided by 3 or multiplied by fl(1/3), is not v."""
    three, third = np.float32(3), np.float32(1) / np.float32(3)
    assert check.TIED_GROUP_SIZE == 3
    for value in map(np.float32, check.TIED):
        total = np.float32(np.float32(value + value) + value)
        assert np.float32(total / three) != value and np.float32(total * third) != value, value


def test_group_advantages_names_mistakes_in_the_sample_std_convention_and_tries_other_ties():
    def sample(wrong):  # torch's default std (the sample std), as a hurried learner writes it
        return lambda r: wrong(r, lambda x, **kw: x.std(**kw))

    def batch(r, std):
        return (r - r.mean()) / (std(r) + 1e-6)

    def columns(r, std):
        return (r - r.mean(dim=0)) / (std(r, dim=0) + 1e-6)

    def uncentred(r, std):
        return r / (std(r, dim=1, keepdim=True) + 1e-6)

    assert_diagnosed(check.group_advantages(sample(batch)), "batch-normalised")
    assert_diagnosed(check.group_advantages(sample(columns)), "wrong-axis")
    assert_diagnosed(check.group_advantages(sample(uncentred)), "not-centred")
    assert_diagnosed(once(check.group_advantages(lambda r: advantages(r, "axis"))), "wrong-axis")  # not the ties too

    def rows_in_float64(r):  # right too: a loop over the groups, in float64, ties skipped
        out = torch.zeros(r.shape, dtype=torch.float64)
        for i, row in enumerate(r.double()):
            if not (row == row[0]).all():
                out[i] = (row - row.mean()) / (row.std(unbiased=False) + 1e-6)
        return out

    def range_tie(r):  # right too: a tie is a group whose range is 0
        ties = (r.amax(dim=1, keepdim=True) - r.amin(dim=1, keepdim=True)) == 0
        return advantages(r, "eps only").masked_fill(ties, 0.0)

    assert check.group_advantages(rows_in_float64).ok
    assert check.group_advantages(range_tie).ok

    def std_zero_test(r):  # a tie found as std == 0: right only where torch's std of equal values is exactly 0
        std = r.std(dim=1, unbiased=False, keepdim=True)
        return torch.where(std == 0, 0.0, (r - r.mean(dim=1, keepdim=True)) / std)

    one_group = check._tied_rewards()[:1]  # (1, 3): on some CPUs another kernel, whose std of equal values is 1e-7
    if one_group.std(dim=1, unbiased=False).item() != 0:
        assert_diagnosed(once(check.group_advantages(std_zero_test)), "tie-rounds")


def clipped(new, old, adv, clip_eps, bug=None):
    if bug != "old attached":
        old = old.detach()
    if bug == "new detached":
        new = new.detach()
    ratio = {"inverted": torch.exp(old - new), "divided": new / old, "no exp": new - old,
             "exp of each": new.exp() / old.exp()}.get(bug, torch.exp(new - old))
    unclipped = ratio * adv
    if bug == "advantage":
        other = ratio * adv.clamp(1 - clip_eps, 1 + clip_eps)
    elif bug == "no clip":
        other = unclipped
    else:
        other = ratio.clamp(1 - clip_eps, 1 + clip_eps) * adv
    result = torch.maximum(unclipped, other) if bug == "max" else torch.minimum(unclipped, other)
    if bug == "clipped only":
        result = other
    elif bug == "where":  # right too: the min written with torch.where
        result = torch.where(unclipped < other, unclipped, other)
    return {"negated": -result, "mean": result.mean()}.get(bug, result)


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
    assert_diagnosed(check.clipped_objective(clipped_with("clipped only")), "min-missing")
    assert_diagnosed(check.clipped_objective(clipped_with("divided")), "log-probs-divided")
    assert_diagnosed(check.clipped_objective(clipped_with("no exp")), "ratio-not-exponentiated")
    assert check.clipped_objective(clipped_with("exp of each")).ok
    assert check.clipped_objective(clipped_with("where")).ok
    # one mistake, one diagnosis: a wrong objective's gradient is not compared (nor blamed on a detached input)
    assert_diagnosed(once(check.clipped_objective(clipped_with("max"))), "max-not-min")
    assert diagnoses(check.clipped_objective(clipped_with("mean"))) == ["other-wrong-answer"]


def test_constant_answers_and_the_notebooks_buggy_code_are_rejected():
    assert not check.dpo_loss(lambda pc, pr, rc, rr, beta: torch.zeros(len(pc))).ok
    assert not check.group_advantages(torch.zeros_like).ok
    assert not check.clipped_objective(lambda new, old, adv, clip_eps: torch.zeros_like(new)).ok
    colleagues = check.group_advantages(lambda r: (r - r.mean()) / r.std(unbiased=False))  # the notebook's version
    assert_diagnosed(colleagues, "batch-normalised")
