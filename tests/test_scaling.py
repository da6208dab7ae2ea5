"""Power-law fits with an interval over seeds, a ladder of GPT widths, training compute and the memory of attention's
score matrices (lessons 11 and 12)."""

import numpy as np
import pytest

from bounds import asserted_by, bound, bound_seeds
from transformer_lib import (
    GPT,
    CharTokenizer,
    GPTConfig,
    baseline_losses,
    fit_power_law,
    python_docs,
    scaling,
    score_memory_mib,
    train_valid_split,
)
from transformer_lib.scaling import (
    bootstrap_exponent,
    fit_misses,
    non_embedding_parameters,
    scaling_exponent,
    train_width_ladder,
    training_flops,
)


def test_fit_power_law_recovers_exponent_and_factor():
    x = np.array([128, 256, 512, 1024])
    slope, scale = fit_power_law(x, 3e-6 * x**2.0)
    assert slope == pytest.approx(2.0) and scale == pytest.approx(3e-6)
    slope, scale = fit_power_law([1.0, 10.0, 100.0], [5.0, 5.0 * 10**0.5, 50.0])
    assert slope == pytest.approx(0.5) and scale == pytest.approx(5.0)


def test_fit_power_law_rejects_mismatched_or_too_few_points():
    with pytest.raises(ValueError, match=r"same length, at least 2 points each; got shapes \(3,\) and \(2,\)"):
        fit_power_law([1, 2, 3], [1, 4])
    with pytest.raises(ValueError, match="at least 2 points"):
        fit_power_law([1], [1])


def test_score_memory_grows_with_t_squared_and_chunks_cut_it_to_t_times_chunk():
    assert score_memory_mib(1024, None) == pytest.approx(4.0)  # 1024² float32 numbers
    assert score_memory_mib(8192, None) == pytest.approx(256.0)
    assert score_memory_mib(8192, 256) == pytest.approx(8.0)  # 8192 · 256 numbers
    assert score_memory_mib(100, 256) == score_memory_mib(100, None)  # a chunk longer than T is one chunk
    assert score_memory_mib(1024, None, heads=12, bytes_per_number=2) == pytest.approx(24.0)
    assert score_memory_mib(1024, None, matrices=2) == pytest.approx(8.0)  # scores and softmax weights
    assert score_memory_mib(8192, 256, heads=2, matrices=2) == pytest.approx(32.0)


def test_fit_power_law_gives_a_scaling_exponent_as_minus_the_slope():
    n = np.array([1e3, 1e4, 1e5])
    slope, scale = fit_power_law(n, 4.0 * n**-0.076)  # L(N) = a · N^(-α) with α = 0.076
    assert -slope == pytest.approx(0.076) and scale == pytest.approx(4.0)


@pytest.mark.parametrize("tie_output", [False, True])
def test_non_embedding_parameters_leave_out_the_vocabulary_and_position_tables(tie_output):
    config = GPTConfig(vocab_size=50, block_size=16, d_model=32, num_heads=4, num_layers=2, d_ff=128,
                       tie_output=tie_output)
    model = GPT(config)
    total = sum(p.numel() for p in model.parameters())
    tables = 50 * 32 + 16 * 32 + (0 if tie_output else 50 * 32)  # token, position, untied head
    assert non_embedding_parameters(model) == total - tables
    per_block = 4 * (32 * 32 + 32) + (32 * 128 + 128) + (128 * 32 + 32) + 2 * 2 * 32  # attention, MLP, 2 LayerNorms
    assert non_embedding_parameters(model) == 2 * per_block + 2 * 32  # + the final LayerNorm
    assert abs(non_embedding_parameters(model) / (12 * 2 * 32**2) - 1) < 0.1  # about 12 · layers · d_model²


def test_scaling_exponent_recovers_alpha_above_an_irreducible_loss():
    n = np.array([1e3, 4e3, 1.6e4, 6.4e4])
    losses = 1.2 + 3.0 * n**-0.3  # L(N) = E + a · N^(-α) with E = 1.2
    alpha, a = scaling_exponent(n, losses, irreducible=1.2)
    assert alpha == pytest.approx(0.3) and a == pytest.approx(3.0)
    pure_alpha, _ = scaling_exponent(n, losses)  # ignoring E flattens the line: a smaller α
    assert 0 < pure_alpha < 0.3 * 0.5


def test_scaling_exponent_refuses_a_loss_at_or_below_the_irreducible_loss():
    with pytest.raises(ValueError, match=r"above the irreducible loss E=2.0 .* smallest loss is 2: choose a smaller E"):
        scaling_exponent([1e3, 1e4], [2.5, 2.0], irreducible=2.0)


def test_bootstrap_exponent_is_a_point_when_the_seeds_agree_and_widens_with_their_spread():
    n = np.array([1e3, 4e3, 1.6e4, 6.4e4])
    clean = 3.0 * n**-0.2
    alpha, low, high = bootstrap_exponent(n, np.repeat(clean[:, None], 3, axis=1))
    assert low == pytest.approx(alpha) == pytest.approx(high) == pytest.approx(0.2)
    rng = np.random.default_rng(0)
    noise = rng.normal(0.0, 1.0, (4, 3))
    narrow = bootstrap_exponent(n, clean[:, None] + 0.01 * noise)
    wide = bootstrap_exponent(n, clean[:, None] + 0.05 * noise)
    assert narrow[1] < narrow[0] < narrow[2] and wide[1] < wide[0] < wide[2]
    assert wide[2] - wide[1] > 3 * (narrow[2] - narrow[1])
    assert bootstrap_exponent(n, clean[:, None] + 0.05 * noise) == wide  # seeded: the same resamples again


@pytest.mark.trained
@pytest.mark.parametrize("seed", bound_seeds((1,)))
def test_bootstrap_exponent_covers_the_true_exponent_in_most_synthetic_experiments(seed):
    """1 000 synthetic experiments, 4 sizes × 3 seeds, each loss the true law plus seed noise of lesson 11's size: the
    nominal 95 % interval over 3 seeds is a rough one (three draws say little about a spread): it holds the true α in
    about three experiments of four, as lesson 11 says."""
    n = np.array([1e3, 4e3, 1.6e4, 6.4e4])
    rng = np.random.default_rng(seed)
    covered = 0
    for experiment in range(1000):
        table = 1.0 + 3.0 * n[:, None] ** -0.3 + rng.normal(0.0, 0.03, (4, 3))
        _, low, high = bootstrap_exponent(n, table, irreducible=1.0, resamples=400, seed=experiment)
        covered += low <= 0.3 <= high
    # 0.65 < covered / 1000 < 0.85, in whole experiments
    bound("experiments of 1000 whose interval holds the true α", covered, at_least=651)
    bound("experiments of 1000 whose interval holds the true α", covered, at_most=849)


def test_bootstrap_exponent_wants_one_row_per_size_and_several_seeds():
    with pytest.raises(ValueError, match=r"\(sizes, seeds\) .* got shape \(3,\) for 3 sizes"):
        bootstrap_exponent([1, 10, 100], [3.0, 2.0, 1.0])
    with pytest.raises(ValueError, match=r"at least 2 seeds; got shape \(3, 1\)"):
        bootstrap_exponent([1, 10, 100], [[3.0], [2.0], [1.0]])


def test_fit_misses_measures_the_fit_against_the_standard_error_of_each_mean():
    n = np.array([1e3, 4e3, 1.6e4, 6.4e4])
    spread = np.array([-0.03, 0.0, 0.03])  # sd 0.03 over 3 seeds: standard error 0.03 / √3 of a mean
    on_the_law = 3.0 * n[:, None] ** -0.2 + spread  # (sizes, seeds), means exactly on a power law
    misses, chi_squared = fit_misses(n, on_the_law)
    assert np.allclose(misses, 0.0, atol=1e-9) and chi_squared == pytest.approx(0.0, abs=1e-12)
    bent = on_the_law.copy()
    bent[2] += 0.05  # one mean moved by 0.05 / (0.03 / √3) ≈ 2.9 standard errors, before the refit absorbs part
    misses, chi_squared = fit_misses(n, bent)
    assert misses.shape == (4,) and np.argmax(misses) == 2 and 1.0 < misses[2] < 2.9
    assert chi_squared == pytest.approx(np.sum(misses**2)) and chi_squared > 3.0
    _, chi_squared_e = fit_misses(n, bent + 1.0, irreducible=1.0)  # the same excess above E = 1: the same misses
    assert chi_squared_e == pytest.approx(chi_squared)
    with pytest.raises(ValueError, match="at least 2 seeds"):
        fit_misses(n, on_the_law[:, :1])


def test_training_flops_is_six_per_parameter_and_token():
    assert training_flops(1e6, 2e7) == pytest.approx(1.2e14)
    chinchilla = training_flops(70e9, 1.4e12)  # 70 billion parameters on 1.4 trillion tokens
    assert chinchilla == pytest.approx(5.88e23)


@pytest.fixture(scope="module")
def docs():
    text = python_docs()
    tokenizer = CharTokenizer(text)
    train, valid = train_valid_split(tokenizer.encode(text), valid_fraction=0.1)
    return train, valid, len(tokenizer)


def test_a_width_ladder_changes_the_width_only_and_records_every_run(docs):
    train, valid, vocab = docs
    ladder = train_width_ladder(train, valid, vocab, [8, 16], [0, 1], steps=4, lr=1e-2, eval_every=2)
    assert ladder.eval_steps == [0, 2, 4] and ladder.characters_per_step == 16 * 32
    assert np.array(ladder.valid_loss).shape == (2, 2, 3)  # (widths, seeds, evaluations)
    assert ladder.losses().shape == (2, 2) and ladder.losses(0).shape == (2, 2)
    assert ladder.losses(0)[0, 0] != ladder.losses(0)[0, 1]  # the seed sets the initial weights
    block = [12 * w * w + 13 * w for w in (8, 16)]  # 4 d² + 4 d (attention) + 8 d² + 5 d (MLP) + 4 d (LayerNorms)
    assert ladder.params == [2 * b + 2 * w for b, w in zip(block, (8, 16), strict=True)]  # + the final LayerNorm
    tables = [2 * vocab * w + 32 * w for w in (8, 16)]  # token embedding and output layer (V, d), positions (32, d)
    assert ladder.all_params == [n + t for n, t in zip(ladder.params, tables, strict=True)]
    assert ladder.seconds > 0


def test_a_width_ladder_loads_its_runs_from_the_cache(docs, monkeypatch, tmp_path):
    """A run asked for again, alone or in another ladder, is loaded: the same losses, no training."""
    monkeypatch.setenv("TRANSFORMER_LIB_CACHE", str(tmp_path))
    train, valid, vocab = docs
    first = train_width_ladder(train, valid, vocab, [8, 16], [0, 1], steps=4, lr=1e-2, eval_every=2)
    monkeypatch.setattr(scaling, "train_gpt", lambda *args, **kwargs: pytest.fail("trained again"))
    again = train_width_ladder(train, valid, vocab, [16], [1], steps=4, lr=1e-2, eval_every=2)
    assert again.valid_loss == [[first.valid_loss[1][1]]] and again.params == first.params[1:]
    with pytest.raises(pytest.fail.Exception, match="trained again"):  # another learning rate is another run
        train_width_ladder(train, valid, vocab, [16], [1], steps=4, lr=3e-2, eval_every=2)


@pytest.mark.trained
@asserted_by("Lesson 11", seeds="0,1,2")  # the bootstrap needs two seeds or more
def test_lesson_11_ladder_bounds_hold(docs):
    """Lesson 11 trains widths 8, 16, 32 and 64 for 125 steps with seeds 0, 1 and 2 and asserts: every seed's widest
    model at least 0.25 below its narrowest and its narrowest above the bigram baseline, the mean falling at every
    doubling, a bootstrap interval for α_N above 0, every mean curve still falling over the last 50 steps, and each
    smaller model after 125 steps (the last measured step within the larger model's compute) below the next larger
    after 50, by 0.04 on the mean, and for every seed in the two wider pairs. By default on the lesson's seeds, whose
    runs load from the model cache; `course.py bounds` trains seeds 0-4 in three CPU kernel settings
    (docs/bounds.md)."""
    train, valid, vocab = docs
    widths = [8, 16, 32, 64]
    seeds = bound_seeds((0, 1, 2))  # the lesson's seeds: its runs load from the cache
    ladder = train_width_ladder(train, valid, vocab, widths, list(seeds), steps=125, lr=1e-2)
    final = ladder.losses()  # (widths, seeds)
    bigram = baseline_losses(train, valid, vocab)["bigram"]
    for seed, narrowest, widest in zip(seeds, final[0], final[-1], strict=True):
        bound("narrowest minus widest model's loss", narrowest - widest, at_least=0.25, seed=seed)
        bound("narrowest model's loss minus the bigram baseline's", narrowest - bigram, at_least=0.0, seed=seed)
    # The bounds below are on means over the seeds, or fitted to all of them: their seed is None, "all" in the table.
    for width, fall in zip(widths[1:], -np.diff(final.mean(axis=1)), strict=True):
        bound(f"mean loss fall on doubling to width {width}", fall, at_least=0.0)
    bound("α_N's bootstrap interval: lower end", bootstrap_exponent(ladder.params, final)[1], at_least=0.0)
    for width, fall in zip(widths, ladder.losses(75).mean(axis=1) - ladder.losses(125).mean(axis=1), strict=True):
        bound(f"width {width}: mean loss fall over the last 50 steps", fall, at_least=0.03)
    smaller, larger = ladder.losses(125)[:-1], ladder.losses(50)[1:]  # (widths - 1, seeds) each
    for width, wider, lead in zip(widths[:-1], widths[1:], (larger - smaller).mean(axis=1), strict=True):
        bound(f"mean loss: width {wider} after 50 steps minus width {width} after 125", lead, at_least=0.04)
    for width, wider, leads in zip(widths[1:-1], widths[2:], (larger - smaller)[1:], strict=True):  # per seed
        for seed, lead in zip(seeds, leads, strict=True):
            bound(f"width {wider} after 50 steps minus width {width} after 125", lead, at_least=0.0, seed=seed)


@pytest.mark.trained
@asserted_by("Lesson 11")
@pytest.mark.parametrize("seed", bound_seeds((0,)))  # the lesson's seed: its runs load from the cache
def test_lesson_11_learning_rate_check_holds(docs, seed):
    """Lesson 11 asserts, on seed 0, that 1e-2 is the best of 3e-3, 1e-2 and 3e-2 for width 64 after 125 steps, and
    better than 3e-3 by 0.2 for width 8, and that 3e-2 beats 1e-2 by 0.05 for width 8; `course.py bounds` shows it on
    seeds 0-4. The runs are the lesson's: 1e-2 from its ladder (measured every 25 steps), the others measured at
    their start and end alone."""
    train, valid, vocab = docs
    loss = {rate: train_width_ladder(train, valid, vocab, [8, 64], [seed], steps=125, lr=rate,
                                     eval_every=25 if rate == 1e-2 else 125).losses()[:, 0]
            for rate in (3e-3, 1e-2, 3e-2)}
    bound("width 64: best other rate's loss minus 1e-2's", min(loss[3e-3][1], loss[3e-2][1]) - loss[1e-2][1],
          at_least=0.0)
    bound("width 8: loss at 3e-3 minus at 1e-2", loss[3e-3][0] - loss[1e-2][0], at_least=0.2)
    bound("width 8: loss at 1e-2 minus at 3e-2", loss[1e-2][0] - loss[3e-2][0], at_least=0.05)
