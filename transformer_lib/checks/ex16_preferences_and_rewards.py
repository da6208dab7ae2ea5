"""Checks for lesson 16's exercises: a response's sequence log-probability, DPO's loss with a frozen reference, group
advantages (ties and groups kept apart), and PPO's clipped objective on hand-made ratios."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

from ..device import set_seed
from ..dpo import dpo_loss as reference_dpo_loss
from ..dpo import response_log_probs
from ..gpt import GPT, GPTConfig
from ..rl import clipped_objective as reference_clipped_objective
from ..rl import group_advantages as reference_group_advantages
from ..sft import IGNORE_INDEX, sft_batch
from ._feedback import CheckResult, Exercise, Hint, describe_mismatch

END_ID = 3  # every response's last token: the end token
PAD = END_ID  # the padding id the log-probability check passes: the end token, as lesson 16's training pads
VOCAB = 16


def _pairs() -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Two responses to one prompt (as a DPO pair has) and a third example, each ending with ``END_ID``; responses of
    3, 2 and 4 tokens, prompts of 4, 4 and 3, so two rows need padding."""
    return [(torch.tensor([5, 6, 7, 8]), torch.tensor([9, 10, 3])),
            (torch.tensor([5, 6, 7, 8]), torch.tensor([11, 3])),
            (torch.tensor([5, 6, 12]), torch.tensor([13, 14, 15, 3]))]


def _tiny_gpt() -> GPT:
    """A random one-layer GPT in float64, drawn from a fixed seed."""
    set_seed(16)
    return GPT(GPTConfig(vocab_size=VOCAB, block_size=16, d_model=16, num_heads=2, num_layers=1, d_ff=32)).double()


def sequence_log_probs(student_fn: Callable) -> CheckResult:
    """Check a function (model, pairs, pad_id) -> (batch,): each response's log-probability under the model, the sum
    over the response's tokens only, with the gradient kept."""
    ex = Exercise("sequence_log_probs")
    with ex.run():
        model, pairs = _tiny_gpt(), _pairs()
        got = ex.call(student_fn, model, [(p.clone(), r.clone()) for p, r in pairs], PAD)
        inputs, labels = sft_batch(pairs, PAD)
        with torch.no_grad():
            logits = model(inputs)  # (batch, T, V)
        kept = labels != IGNORE_INDEX  # (batch, T)
        label_ids = labels.clamp(min=0)[..., None]  # (batch, T, 1): ignored labels read as id 0, then multiplied by 0
        padded = labels.clone()  # padding positions labelled with the pad id, as if they were tokens
        first_dropped = labels.clone()  # the label at position T_p - 1 (the first response token) masked too
        for row, (prompt, response) in enumerate(pairs):
            padded[row, len(prompt) + len(response) - 1:] = PAD
            first_dropped[row, len(prompt) - 1] = IGNORE_INDEX
        ex.compare(
            "log π(response | prompt) of the three pairs: the sum over the response's tokens", got,
            response_log_probs(logits, labels),
            hint=Hint(idea="take log_softmax of the logits, pick each position's label, and add up only the "
                           "positions whose label is a response token",
                      code="log_probs.gather(-1, labels.clamp(min=0)[..., None])[..., 0] * (labels != -100)"),
            mistakes={
                Hint(idea="the prompt's tokens are in your sum: a response's log-probability counts only the "
                          "response's tokens (the prompt's labels are -100)", id="prompt-counted"): (
                    response_log_probs(logits, sft_batch(pairs, PAD, prompt_in_loss=True)[1])),
                Hint(idea="padding is in your sum: a padded position is not a token of the response, skip it",
                     id="padding-counted"): response_log_probs(logits, padded),
                Hint(idea="you averaged over the tokens: DPO's log π(y) is the sum of the tokens' log-probabilities "
                          "(the probability of the whole sequence)", id="mean-not-sum"): (
                    response_log_probs(logits, labels) / kept.sum(dim=1)),
                Hint(idea="you divided by the batch's padded length T: then a response's log-probability changes "
                          "with the other pairs in the batch. DPO's log π(y) is the sum over the response's tokens",
                     id="mean-over-padded-length"): response_log_probs(logits, labels) / labels.shape[1],
                Hint(idea="position t predicts token t + 1: score each position's logits against its label, not "
                          "against its own input token", id="labels-not-shifted"): (
                    response_log_probs(logits, torch.where(kept, inputs, IGNORE_INDEX))),
                Hint(idea="the first response token is missing: it is predicted at the prompt's last position "
                          "(T_p - 1), which keeps its label", id="first-token-dropped"): (
                    response_log_probs(logits, first_dropped)),
                Hint(idea="the end token is missing from your sum: here, as in lesson 16's training, the pad id is "
                          "also the end token, so padding found by its value (labels equal to pad_id) drops every "
                          "response's last token too. Find the padding by position (or by the -100 labels)",
                     id="padding-masked-by-value"): (
                    response_log_probs(logits, labels.masked_fill(labels == PAD, IGNORE_INDEX))),
                Hint(idea="log_softmax over the wrong axis: the logits are (batch, T, V), and each position's "
                          "distribution is over the vocabulary, dim=-1", id="log-softmax-wrong-axis"): (
                    (logits.log_softmax(dim=1).gather(-1, label_ids)[..., 0] * kept).sum(dim=-1)),
                Hint(idea="you added up raw logits: take log_softmax first, so each picked number is a "
                          "log-probability", id="logits-not-log-probs"): (
                    (logits.gather(-1, label_ids)[..., 0] * kept).sum(dim=-1)),
            },
        )
        ex.require(
            "the result carries a gradient, so the policy can be trained through it",
            isinstance(got, torch.Tensor) and got.requires_grad,
            hint=Hint(idea="you computed it without a gradient (torch.no_grad, .detach() or .item()): the caller "
                           "decides that, only for the reference model", id="log-probs-detached"),
        )
    return ex.result


# Four pairs' sequence log-probabilities under the policy and the reference: margins 1.5, 0, -0.5 and 4 nats
POLICY_CHOSEN = (-12.0, -20.0, -7.5, -30.0)
POLICY_REJECTED = (-14.0, -18.0, -9.0, -25.0)
REFERENCE_CHOSEN = (-13.0, -19.0, -8.0, -33.0)
REFERENCE_REJECTED = (-13.5, -17.0, -10.0, -24.0)
BETA = 0.5


def _log_probs(values: tuple[float, ...]) -> torch.Tensor:
    return torch.tensor(values, requires_grad=True)  # (batch,) float32, as a model's output


def dpo_loss(student_fn: Callable) -> CheckResult:
    """Check a function (policy_chosen, policy_rejected, reference_chosen, reference_rejected, beta) -> losses
    (batch,): DPO's loss per pair, the reference's log-probabilities treated as constants."""
    ex = Exercise("dpo_loss")
    with ex.run():
        pc, pr, rc, rr = map(_log_probs, (POLICY_CHOSEN, POLICY_REJECTED, REFERENCE_CHOSEN, REFERENCE_REJECTED))
        got = ex.call(student_fn, pc, pr, rc, rr, BETA)
        expected = reference_dpo_loss(pc, pr, rc, rr, BETA)[0].detach()  # (batch,)
        zeros = torch.zeros(len(POLICY_CHOSEN))
        values_ok = ex.compare(
            "the losses of four pairs, β = 0.5", got, expected,
            hint=Hint(idea="the implicit reward of a response is β (log π − log π_ref); the loss is −log σ of the "
                           "chosen reward minus the rejected one"),
            mistakes={
                Hint(idea="the sign is flipped: the loss must fall as the chosen response gains on the rejected one "
                          "(σ of chosen minus rejected)", id="sign-flipped"): (
                    reference_dpo_loss(pr, pc, rr, rc, BETA)[0].detach()),
                Hint(idea="the reference is not subtracted: DPO rewards how much more likely the policy makes a "
                          "response than the reference did, log π − log π_ref", id="reference-not-subtracted"): (
                    reference_dpo_loss(pc, pr, zeros, zeros, BETA)[0].detach()),
                Hint(idea="β is missing: it multiplies the log-ratios before the sigmoid", id="beta-missing"): (
                    reference_dpo_loss(pc, pr, rc, rr, 1.0)[0].detach()),
                Hint(idea="return one loss per pair (shape (batch,)), not their mean", id="averaged-over-pairs"): (
                    expected.mean()),
                Hint(idea="return one loss per pair (shape (batch,)), not their sum", id="summed-over-pairs"): (
                    expected.sum()),
                Hint(idea="β multiplies both log-ratios, the rejected response's as well as the chosen one's",
                     id="beta-on-one-reward"): -F.logsigmoid(BETA * (pc - rc) - (pr - rr)).detach(),
            },
        )
        if isinstance(got, torch.Tensor) and got.requires_grad:  # any shape: a mean still carries the gradient
            got.sum().backward()
        reference_grads = [g for g in (rc.grad, rr.grad) if g is not None and bool(g.any())]
        ex.require(
            "no gradient reaches the reference's log-probabilities (the reference model is frozen)",
            not reference_grads,
            hint=Hint(idea="the reference must be a constant: detach its log-probabilities inside the loss, so "
                           "a caller who forgot torch.no_grad still cannot train it",
                      code="reference_chosen.detach()", id="reference-not-frozen"),
        )
        ex.require(
            "the policy's log-probabilities receive a gradient",
            pc.grad is not None and bool(pc.grad.any()) and pr.grad is not None and bool(pr.grad.any()),
            hint=Hint(idea="keep the policy's log-probabilities in the graph: no .detach(), .item() or new tensor "
                           "built from their values", id="policy-detached"),
        )
        if not values_ok:
            return ex.result  # the far pair would show the same mistake again
        wrong_way = [torch.tensor([v]) for v in (-450.0, -60.0, -50.0, -60.0)]  # β · margin = 0.5 · (-400) = -200
        got_far = ex.call(student_fn, *wrong_way, BETA, description="dpo_loss(a pair ranked 400 nats the wrong way)")
        ex.compare(
            "a pair ranked very wrongly (β · margin = −200, float32) gives the loss 200, not inf", got_far,
            reference_dpo_loss(*wrong_way, BETA)[0],
            mistakes={
                Hint(idea="a margin of −200 leaves float32's range: σ(−200) rounds to 0 (and log 0 = −inf), "
                          "exp(200) to inf, so the loss comes out inf. Compute log σ in one stable step",
                     code="F.logsigmoid(x)", id="log-of-sigmoid"): torch.tensor([math.inf]),
            },
        )
    return ex.result


# Five prompts, four sampled responses each: exact-match rewards (0/1), a group all wrong, a group all right, and
# one graded reward; non-square, so mean and std over the wrong axis give other shapes or values
REWARDS = ((1.0, 0.0, 0.0, 0.0), (1.0, 1.0, 0.0, 1.0), (0.0, 0.0, 0.0, 0.0), (1.0, 1.0, 1.0, 1.0),
           (0.5, 0.0, 1.0, 0.25))
# Groups of three equal rewards whose float32 mean rounds away from them in any summation order: three copies have
# one sum, fl(fl(2v) + v) = fl(3v) (2v is exact), and for these values neither fl(fl(3v) / 3) nor fl(fl(3v) · fl(1/3))
# gives v back (tests/test_checks_ex16.py checks it in scalar arithmetic). The centred rewards are then about 1e-7,
# not 0; dividing them by (std + ε) with a std of 0 or as small leaves a number far from 0.
TIED = (1.7, 2.9, 0.85)
TIED_GROUP_SIZE = 3


def _tied_rewards() -> torch.Tensor:
    """(3 groups, 3) float32: each row three copies of one value of ``TIED``."""
    return torch.tensor(TIED)[:, None].repeat(1, TIED_GROUP_SIZE)


def _tie_hint(got: object) -> Hint:
    """The hint for tied groups whose advantages are not exactly 0, naming the largest one the answer gave."""
    largest = (f" (up to {got.detach().abs().nan_to_num(nan=math.inf).max().item():.2g} here)"
               if isinstance(got, torch.Tensor) and got.is_floating_point() and got.numel() else "")
    return Hint(idea=f"a group's float32 mean can round one unit away from its equal rewards, so the centred rewards "
                     f"are about 1e-7, not 0, while the std is 0 or as small (torch's std may compute its mean "
                     f"another way): dividing by (std + ε), or testing std == 0, leaves numbers far from 0{largest}. "
                     f"Test for a tie, every reward equal to the row's first, and give the group exactly 0",
                code="advantages.masked_fill((rewards == rewards[:, :1]).all(dim=1, keepdim=True), 0.0)",
                id="tie-rounds")


def _advantage_mistakes(rewards: torch.Tensor, expected: torch.Tensor, unbiased: bool) -> dict[Hint, torch.Tensor]:
    """Each typical wrong answer's advantages for ``rewards`` (groups, G), with the population std or the sample
    std (``unbiased``) as the answer's own convention."""
    def in_convention(advantages: torch.Tensor, n: int) -> torch.Tensor:  # the library's, over groups of n rewards
        return advantages * math.sqrt((n - 1) / n) if unbiased else advantages

    groups = rewards.shape[0]
    ties = (rewards == rewards[:, :1]).all(dim=1, keepdim=True)  # (groups, 1)
    return {
        Hint(idea="a group whose rewards are all equal has std 0: 0 / 0 gives NaN, which poisons the whole update. "
                  "Give such a group advantages of exactly 0 (test whether every reward equals the row's first); an "
                  "eps added to the std avoids the NaN but not a mean that rounds (next check)", id="zero-std-nan"): (
            expected.masked_fill(ties, math.nan)),
        Hint(idea="the advantages are not centred: subtract the group's mean first, so that a response better than "
                  "its siblings is positive and a worse one negative", id="not-centred"): (
            rewards / (rewards.std(dim=1, unbiased=unbiased, keepdim=True) + 1e-6)),
        Hint(idea="you normalised over the whole batch: each prompt's group is its own baseline, so take the mean and "
                  "std of each row", id="batch-normalised"): (
            in_convention(reference_group_advantages(rewards.reshape(1, -1)), rewards.numel()).reshape(rewards.shape)),
        Hint(idea="mean and std over the wrong axis: a row is one prompt's group, reduce along dim=1",
             id="wrong-axis"): in_convention(reference_group_advantages(rewards.T), groups).T,
        Hint(idea="the mean is the group's, but the std is taken down a column (across prompts): take it along each "
                  "row too", id="std-wrong-axis"): (
            (rewards - rewards.mean(dim=1, keepdim=True))
            / (rewards.std(dim=0, unbiased=unbiased, keepdim=True) + 1e-6)),
    }


def group_advantages(student_fn: Callable) -> CheckResult:
    """Check a function (rewards (groups, group_size)) -> advantages (groups, group_size): each reward minus its
    group's mean, divided by its group's std (+ a small eps), exactly 0 for a group of equal rewards. Either std is
    accepted, a convention: the population std (this course's) or the sample std (TRL's GRPOTrainer, with eps 1e-4);
    so is any eps up to about 1e-4 (rtol 1e-3). The named mistakes are tried in both conventions."""
    ex = Exercise("group_advantages")
    with ex.run():
        rewards = torch.tensor(REWARDS)  # (groups, G)
        got = ex.call(student_fn, rewards.clone())
        group_size = rewards.shape[1]
        population = reference_group_advantages(rewards)  # (groups, G): the course's convention
        sample = population * math.sqrt((group_size - 1) / group_size)  # (groups, G): the sample std's, TRL's
        uses_sample = describe_mismatch(got, sample, atol=1e-5, rtol=1e-3) is None
        expected = sample if uses_sample else population
        convention = "sample std, TRL's convention" if uses_sample else "population std, the course's convention"
        by_convention = [_advantage_mistakes(rewards, population, unbiased=False),
                         _advantage_mistakes(rewards, sample, unbiased=True)]
        mistakes = next((m for m in by_convention if any(describe_mismatch(got, wrong, atol=1e-5, rtol=1e-3) is None
                                                         for wrong in m.values())), by_convention[int(uses_sample)])
        if not ex.compare(
                f"the advantages of five groups of four (two groups with all rewards equal; {convention})", got,
                expected, atol=1e-5, rtol=1e-3,
                hint=Hint(idea="within each row (one prompt's group): subtract the row's mean, divide by the row's "
                               "std plus a small eps"),
                mistakes=mistakes):
            return ex.result  # the tied groups below would show the same mistake again
        values = ", ".join(f"{v:g}" for v in TIED)
        # All tied groups in one batch, then one alone: torch's std of equal values is exactly 0 through some
        # kernels and about 1e-7 through others (on one CPU a (1, G) batch went through another than a (3, G) one)
        for tied, what, claim in (
                (_tied_rewards(), f"groups of three equal rewards ({values})",
                 f"groups of three equal rewards ({values}: float32 holds none exactly) get advantages of exactly 0"),
                (_tied_rewards()[:1], f"one group of three equal rewards ({TIED[0]:g}) alone",
                 f"a batch of one such group ({TIED[0]:g}) gets advantages of exactly 0 too")):
            got_tied = ex.call(student_fn, tied.clone(), description=f"group_advantages({what})")
            problem = describe_mismatch(got_tied, torch.zeros_like(tied), atol=1e-7, rtol=0.0)
            if not ex.require(claim, problem is None, problem=problem or "", hint=_tie_hint(got_tied)):
                break
    return ex.result


# Hand-made ratios π_θ / π_old on both sides of the clip range [0.8, 1.2], for a positive and a negative advantage
RATIOS = (0.5, 0.7, 0.9, 1.0, 1.1, 1.3, 1.6)
ADVANTAGES = (1.5, -0.5)
CLIP_EPS = 0.2


def _ratio_inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(new log-probs, old log-probs, advantages), each (2, 7) float64: row 0 has A = 1.5, row 1 A = -0.5."""
    old = -torch.linspace(1.0, 3.0, len(RATIOS), dtype=torch.float64).expand(len(ADVANTAGES), -1)  # (2, 7)
    new = old + torch.tensor(RATIOS, dtype=torch.float64).log()  # (2, 7)
    advantages = torch.tensor(ADVANTAGES, dtype=torch.float64)[:, None].expand_as(old)  # (2, 7)
    return new.clone(), old.clone(), advantages.clone()


def _min_with_clip(wrong_ratio: torch.Tensor, advantages: torch.Tensor) -> torch.Tensor:
    """The clipped objective's min of a wrong answer's ratio, which may be negative (so no log of it goes through
    the library's function)."""
    return torch.minimum(wrong_ratio * advantages, wrong_ratio.clamp(1 - CLIP_EPS, 1 + CLIP_EPS) * advantages)


def clipped_objective(student_fn: Callable) -> CheckResult:
    """Check a function (new_log_probs, old_log_probs, advantages, clip_eps) -> the clipped surrogate, elementwise,
    to maximise; the old log-probabilities are constants."""
    ex = Exercise("clipped_objective")
    with ex.run():
        new, old, advantages = _ratio_inputs()
        new.requires_grad_(True)
        old.requires_grad_(True)
        got = ex.call(student_fn, new, old, advantages, CLIP_EPS)
        expected = reference_clipped_objective(new, old, advantages, CLIP_EPS)  # (2, 7)
        ratio = torch.tensor(RATIOS, dtype=torch.float64)  # (7,)
        values_ok = ex.compare(
            f"the objective for ratios {RATIOS} and advantages {ADVANTAGES} (one per row), ε = {CLIP_EPS}",
            got, expected.detach(),
            hint=Hint(idea="ratio = exp(new − old); take the smaller of ratio · A and clamp(ratio, 1 − ε, 1 + ε) · A"),
            mistakes={
                Hint(idea="max instead of min: the objective keeps the more pessimistic of the clipped and the "
                          "unclipped term, so the policy gains nothing by moving the ratio past the clip",
                     id="max-not-min"): -reference_clipped_objective(new, old, -advantages, CLIP_EPS).detach(),
                Hint(idea="the ratio is inverted: it is π_θ / π_old, the new policy over the one that sampled, "
                          "exp(new − old)", id="ratio-inverted"): (
                    reference_clipped_objective(old, new, advantages, CLIP_EPS).detach()),
                Hint(idea="you clipped the advantage: the clip bounds the ratio, how far the policy moved",
                     id="advantage-clipped"): torch.minimum(ratio * advantages,
                                                           ratio * advantages.clamp(1 - CLIP_EPS, 1 + CLIP_EPS)),
                Hint(idea="nothing is clipped: the second term of the min uses the ratio clamped to [1 − ε, 1 + ε]",
                     id="no-clip"): (ratio * advantages),
                Hint(idea="the sign is flipped: this is the objective to maximise (the training loss is its "
                          "negative, taken later)", id="objective-negated"): -expected.detach(),
                Hint(idea="the clipped term alone is not the objective: take the smaller of it and the unclipped "
                          "ratio · A, so a ratio that moved the wrong way keeps its full (pessimistic) value",
                     id="min-missing"): ratio.clamp(1 - CLIP_EPS, 1 + CLIP_EPS) * advantages,
                Hint(idea="the ratio of probabilities is exp of the difference of log-probabilities, not the "
                          "quotient of the log-probabilities themselves", id="log-probs-divided"): (
                    _min_with_clip(new.detach() / old.detach(), advantages)),
                Hint(idea="new − old is the log of the ratio: exponentiate it, ratio = exp(new − old)",
                     id="ratio-not-exponentiated"): (
                    _min_with_clip((new - old).detach(), advantages)),
            },
        )
        if isinstance(got, torch.Tensor) and got.requires_grad:  # any shape: a mean still carries the gradient
            got.sum().backward()
        ex.require(
            "no gradient reaches the old log-probabilities (the policy that sampled is a constant)",
            old.grad is None or not bool(old.grad.any()),
            hint=Hint(idea="the old policy's log-probabilities are fixed numbers from sampling time: detach them",
                      code="old_log_probs.detach()", id="old-not-detached"),
        )
        if not values_ok:
            return ex.result  # a wrong objective has a wrong gradient too: the same mistake again
        expected_grad = torch.autograd.grad(expected.sum(), new)[0]  # (2, 7): zero where the clip is active
        ex.compare(
            "the gradient with respect to new_log_probs: ratio · A where the ratio may still move, 0 where clipped",
            new.grad if new.grad is not None else torch.zeros_like(new), expected_grad,
            mistakes={
                Hint(idea="no gradient reaches the new log-probabilities: the ratio must be computed from them "
                          "inside the graph (no .detach() or .item())", id="new-detached"): (
                    torch.zeros_like(new)),
            },
        )
    return ex.result

