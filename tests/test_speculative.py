"""Speculative decoding: greedy output equal to the target's own, the accept/reject rule exact, sampling distributed
as the target's (a chi-squared test), and the counts it reports."""

import math

import pytest
import torch

from bounds import asserted_by, bound, bound_seeds
from transformer_lib import (
    GPT,
    CharTokenizer,
    GPTConfig,
    GreedyWithMargin,
    baseline_losses,
    evaluate_lm_loss,
    generate,
    python_docs,
    set_seed,
    single_thread,
    train_char_gpt,
)
from transformer_lib.quantization import quantize_linear_layers
from transformer_lib.speculative import (
    CachedLogits,
    ForwardTimer,
    acceptance_interval,
    acceptance_probability,
    expected_speedup,
    expected_tokens_per_call,
    residual_distribution,
    simulate_acceptance,
    speculative_accept,
    speculative_generate,
    speculative_token_distribution,
    verify_cost,
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


def test_the_rule_is_exact_where_p_and_q_are_zero_or_equal():
    """After top-k both models give some tokens probability 0 (p = q = 0): keeping such a token is decided without
    0 / 0, and when the draft equals the target there is nothing to repair, yet no NaN appears anywhere."""
    p = torch.tensor([0.5, 0.0, 0.3, 0.2, 0.0], dtype=torch.float64)
    q = torch.tensor([0.3, 0.0, 0.4, 0.1, 0.2], dtype=torch.float64)  # token 1: p = q = 0; token 4: only the draft
    accept = acceptance_probability(p, q)
    assert not accept.isnan().any()
    torch.testing.assert_close(accept, torch.tensor([1.0, 1.0, 0.75, 1.0, 0.0], dtype=torch.float64))
    torch.testing.assert_close(speculative_token_distribution(p, q), p)
    for same in (p, q):
        assert torch.equal(acceptance_probability(same, same), torch.ones_like(same))
        assert torch.equal(residual_distribution(same, same), same)  # no 0 / 0: the (unused) residual is p
        torch.testing.assert_close(speculative_token_distribution(same, same), same)
    generator = torch.Generator().manual_seed(0)
    for _ in range(200):  # a round on these rows never draws a token that p gives probability 0
        proposal = torch.multinomial(q, 1, generator=generator)
        kept = speculative_accept(torch.stack((p, p)), q[None], proposal, generator)
        assert p[kept[-1]] > 0 and (len(kept) == 1 or p[kept[0]] > 0)


def test_sampling_with_top_k_never_meets_a_nan():
    target, draft = tiny_gpt(0), tiny_gpt(1, layers=1, width=8)
    for k in (1, 4):
        result = speculative_generate(target, draft, torch.tensor([[1, 2]]), 20, k=k, temperature=1.0, top_k=2,
                                      generator=torch.Generator().manual_seed(k))
        assert result.tokens.shape == (1, 22) and 0 <= result.acceptance_rate <= 1


def test_expected_tokens_per_call():
    assert expected_tokens_per_call(0.0, 4) == 1.0 and expected_tokens_per_call(1.0, 4) == 5.0
    assert math.isclose(expected_tokens_per_call(0.5, 2), 1.75)


def test_acceptance_interval_is_wilsons_and_covers_the_rate():
    low, high = acceptance_interval(233, 249)
    assert low < 233 / 249 < high and 0 < low and high < 1
    # Wilson's interval, written out for 8 of 10 at z = 1.96: centre (p + z²/2n) / (1 + z²/n)
    p, n, z = 0.8, 10, 1.96
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    low, high = acceptance_interval(8, 10)
    assert math.isclose(low, centre - half) and math.isclose(high, centre + half)
    assert acceptance_interval(10, 10)[1] == 1.0 and acceptance_interval(0, 10)[0] == 0.0  # stays inside [0, 1]
    narrow, wide = acceptance_interval(800, 1000), acceptance_interval(80, 100)
    assert narrow[1] - narrow[0] < wide[1] - wide[0]
    with pytest.raises(ValueError, match="examined > 0"):
        acceptance_interval(0, 0)


def test_expected_speedup_is_leviathans_improvement_factor():
    for a, k, c in ((0.8, 4, 0.1), (0.5, 2, 0.3), (0.95, 8, 0.05)):
        leviathan = (1 - a ** (k + 1)) / ((1 - a) * (k * c + 1))  # Leviathan et al., Theorem 3.8
        assert math.isclose(expected_speedup(a, k, c), leviathan)
    assert math.isclose(expected_speedup(0.5, 2, 0.25, verify_cost=1.5), 1.75 / 2.0)


def test_acceptance_counts_only_examined_proposals():
    """A proposal after the first rejection of its round is never examined: it is neither kept nor rejected."""
    target, draft = tiny_gpt(0), tiny_gpt(1, layers=1, width=8)
    prompt = torch.tensor([[3, 1, 4]])
    for k in (1, 3, 6):
        result = speculative_generate(target, draft, prompt, 25, k)
        rejections = result.examined - result.accepted  # at most one per round
        assert 0 <= rejections <= result.target_calls and result.examined <= result.proposed
        assert sum(result.round_sizes) == result.proposed and len(result.round_sizes) == result.target_calls
        assert result.acceptance_rate == result.accepted / result.examined
        assert result.share_kept == result.accepted / result.proposed
        if k == 1:
            assert result.examined == result.proposed  # one proposal per round: each one is examined
        else:
            assert 0 < rejections and result.examined < result.proposed  # this draft errs: some went unexamined
        new = result.tokens.shape[1] - prompt.shape[1]
        assert new == result.accepted + result.target_calls  # every round adds its kept proposals and one more


def test_the_forward_timer_counts_every_pass_of_its_model_and_then_lets_go():
    target, draft = tiny_gpt(0), tiny_gpt(1, layers=1, width=8)
    with ForwardTimer(target) as target_time, ForwardTimer(draft) as draft_time:
        result = speculative_generate(target, draft, torch.tensor([[1, 2]]), 12, k=3)
    assert target_time.calls == result.target_calls and draft_time.calls == result.draft_calls
    assert 0 < target_time.per_call and math.isclose(target_time.seconds, target_time.per_call * target_time.calls)
    with torch.no_grad():
        target(torch.tensor([[1, 2]]))  # after the block: no longer counted
    assert target_time.calls == result.target_calls
    assert not target._forward_hooks and not target._forward_pre_hooks


def test_verify_cost_times_a_cached_pass_and_leaves_the_model_as_it_was():
    target = tiny_gpt(0)
    context = torch.randint(10, (1, 12), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        before = target(context)
    assert 0 < verify_cost(target, context, 3, repeats=2)
    with torch.no_grad():
        torch.testing.assert_close(target(context), before)


@pytest.mark.trained
@pytest.mark.parametrize("seed", bound_seeds((0,)))
def test_independent_acceptances_meet_the_formula_and_clustered_ones_fall_below_it(seed):
    for k in (4, 8):
        alpha, per_call = simulate_acceptance(k, 0.94, 0.94, 0.5, seed=seed)
        bound(f"k={k}, independent: tokens per call off the formula (relative)",
              abs(per_call / expected_tokens_per_call(alpha, k) - 1), at_most=0.01)
        alpha, per_call = simulate_acceptance(k, 0.995, 0.7, 0.05, seed=seed)
        # kept / examined favours the long easy runs: further below the formula than the independent case strays
        bound(f"k={k}, clustered: tokens per call / the formula's", per_call / expected_tokens_per_call(alpha, k),
              at_most=0.99)
    alpha, per_call = simulate_acceptance(1, 0.995, 0.7, 0.05, seed=seed)
    assert math.isclose(per_call, expected_tokens_per_call(alpha, 1))  # k = 1: equal by construction


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
    assert result.examined == result.proposed == 12 and result.round_sizes == [4, 4, 4]
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


@pytest.mark.trained
@pytest.mark.parametrize("seed", bound_seeds((0,)))
def test_sampling_follows_the_targets_distribution(seed):
    """Chi-squared test of the first two sampled tokens against the target's exact joint distribution (V = 3, 9
    outcomes). The run is seeded; a correct sampler would fail a fresh seed with probability 1e-4 (the threshold)."""
    target, draft = tiny_gpt(0, vocab_size=3), tiny_gpt(5, vocab_size=3, layers=1, width=8)
    prompt = torch.tensor([[0, 1]])
    with torch.no_grad():
        first = target(prompt)[0, -1].softmax(-1)  # (3,)
        exact = torch.stack([first[a] * target(torch.tensor([[0, 1, a]]))[0, -1].softmax(-1) for a in range(3)])
    generator = torch.Generator().manual_seed(seed)
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
    bound("chi-squared test's p-value", p_value.item(), at_least=1e-4)
    # the wrong rule, a draft token always kept, is caught by the same test: it samples the draft's distribution
    with torch.no_grad():
        draft_first = draft(prompt)[0, -1].softmax(-1)
        draft_exact = torch.stack([draft_first[a] * draft(torch.tensor([[0, 1, a]]))[0, -1].softmax(-1)
                                   for a in range(3)])
    wrong = runs * draft_exact.double()  # the counts it would give, on average
    wrong_chi2 = ((wrong - expected) ** 2 / expected).sum()
    assert torch.special.gammaincc(torch.tensor(4.0, dtype=torch.float64), wrong_chi2 / 2) < 1e-6


@pytest.mark.trained
@asserted_by("Lesson 14")
@pytest.mark.parametrize("seed", bound_seeds((0,)))  # the lesson's seed: its runs load from the cache
def test_lesson_14_bounds_hold(seed):
    """The bounds lesson 14 asserts on its trained target and draft (lesson 11's recipe, one thread, 300 steps): both
    beat the bigram baseline, α hardly depends on k, 1 + α + … + α^k predicts
    the tokens per target call within 10 %, and int8 weights per channel raise the held-out loss by at most 2 %."""
    with single_thread():  # as the lesson
        check_lesson_14_bounds(seed)


def check_lesson_14_bounds(seed):
    vocab_size = len(CharTokenizer(python_docs()))

    def trained(d_model, num_layers, lr):
        config = GPTConfig(vocab_size=vocab_size, block_size=64, d_model=d_model, num_heads=4, num_layers=num_layers,
                           d_ff=4 * d_model)
        return train_char_gpt(300, torch.device("cpu"), config=config, batch_size=16, lr=lr, seed=seed,
                              eval_every=300, eval_windows=32)

    target_run, draft_run = trained(64, 3, 3e-3), trained(32, 1, 1e-2)
    bigram = baseline_losses(target_run.train, target_run.valid, vocab_size)["bigram"]
    bound("bigram minus target's loss", bigram - target_run.history.valid_loss[-1], at_least=0.1, seed=seed)
    bound("bigram minus draft's loss", bigram - draft_run.history.valid_loss[-1], at_least=0.0, seed=seed)
    valid = target_run.valid
    prompts = [valid[s : s + 16][None] for s in (torch.arange(6) * (len(valid) // 6)).tolist()]
    acceptance = []
    for k in (1, 4, 8):
        results = [speculative_generate(target_run.model, draft_run.model, prompt, 48, k) for prompt in prompts]
        accepted, calls = sum(r.accepted for r in results), sum(r.target_calls for r in results)
        acceptance.append(accepted / sum(r.examined for r in results))
        predicted = sum(expected_tokens_per_call(acceptance[-1], n) for r in results for n in r.round_sizes) / calls
        bound(f"k={k}: tokens per call off the prediction (relative)", abs((accepted + calls) / calls / predicted - 1),
              at_most=0.1, seed=seed)
    bound("spread of α over k", max(acceptance) - min(acceptance), at_most=0.1, seed=seed)
    float_loss = evaluate_lm_loss(target_run.model, valid, 64, windows=64)
    bound("int8 / float held-out loss", evaluate_lm_loss(quantize_linear_layers(target_run.model), valid, 64,
                                                         windows=64) / float_loss, at_most=1.02, seed=seed)
