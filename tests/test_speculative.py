"""Speculative decoding: greedy output equal to the target's own, the accept/reject rule exact, sampling distributed
as the target's (a chi-squared test), and the counts it reports."""

import math

import pytest
import torch

from transformer_lib import GPT, GPTConfig, GreedyWithMargin, generate, set_seed
from transformer_lib.speculative import (
    CachedLogits,
    acceptance_probability,
    expected_tokens_per_call,
    residual_distribution,
    speculative_accept,
    speculative_generate,
    speculative_token_distribution,
)


def tiny_gpt(seed, vocab_size=12, layers=2, width=16):
    set_seed(seed)
    config = GPTConfig(vocab_size=vocab_size, block_size=32, d_model=width, num_heads=2, num_layers=layers,
                       d_ff=2 * width)
    return GPT(config).double().eval()


def test_the_rule_outputs_the_target_distribution_exactly():
    generator = torch.Generator().manual_seed(0)
    p = torch.rand(50, 7, generator=generator, dtype=torch.float64).softmax(-1)  # (rows, V)
    q = (3 * torch.rand(50, 7, generator=generator, dtype=torch.float64)).softmax(-1)
    torch.testing.assert_close(speculative_token_distribution(p, q), p)
    assert torch.all(acceptance_probability(p, q) <= 1)
    torch.testing.assert_close(residual_distribution(p, q).sum(-1), torch.ones(50, dtype=torch.float64))


def test_accept_always_when_the_draft_under_proposes_and_nothing_to_repair_when_p_equals_q():
    p = torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64)
    q = torch.tensor([0.25, 0.6, 0.15], dtype=torch.float64)
    torch.testing.assert_close(acceptance_probability(p, q), torch.tensor([1.0, 0.5, 1.0], dtype=torch.float64))
    torch.testing.assert_close(residual_distribution(p, q), torch.tensor([0.25, 0.0, 0.05], dtype=torch.float64) / 0.3)
    torch.testing.assert_close(residual_distribution(p, p), p)
    kept = speculative_accept(torch.stack((p, p, p)), torch.stack((p, p)), torch.tensor([0, 1]))
    assert kept.tolist()[:2] == [0, 1] and len(kept) == 3  # both proposals and a bonus token


def test_expected_tokens_per_call():
    assert expected_tokens_per_call(0.0, 4) == 1.0 and expected_tokens_per_call(1.0, 4) == 5.0
    assert math.isclose(expected_tokens_per_call(0.5, 2), 1.75)


@pytest.mark.parametrize("k", [1, 3, 5])
def test_greedy_equals_the_targets_own_greedy_output(k):
    target, draft = tiny_gpt(0), tiny_gpt(1, layers=1, width=8)
    for seed in range(4):
        prompt = torch.randint(12, (1, 3), generator=torch.Generator().manual_seed(seed))
        picker = GreedyWithMargin()
        plain = generate(target, prompt, 20, picker)
        assert picker.smallest_gap > 1e-9  # float64: two code paths agree to ~1e-15, far below every lead
        result = speculative_generate(target, draft, prompt, 20, k)
        assert torch.equal(result.tokens, plain)
        assert result.target_calls <= 20 and result.accepted <= result.proposed


def test_a_perfect_draft_is_always_accepted():
    target = tiny_gpt(0)
    result = speculative_generate(target, target, torch.tensor([[1, 2]]), 15, k=4)
    assert result.acceptance_rate == 1.0 and result.target_calls == 3  # rounds of 5 tokens
    assert result.tokens_per_target_call == 5.0
    sampled = speculative_generate(target, target, torch.tensor([[1, 2]]), 15, k=4, temperature=1.0,
                                   generator=torch.Generator().manual_seed(0))
    assert sampled.acceptance_rate == 1.0 and sampled.tokens.shape == (1, 17)


def test_bad_input_is_refused():
    target, draft = tiny_gpt(0), tiny_gpt(1, layers=1, width=8)
    prompt = torch.tensor([[3, 4, 5]])
    with pytest.raises(ValueError, match="exceeds block_size=32"):
        speculative_generate(target, draft, prompt, 30, k=3)
    with pytest.raises(ValueError, match="one text at a time"):
        speculative_generate(target, draft, torch.zeros(2, 3, dtype=torch.long), 5)
    with pytest.raises(ValueError, match="k=0"):
        speculative_generate(target, draft, prompt, 5, k=0)


def test_the_cache_follows_the_text_backwards():
    model = tiny_gpt(0)
    logits = CachedLogits(model)
    text = torch.tensor([[1, 2, 3, 4, 5, 6]])
    logits.last_positions(text, 2)
    other = torch.tensor([[1, 2, 3, 9, 8]])  # shares 3 tokens with what the cache saw
    with torch.no_grad():
        torch.testing.assert_close(logits.last_positions(other, 2), model(other)[:, -2:])
    assert len(logits.cache) == 5 and logits.calls == 2


def test_sampling_follows_the_targets_distribution():
    """Chi-squared test of the first two sampled tokens against the target's exact joint distribution (V = 3, 9
    outcomes). The run is seeded; a correct sampler would fail a fresh seed with probability 1e-4 (the threshold)."""
    target, draft = tiny_gpt(0, vocab_size=3), tiny_gpt(5, vocab_size=3, layers=1, width=8)
    prompt = torch.tensor([[0, 1]])
    with torch.no_grad():
        first = target(prompt)[0, -1].softmax(-1)  # (3,)
        exact = torch.stack([first[a] * target(torch.tensor([[0, 1, a]]))[0, -1].softmax(-1) for a in range(3)])
    generator = torch.Generator().manual_seed(0)
    runs = 2000
    counts = torch.zeros(3, 3, dtype=torch.float64)
    accepted = 0
    for _ in range(runs):
        result = speculative_generate(target, draft, prompt, 2, k=2, temperature=1.0, generator=generator)
        a, b = result.tokens[0, 2:].tolist()
        counts[a, b] += 1
        accepted += result.accepted
    assert 0 < accepted < runs  # the draft differs: some proposals were rejected, some kept
    expected = runs * exact.double()
    chi2 = ((counts - expected) ** 2 / expected).sum()
    p_value = torch.special.gammaincc(torch.tensor(8 / 2, dtype=torch.float64), chi2 / 2)  # 8 degrees of freedom
    assert p_value > 1e-4, (counts, expected)
    # the wrong rule, a draft token always kept, is caught by the same test: it samples the draft's distribution
    with torch.no_grad():
        draft_first = draft(prompt)[0, -1].softmax(-1)
        draft_exact = torch.stack([draft_first[a] * draft(torch.tensor([[0, 1, a]]))[0, -1].softmax(-1)
                                   for a in range(3)])
    wrong = runs * draft_exact.double()  # the counts it would give, on average
    wrong_chi2 = ((wrong - expected) ** 2 / expected).sum()
    assert torch.special.gammaincc(torch.tensor(4.0, dtype=torch.float64), wrong_chi2 / 2) < 1e-6
