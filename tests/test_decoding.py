"""Decoding: one generation loop for both models, beam search, sampling filters, seeded sampling and the KV
cache (for the encoder-decoder and the GPT)."""

import math

import pytest
import torch
from torch import nn

from bounds import asserted_by, bound, bound_seeds
from transformer_lib.decoding import (
    GreedyWithMargin,
    beam_search,
    beam_search_step,
    cache_nbytes,
    generate,
    generate_tokens,
    generate_translation,
    greedy_decode,
    greedy_pick,
    length_normalised_score,
    sample,
    sample_next_token,
    sampling_distribution,
    sampling_picker,
    top_k_filter,
    top_p_filter,
    top_two_gap,
)
from transformer_lib.gpt import GPT, GPTConfig
from transformer_lib.model import Transformer, TransformerConfig
from transformer_lib.recipes import train_translation_model
from transformer_lib.training import TrainingConfig

BOS, EOS = 1, 2
# Greedy tokens from two code paths (cached and uncached, greedy and beam) are compared exactly only when every choice
# led its runner-up by MARGIN: far above float32's rounding of these logits (about 1e-6 of their size), which can
# otherwise break a near-tie one way on this CPU and the other way on another.
MARGIN = 1e-3


@pytest.fixture(scope="module")
def model() -> Transformer:
    torch.manual_seed(0)
    config = TransformerConfig(
        src_vocab_size=11,
        tgt_vocab_size=11,
        d_model=16,
        num_heads=2,
        num_encoder_layers=2,
        num_decoder_layers=2,
        d_ff=32,
        dropout=0.0,
        max_len=40,
    )
    return Transformer(config).eval()


@pytest.fixture(scope="module")
def src() -> torch.Tensor:
    return torch.randint(3, 11, (3, 6), generator=torch.Generator().manual_seed(1))  # (batch, S)


class MarkovToyModel(nn.Module):
    """A stand-in decoder whose next-token distribution depends only on the last token.

    Tokens: 0 pad, 1 <bos>, 2 <eos>, 3 "A", 4 "B". Greedy takes "A" (0.5), then "A" again (0.36, not a tie with "B"'s
    0.34), and never finds a likely end; "B <eos>" has probability 0.4 * 0.9 = 0.36, more than any sequence starting
    with "A".
    """

    NEXT = torch.tensor(
        [
            [0.0, 0.0, 1.0, 0.0, 0.0],  # after <pad>
            [0.0, 0.0, 0.1, 0.5, 0.4],  # after <bos>
            [0.0, 0.0, 1.0, 0.0, 0.0],  # after <eos>
            [0.0, 0.0, 0.3, 0.36, 0.34],  # after A
            [0.0, 0.0, 0.9, 0.05, 0.05],  # after B
        ]
    )

    def encode(self, src, src_mask=None):
        return torch.zeros(src.shape[0], 1, 1)

    def decode(self, tgt, memory, tgt_mask=None, memory_mask=None, cache=None):
        return self.NEXT[tgt].clamp_min(1e-9).log()  # (batch, T, V)

    def new_cache(self):
        return None


def test_top_k_keeps_the_k_largest():
    logits = torch.tensor([[1.0, 3.0, 2.0, 0.0], [0.5, -1.0, 4.0, 4.5]])
    kept = torch.isfinite(top_k_filter(logits, 2))
    assert kept.tolist() == [[False, True, True, False], [False, False, True, True]]
    with pytest.raises(ValueError, match="top_k=5"):
        top_k_filter(logits, 5)


def test_top_p_keeps_the_smallest_set_reaching_p():
    probs = torch.tensor([[0.1, 0.5, 0.15, 0.25]])
    logits = probs.log()
    assert torch.isfinite(top_p_filter(logits, 0.7)).tolist() == [[False, True, False, True]]  # 0.5 + 0.25
    assert torch.isfinite(top_p_filter(logits, 0.75)).tolist() == [[False, True, False, True]]  # exactly reached
    assert torch.isfinite(top_p_filter(logits, 0.76)).tolist() == [[False, True, True, True]]
    assert torch.isfinite(top_p_filter(logits, 0.01)).sum() == 1  # the most likely token always stays
    with pytest.raises(ValueError, match="top_p"):
        top_p_filter(logits, 0.0)


@pytest.mark.trained
@pytest.mark.parametrize("seed", bound_seeds((3,)))
def test_low_temperature_approaches_greedy_and_seeded_draws_repeat(seed):
    logits = torch.tensor([[1.0, 2.0, 0.5], [3.0, 0.0, 2.9]])
    cold = sample_next_token(logits, temperature=0.01, generator=torch.Generator().manual_seed(0))
    assert cold.tolist() == [1, 0]
    draws = [sample_next_token(logits.repeat(250, 1), generator=torch.Generator().manual_seed(seed)) for _ in range(2)]
    assert torch.equal(draws[0], draws[1])
    frequency = torch.bincount(draws[0][::2], minlength=3) / 250  # rows 0, 2, 4, … share the first distribution
    bound("largest gap between frequency and probability", (frequency - torch.softmax(logits[0], -1)).abs().max(),
          at_most=0.08)
    with pytest.raises(ValueError, match="temperature"):
        sample_next_token(logits, temperature=0.0)


def test_cached_and_uncached_greedy_give_the_same_tokens(model, src):
    with_cache, without_cache = GreedyWithMargin(), GreedyWithMargin()
    cached = generate_translation(model, src, BOS, EOS, max_len=30, pick=with_cache, use_cache=True)
    uncached = generate_translation(model, src, BOS, EOS, max_len=30, pick=without_cache, use_cache=False)
    assert with_cache.smallest_gap > MARGIN and without_cache.smallest_gap > MARGIN  # no near-tie to break
    assert torch.equal(cached, uncached)


def test_cached_logits_equal_full_prefix_logits(model, src):
    memory = model.encode(src)
    tokens = greedy_decode(model, src, BOS, EOS, max_len=12, use_cache=False)  # (batch, 1 + T)
    full = model.decode(tokens, memory)  # (batch, 1 + T, V): every position at once
    cache = model.new_cache()
    step_by_step = torch.cat(
        [model.decode(tokens[:, t : t + 1], memory, cache=cache) for t in range(tokens.shape[1])], dim=1
    )
    # float32 logits of size up to ~3, summed in another order by the two paths: 1e-4 is far above their rounding
    torch.testing.assert_close(step_by_step, full, atol=1e-4, rtol=1e-4)


def test_beam_size_one_equals_greedy(model, src):
    for row in range(src.shape[0]):
        picker = GreedyWithMargin()
        greedy = generate_translation(model, src[row : row + 1], BOS, EOS, max_len=15, pick=picker)
        beam = beam_search(model, src[row : row + 1], BOS, EOS, max_len=15, beam_size=1)
        assert picker.smallest_gap > MARGIN  # beam search recomputes the logits: only a clear choice must agree
        assert torch.equal(beam, greedy)


def test_beam_search_finds_the_likelier_sentence_greedy_misses():
    toy, src = MarkovToyModel(), torch.zeros(1, 1, dtype=torch.long)
    greedy = greedy_decode(toy, src, BOS, EOS, max_len=6, use_cache=False)
    beam = beam_search(toy, src, BOS, EOS, max_len=6, beam_size=2, length_penalty=0.0)
    assert greedy[0].tolist() == [BOS, 3, 3, 3, 3, 3, 3]
    assert beam[0].tolist() == [BOS, 4, EOS]


def test_length_penalty_is_wu_et_al_s():
    """GNMT's lp(Y) = ((5 + |Y|) / 6)^α divides the total log-probability (Wu et al., 2016, section 7)."""
    assert length_normalised_score(-2.0, 1, 0.6) == pytest.approx(-2.0)  # ((5 + 1) / 6)^α = 1 at one token
    assert length_normalised_score(-3.0, 7, 1.0) == pytest.approx(-3.0 / 2)  # (5 + 7) / 6 = 2
    assert length_normalised_score(-3.0, 7, 0.6) == pytest.approx(-3.0 / 2**0.6)
    assert length_normalised_score(-3.0, 7, 0.0) == -3.0  # α = 0: the raw total


def test_length_penalty_trades_total_for_length():
    short, long = (math.log(0.20), 2), (math.log(0.12), 8)  # (log-probability, generated tokens)
    assert length_normalised_score(*short, 0.0) > length_normalised_score(*long, 0.0)
    assert length_normalised_score(*short, 0.3) > length_normalised_score(*long, 0.3)
    assert length_normalised_score(*short, 0.6) < length_normalised_score(*long, 0.6)


@pytest.mark.trained
@asserted_by("Lesson 10")
@pytest.mark.parametrize("seed", bound_seeds((0,)))  # the lesson's seed: its run loads from the cache
def test_beam_search_repairs_sentences_of_a_translator_stopped_early(seed):
    """Lesson 10's bounds on the recipe stopped after 80 steps gets at most
    80 % of 200 test sentences right greedily, and beam search (4, Wu et al.'s α = 0.6) at least 1 % of them more."""
    run = train_translation_model(TrainingConfig(steps=80, warmup_steps=40, seed=seed), device=torch.device("cpu"),
                                  progress=False)
    vocab = run.task.tgt_vocab
    greedy_exact = beam_exact = 0
    for source, reference in run.task.test[:200]:
        src = torch.tensor([run.task.src_vocab.encode(source)])  # (1, S)
        greedy = greedy_decode(run.model, src, vocab.bos_id, vocab.eos_id, max_len=20)[0]
        beam = beam_search(run.model, src, vocab.bos_id, vocab.eos_id, max_len=20, beam_size=4, length_penalty=0.6)
        greedy_exact += vocab.decode(greedy) == reference
        beam_exact += vocab.decode(beam[0]) == reference
    bound("greedy exact matches of 200", greedy_exact, at_most=0.8 * 200)
    bound("beam minus greedy exact matches", beam_exact - greedy_exact, at_least=0.01 * 200)


def test_sampling_is_reproducible_with_a_generator(model, src):
    def draw(seed):
        return sample(
            model,
            src,
            BOS,
            EOS,
            max_len=10,
            temperature=1.5,
            top_k=5,
            top_p=0.9,
            generator=torch.Generator().manual_seed(seed),
        )

    first, again = draw(0), draw(0)
    assert torch.equal(first, again)
    assert first[:, 0].eq(BOS).all() and first.shape[0] == 3


def test_sampling_with_top_k_one_is_greedy(model, src):
    sampled = sample(model, src, BOS, EOS, max_len=10, top_k=1, generator=torch.Generator().manual_seed(0))
    assert torch.equal(sampled, greedy_decode(model, src, BOS, EOS, max_len=10))


def test_beam_search_rejects_a_batch(model, src):
    with pytest.raises(ValueError, match="one sentence at a time"):
        beam_search(model, src, BOS, EOS, max_len=5)


@pytest.mark.parametrize("shape", [(7,), (2, 3, 7)])
def test_sample_next_token_needs_logits_shaped_batch_by_vocabulary(shape):
    with pytest.raises(ValueError, match=r"\(batch, V\), got .*: for one row pass logits\[None\]"):
        sample_next_token(torch.zeros(shape))


def test_decoding_a_source_outside_the_vocabulary_names_the_vocabulary(model):
    src = torch.tensor([[3, model.config.src_vocab_size]])
    with pytest.raises(ValueError, match="outside the vocabulary of .* encode with the same vocabulary"):
        greedy_decode(model, src, BOS, EOS, max_len=3)


def test_a_source_mask_of_another_batch_size_is_a_clear_error(model):
    src = torch.tensor([[3, 4, 5], [5, 4, 3]])
    src_mask = torch.ones(3, 1, 1, 3, dtype=torch.bool)  # (batch, 1, 1, S) for three sentences, not two
    with pytest.raises(ValueError, match=r"mask of shape \(3, 1, 1, 3\) does not broadcast .* for padding"):
        greedy_decode(model, src, BOS, EOS, max_len=3, src_mask=src_mask)


def test_sampling_distribution_is_what_sample_next_token_draws_from():
    logits = torch.tensor([[0.3, -0.2, 1.5, 0.9], [2.0, 1.0, 0.5, -1.0]])
    torch.testing.assert_close(sampling_distribution(logits), logits.softmax(-1))
    probs = sampling_distribution(logits, temperature=0.5, top_k=3, top_p=0.9)  # (2, 4)
    torch.testing.assert_close(probs, top_p_filter(top_k_filter(logits / 0.5, 3), 0.9).softmax(-1))
    assert (probs > 0).sum(-1).tolist() == [2, 2]
    generator = torch.Generator().manual_seed(0)
    draws = torch.stack([sample_next_token(logits, 0.5, 3, 0.9, generator=generator) for _ in range(200)])
    assert all(bool(probs[row, draws[:, row]].gt(0).all()) for row in range(2))  # never a filtered-out token
    with pytest.raises(ValueError, match="temperature=0 must be > 0"):
        sampling_distribution(logits, temperature=0)


def test_greedy_and_sampling_are_one_loop_with_another_picker(model, src):
    greedy = greedy_decode(model, src, BOS, EOS, max_len=10)
    assert torch.equal(generate_translation(model, src, BOS, EOS, max_len=10, pick=greedy_pick), greedy)
    drawn = sample(model, src, BOS, EOS, max_len=10, temperature=1.5, generator=torch.Generator().manual_seed(4))
    picker = sampling_picker(temperature=1.5, generator=torch.Generator().manual_seed(4))
    assert torch.equal(generate_translation(model, src, BOS, EOS, max_len=10, pick=picker), drawn)


def test_the_generation_loop_pads_finished_rows_and_stops_when_all_have_ended():
    script = iter([[5, EOS], [EOS, 6], [7, 8]])  # row 1 ends at step 1, row 0 at step 2

    def pick(logits):
        return torch.tensor(next(script))

    start = torch.full((2, 1), BOS)
    tokens = generate_tokens(lambda t: torch.zeros(t.shape[0], 9), start, 5, pick, eos_id=EOS)
    assert tokens.tolist() == [[BOS, 5, EOS], [BOS, EOS, EOS]]  # row 1's 6 became <eos>; no third step
    endless = generate_tokens(lambda t: torch.zeros(1, 9), torch.full((1, 1), BOS), 4, greedy_pick)
    assert endless.tolist() == [[BOS, 0, 0, 0, 0]]  # no eos_id: exactly max_new_tokens tokens


def test_a_beam_step_sets_finished_hypotheses_aside_with_the_length_penalty():
    prefixes = torch.tensor([[BOS, 5], [BOS, 6]])  # (2, t = 2)
    scores = torch.tensor([-0.1, -0.5])
    log_probs = torch.full((2, 7), -9.0)
    log_probs[0, EOS], log_probs[0, 3], log_probs[1, 4], log_probs[1, 5] = -0.2, -1.0, -0.3, -2.0
    kept, kept_scores, finished = beam_search_step(prefixes, scores, log_probs, 2, EOS, length_penalty=1.0)
    assert kept.tolist() == [[BOS, 6, 4], [BOS, 5, 3]]
    torch.testing.assert_close(kept_scores, torch.tensor([-0.8, -1.1]))  # raw totals
    assert [tokens.tolist() for _, tokens in finished] == [[BOS, 5, EOS]]
    assert finished[0][0] == pytest.approx(-0.3 / ((5 + 2) / 6))  # two generated tokens, 5 and <eos>; α = 1


def test_cache_nbytes_counts_self_and_cross_attention_keys_and_values(model, src):
    memory = model.encode(src)  # (3, 6, 16)
    cache = model.new_cache()
    for _ in range(4):
        model.decode(torch.full((3, 1), BOS), memory, cache=cache)
    layers, d_model = len(model.decoder_layers), model.config.d_model
    assert cache_nbytes(cache) == 2 * layers * (4 + src.shape[1]) * d_model * src.shape[0] * 4


@pytest.fixture(scope="module")
def gpt() -> GPT:
    torch.manual_seed(0)
    return GPT(GPTConfig(vocab_size=12, block_size=10, d_model=16, num_heads=2, num_layers=2, d_ff=32)).double().eval()


@pytest.mark.parametrize("prompt_length, new_tokens", [(3, 5), (4, 14), (13, 4)])  # fits; outgrows; starts too long
def test_a_gpt_generates_the_same_tokens_with_and_without_its_cache(gpt, prompt_length, new_tokens):
    prompt = torch.randint(12, (2, prompt_length), generator=torch.Generator().manual_seed(5))  # (batch, T0)
    def seeded_sampler():  # a fresh, equally seeded sampler for each run
        return sampling_picker(1.0, top_k=6, top_p=0.9, generator=torch.Generator().manual_seed(7))

    # The sampled tokens are compared exactly too: this float64 model's two paths give logits that differ by about
    # 1e-15, and a seeded draw could change only if its random number fell that close to a boundary between tokens.
    for make_picker in (GreedyWithMargin, seeded_sampler):
        cached_picker, recomputed_picker = make_picker(), make_picker()
        cached = generate(gpt, prompt, new_tokens, cached_picker, use_cache=True)
        recomputed = generate(gpt, prompt, new_tokens, recomputed_picker, use_cache=False)
        assert cached.shape == (2, prompt_length + new_tokens) and torch.equal(cached[:, :prompt_length], prompt)
        if isinstance(cached_picker, GreedyWithMargin):
            assert cached_picker.smallest_gap > MARGIN and recomputed_picker.smallest_gap > MARGIN
        assert torch.equal(cached, recomputed)


def test_without_the_cache_a_gpt_step_is_a_forward_pass_over_the_last_block(gpt):
    prompt = torch.randint(12, (1, 12), generator=torch.Generator().manual_seed(6))  # longer than block_size 10
    tokens = generate(gpt, prompt, 1, use_cache=False)
    with torch.no_grad():
        logits = gpt(prompt[:, -10:])[0, -1]  # (V,)
    assert top_two_gap(logits) > MARGIN and tokens[0, -1] == logits.argmax()


def test_one_generate_runs_both_kinds_of_model(model, src, gpt):
    start = torch.full((src.shape[0], 1), BOS)
    assert torch.equal(generate(model, start, 10, eos_id=EOS, src=src), greedy_decode(model, src, BOS, EOS, 10))
    with pytest.raises(ValueError, match="a GPT has no encoder, so it takes no src"):
        generate(gpt, start, 3, src=src)
    with pytest.raises(ValueError, match="an encoder-decoder needs the source sentence: pass src"):
        generate(model, start, 3)
    with pytest.raises(ValueError, match=r"prompt must be shaped \(batch, T\), got shape \(3,\)"):
        generate(gpt, torch.tensor([1, 2, 3]), 5)
    with pytest.raises(ValueError, match="max_new_tokens=-1 must be >= 0"):
        generate(gpt, torch.tensor([[1, 2, 3]]), -1)


def test_top_two_gap_is_the_lead_of_each_rows_largest_logit():
    logits = torch.tensor([[0.5, 2.0, -1.0, 1.25], [3.0, 3.0, 0.0, -2.0]])  # (2, V=4): a lead of 0.75, then a tie
    torch.testing.assert_close(top_two_gap(logits), torch.tensor([0.75, 0.0]))
    assert top_two_gap(logits[0]).shape == ()  # (V,) -> one gap
    assert top_two_gap(torch.zeros(2, 3, 5)).shape == (2, 3)  # (batch, T, V) -> one gap per position


def test_greedy_with_margin_picks_like_greedy_and_keeps_the_smallest_gap():
    picker = GreedyWithMargin()
    assert picker.smallest_gap == float("inf")  # nothing picked yet
    first = torch.tensor([[0.0, 2.0, 1.5], [4.0, 1.0, 0.0]])  # gaps 0.5 and 3.0
    second = torch.tensor([[1.0, 0.0, 0.75], [0.0, 0.25, 2.0]])  # gaps 0.25 and 1.75
    third = torch.tensor([[5.0, 0.0, 0.0], [0.0, 0.0, 9.0]])  # gaps 5.0 and 9.0: larger, so nothing changes
    for logits, smallest in ((first, 0.5), (second, 0.25), (third, 0.25)):
        assert torch.equal(picker(logits), greedy_pick(logits))
        assert picker.smallest_gap == smallest
    tokens = generate_tokens(lambda t: first, torch.full((2, 1), BOS), 3, GreedyWithMargin())
    assert tokens.tolist() == [[BOS, 1, 1, 1], [BOS, 0, 0, 0]]  # a picker for the generation loop
