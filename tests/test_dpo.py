"""DPO (transformer_lib/dpo.py): the response log-probability, the loss and its gradient against the paper's closed
form (TRL 1.16 computes its DPO loss inside ``DPOTrainer``, not in a function callable on tensors), the preference
pairs, and the trained claims lesson 16 asserts, on the lesson's seed by default and on 5 seeds in 3 CPU kernel settings
with `course.py bounds`."""

import copy

import pytest
import torch
import torch.nn.functional as F

from bounds import bound, bound_seeds
from transformer_lib import GPT, CharTokenizer, GPTConfig
from transformer_lib.dpo import DPORecipe, answer_kl, dpo_loss, dpo_tuned, preference_pairs, response_log_probs
from transformer_lib.preferences import start_run, task_instructions
from transformer_lib.sft import IGNORE_INDEX, Instruction, exact_match_by_task, greedy_answers, sft_batch


def tiny_model(seed: int = 0) -> GPT:
    torch.manual_seed(seed)
    return GPT(GPTConfig(vocab_size=7, block_size=16, d_model=16, num_heads=2, num_layers=1, d_ff=32)).double().eval()


def test_response_log_probs_sums_the_response_tokens_only():
    torch.manual_seed(0)
    logits = torch.randn(2, 4, 5, dtype=torch.float64)  # (batch, T, V)
    labels = torch.tensor([[IGNORE_INDEX, 3, 1, IGNORE_INDEX], [IGNORE_INDEX, IGNORE_INDEX, 4, 0]])  # (batch, T)
    log_probs = logits.log_softmax(-1)
    expected = torch.stack([log_probs[0, 1, 3] + log_probs[0, 2, 1], log_probs[1, 2, 4] + log_probs[1, 3, 0]])
    torch.testing.assert_close(response_log_probs(logits, labels), expected)


def test_response_log_probs_on_sft_batch_labels_leaves_the_prompt_out():
    pairs = [(torch.tensor([1, 2, 3]), torch.tensor([4, 5])), (torch.tensor([1, 2]), torch.tensor([6]))]
    inputs, labels = sft_batch(pairs, pad_id=0)  # (2, 4)
    assert (labels != IGNORE_INDEX).sum(dim=1).tolist() == [2, 1]  # the response tokens, nothing else
    torch.manual_seed(0)
    logits = torch.randn(*inputs.shape, 7, dtype=torch.float64)
    with_prompt = response_log_probs(logits, sft_batch(pairs, pad_id=0, prompt_in_loss=True)[1])
    assert (with_prompt < response_log_probs(logits, labels)).all()  # more negative terms when the prompt counts


def test_dpo_loss_values_and_rewards():
    pc, pr = torch.tensor([-1.0, -3.0], dtype=torch.float64), torch.tensor([-2.0, -1.0], dtype=torch.float64)
    rc, rr = torch.tensor([-1.5, -2.0], dtype=torch.float64), torch.tensor([-1.5, -2.0], dtype=torch.float64)
    losses, chosen, rejected = dpo_loss(pc, pr, rc, rr, beta=0.5)
    torch.testing.assert_close(chosen, torch.tensor([0.25, -0.5], dtype=torch.float64))
    torch.testing.assert_close(rejected, torch.tensor([-0.25, 0.5], dtype=torch.float64))
    torch.testing.assert_close(losses, -F.logsigmoid(torch.tensor([0.5, -1.0], dtype=torch.float64)))
    # equal policy and reference: every reward is 0 and the loss is log 2, whatever β
    losses, chosen, _ = dpo_loss(rc, rr, rc, rr, beta=3.0)
    assert torch.equal(chosen, torch.zeros(2, dtype=torch.float64))
    torch.testing.assert_close(losses, torch.full((2,), 0.6931471805599453, dtype=torch.float64))


def test_reference_log_probs_get_no_gradient():
    reference = torch.tensor([-1.0, -2.0], requires_grad=True)
    policy = torch.tensor([-1.5, -1.0], requires_grad=True)
    losses, _, _ = dpo_loss(policy[:1], policy[1:], reference[:1], reference[1:], beta=0.1)
    losses.sum().backward()
    assert reference.grad is None and policy.grad is not None


def test_dpo_gradient_matches_the_papers_closed_form():
    """Rafailov et al. 2023, gradient of eq. 7: −β σ(r̂_l − r̂_w) [∇log π(y_w) − ∇log π(y_l)], on a tiny model."""
    beta = 0.3
    policy = tiny_model(0)
    reference = tiny_model(1).requires_grad_(False)
    chosen = [(torch.tensor([1, 2, 3]), torch.tensor([4, 5]))]
    rejected = [(torch.tensor([1, 2, 3]), torch.tensor([6, 5, 5]))]

    def log_prob(model, pairs):
        inputs, labels = sft_batch(pairs, pad_id=0)
        return response_log_probs(model(inputs), labels)[0]

    def grads(scalar):
        return torch.autograd.grad(scalar, list(policy.parameters()))

    pc, pr = log_prob(policy, chosen), log_prob(policy, rejected)
    rc, rr = log_prob(reference, chosen), log_prob(reference, rejected)
    losses, r_w, r_l = dpo_loss(pc[None], pr[None], rc[None], rr[None], beta)
    autograd = grads(losses.sum())
    weight = -beta * torch.sigmoid(r_l - r_w).item()
    closed = [weight * (gw - gl) for gw, gl in zip(grads(log_prob(policy, chosen)), grads(log_prob(policy, rejected)),
                                                   strict=True)]
    for a, c in zip(autograd, closed, strict=True):
        torch.testing.assert_close(a, c)
    assert max(a.abs().max().item() for a in autograd) > 1e-3  # a real gradient, not zeros equal to zeros


@pytest.mark.trained
@pytest.mark.parametrize("seed", bound_seeds((0,)))
def test_a_frozen_copy_stays_put_while_the_policy_learns(seed):
    policy = tiny_model(seed)
    reference = copy.deepcopy(policy).requires_grad_(False).eval()
    pairs = [(torch.tensor([1, 2]), torch.tensor([3, 4]))]
    inputs, labels = sft_batch(pairs, pad_id=0)
    before = response_log_probs(reference(inputs), labels)
    optimizer = torch.optim.SGD(policy.parameters(), lr=0.5)
    for _ in range(3):
        losses, _, _ = dpo_loss(response_log_probs(policy(inputs), labels), torch.zeros(1, dtype=torch.float64),
                                response_log_probs(reference(inputs), labels), torch.zeros(1, dtype=torch.float64),
                                beta=1.0)
        optimizer.zero_grad()
        losses.sum().backward()
        optimizer.step()
    assert torch.equal(response_log_probs(reference(inputs), labels), before)
    bound("policy's log-probability rise", response_log_probs(policy(inputs), labels).item() - before.item(),
          at_least=0.1)


def test_preference_pairs_keep_only_wrong_answers_and_prefer_the_right_one():
    tokenizer = CharTokenizer("abcdefghijklmnopqrstuvwxyz0123456789 {}~")
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=len(tokenizer), block_size=32, d_model=16, num_heads=2, num_layers=1,
                          d_ff=32)).eval()
    instructions = [Instruction("last", argument) for argument in ("abc", "xyz", "hello")]
    answers = greedy_answers(model, tokenizer, instructions)
    pairs = preference_pairs(model, tokenizer, instructions)
    wrong = [i.prompt for i, a in zip(instructions, answers, strict=True) if a != i.response]
    assert [p.prompt for p in pairs] == wrong
    assert all(p.chosen == Instruction("last", p.prompt[6:-1]).response and p.rejected != p.chosen for p in pairs)
    assert answer_kl(model, copy.deepcopy(model), tokenizer, instructions) == 0.0  # a model against itself


@pytest.mark.trained
@pytest.mark.parametrize("seed", bound_seeds((0,)))  # the lesson's seed: its runs load from the cache
def test_the_lessons_dpo_claims_hold(seed):
    """β = 1 raises held-out exact match on the start model's weakest task by at least 30 points, and β = 0.1 moves
    the policy further from the reference (a KL of the answer's first character larger by at least 0.25 nats)."""
    device = torch.device("cpu")
    start = start_run(device)
    tokenizer, test = start.base.tokenizer, task_instructions(start.data.test)
    start_score = exact_match_by_task(test, greedy_answers(start.model, tokenizer, test))["all"]
    runs = {beta: dpo_tuned(DPORecipe(beta=beta, seed=seed), device) for beta in (1.0, 0.1)}
    score = exact_match_by_task(test, greedy_answers(runs[1.0].model, tokenizer, test))["all"]
    kl = {beta: answer_kl(run.model, start.model, tokenizer, test) for beta, run in runs.items()}
    bound("β = 1 minus start exact match", score - start_score, at_least=0.30)
    bound("KL at β = 0.1 minus KL at β = 1", kl[0.1] - kl[1.0], at_least=0.25)
    bound("β = 1 pairs ranked right, last 10 steps", sum(runs[1.0].history.step_ranked_right[-10:]) / 10, at_least=0.9)
