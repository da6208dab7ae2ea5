"""The full Transformer: shapes, configuration errors, parameter counts, tied weights and cached decoding."""

import pytest
import torch

from transformer_lib import padding_mask
from transformer_lib.decoding import GreedyWithMargin, generate_translation, greedy_decode
from transformer_lib.model import (
    Transformer,
    TransformerConfig,
    count_parameters,
    cross_attention_weights,
    parameter_breakdown,
)

SMALL = dict(d_model=16, num_heads=2, num_encoder_layers=2, num_decoder_layers=2, d_ff=32, dropout=0.0, max_len=20)


def _small_model(**overrides) -> Transformer:
    torch.manual_seed(0)
    config = TransformerConfig(src_vocab_size=11, tgt_vocab_size=13, share_embeddings=False, **{**SMALL, **overrides})
    return Transformer(config).double().eval()


def test_config_defaults_are_the_paper_base_model():
    c = TransformerConfig(src_vocab_size=37000, tgt_vocab_size=37000)
    assert (c.d_model, c.num_heads, c.num_encoder_layers, c.num_decoder_layers, c.d_ff, c.dropout) == (
        512, 8, 6, 6, 2048, 0.1
    )
    assert c.share_embeddings and c.tie_output


def test_sharing_embeddings_needs_one_vocabulary():
    with pytest.raises(ValueError, match="share_embeddings=False"):
        TransformerConfig(src_vocab_size=10, tgt_vocab_size=12)


def test_forward_gives_one_distribution_per_target_position():
    model = _small_model()
    src, tgt = torch.randint(3, 11, (2, 7)), torch.randint(3, 13, (2, 5))
    assert model(src, tgt).shape == (2, 5, 13)


def test_tied_output_projection_is_the_target_embedding():
    model = _small_model()
    assert model.output_projection.weight is model.tgt_embedding.weight
    untied = _small_model(tie_output=False)
    assert count_parameters(untied) == count_parameters(model) + 13 * 16 + 13  # its own weight and bias


def test_paper_base_and_big_parameter_counts():
    with torch.device("meta"):  # shapes only, no memory or initialisation time
        base = Transformer(TransformerConfig(src_vocab_size=37000, tgt_vocab_size=37000))
        big = Transformer(TransformerConfig(37000, 37000, d_model=1024, num_heads=16, d_ff=4096, dropout=0.3))
    assert round(count_parameters(base) / 1e6, 1) == 63.1
    assert round(count_parameters(big) / 1e6, 1) == 214.2


def test_decoder_is_causal():
    model = _small_model()
    src = torch.randint(3, 11, (1, 6))
    tgt = torch.randint(3, 13, (1, 5))
    changed = tgt.clone()
    changed[0, 4] = (tgt[0, 4] + 1 - 3) % 10 + 3
    torch.testing.assert_close(model(src, tgt)[:, :4], model(src, changed)[:, :4])


@pytest.mark.parametrize("norm_first", [False, True])
def test_cached_decoding_equals_full_recomputation(norm_first):
    model = _small_model(norm_first=norm_first)
    src = torch.tensor([[4, 5, 6, 7, 2, 0], [4, 8, 2, 0, 0, 0]])
    src_mask = padding_mask(src, 0)
    tgt = torch.randint(3, 13, (2, 6))
    memory = model.encode(src, src_mask)
    full = model.decode(tgt, memory, memory_mask=src_mask)
    cache = model.new_cache()
    first = model.decode(tgt[:, :2], memory, memory_mask=src_mask, cache=cache)  # two tokens at once, then one by one
    rest = [model.decode(tgt[:, t : t + 1], memory, memory_mask=src_mask, cache=cache) for t in range(2, 6)]
    torch.testing.assert_close(torch.cat([first, *rest], dim=1), full)
    assert len(cache) == 6


def test_greedy_decode_with_and_without_cache_agree_and_stop_at_eos():
    model = _small_model()
    # Sources whose greedy choices all lead by more than 0.03 ([4, 5, 6, 7, 2, 0] met a near-tie, a lead of 6e-5):
    # tokens from two code paths are compared exactly only when no choice is close.
    src = torch.tensor([[3, 5, 6, 7, 2, 0], [4, 8, 9, 2, 0, 0]])
    src_mask = padding_mask(src, 0)
    with_cache, without_cache = GreedyWithMargin(), GreedyWithMargin()
    cached = generate_translation(model, src, 1, 2, max_len=8, pick=with_cache, src_mask=src_mask)
    uncached = generate_translation(model, src, 1, 2, max_len=8, pick=without_cache, src_mask=src_mask,
                                    use_cache=False)
    assert with_cache.smallest_gap > 1e-3 and without_cache.smallest_gap > 1e-3
    assert torch.equal(cached, uncached)
    assert torch.equal(cached, greedy_decode(model, src, bos_id=1, eos_id=2, max_len=8, src_mask=src_mask))
    assert cached.shape[1] <= 9 and (cached[:, 0] == 1).all()


def test_positions_beyond_max_len_are_rejected():
    model = _small_model()
    with pytest.raises(ValueError, match="max_len"):
        model.encode(torch.zeros(1, 21, dtype=torch.long))


def test_positions_beyond_max_len_name_both_fixes():
    model = _small_model()
    with pytest.raises(ValueError, match=r"positions 0\.\.20 of src exceed max_len=20: pass at most 20 tokens .*"
                                         r"larger TransformerConfig.max_len"):
        model.encode(torch.zeros(1, 21, dtype=torch.long))
    with pytest.raises(ValueError, match=r"positions 20\.\.20 of tgt exceed max_len=20: .*max_len <= 20"):
        greedy_decode(model, torch.ones(1, 3, dtype=torch.long), bos_id=1, eos_id=-1, max_len=21)


@pytest.mark.parametrize(
    "src, message",
    [
        (torch.tensor([[1, 11, 2]]), r"token id 11 in src is outside the vocabulary of 11 tokens \(valid ids are "
                                     r"0 … 10\): encode with the same vocabulary the model was built with"),
        (torch.tensor([[1, -1, 2]]), r"token id -1 in src is outside the vocabulary of 11 tokens"),
    ],
)
def test_token_ids_outside_the_vocabulary_are_a_value_error_not_an_index_error(src, message):
    with pytest.raises(ValueError, match=message):
        _small_model().encode(src)


def test_target_ids_are_checked_against_the_target_vocabulary():
    model = _small_model()  # 11 source tokens, 13 target tokens
    src = torch.tensor([[1, 2, 3]])
    model(src, torch.tensor([[1, 12]]))  # 12 is a valid target id
    with pytest.raises(ValueError, match=r"token id 13 in tgt is outside the vocabulary of 13 tokens"):
        model(src, torch.tensor([[1, 13]]))


def test_float_token_ids_are_a_type_error_naming_long():
    with pytest.raises(TypeError, match=r"src must hold integer token ids .* got dtype torch.float32: .* src.long\(\)"):
        _small_model().encode(torch.tensor([[1.0, 2.0]]))


@pytest.mark.parametrize(
    "src, message",
    [
        (torch.zeros(1, 0, dtype=torch.long), r"src is empty, shape \(1, 0\): pass at least one sequence"),
        (torch.zeros(0, 3, dtype=torch.long), r"src is empty, shape \(0, 3\)"),
        (torch.tensor([1, 2, 3]), r"src must be shaped \(batch, T\), got shape \(3,\): .* src.unsqueeze\(0\)"),
    ],
)
def test_empty_or_unbatched_sources_are_clear_errors(src, message):
    with pytest.raises(ValueError, match=message):
        _small_model().encode(src)


def test_mismatched_batch_sizes_of_src_and_tgt_are_a_clear_error():
    model = _small_model()
    with pytest.raises(ValueError, match=r"tgt has 3 sequences but memory \(the encoded src\) has 2: give src and "
                                         r"tgt the same batch size"):
        model(torch.ones(2, 4, dtype=torch.long), torch.ones(3, 5, dtype=torch.long))


def test_masks_of_the_wrong_batch_or_dtype_are_clear_errors():
    model = _small_model()
    src, tgt = torch.ones(2, 4, dtype=torch.long), torch.ones(2, 5, dtype=torch.long)
    with pytest.raises(ValueError, match=r"mask of shape \(3, 1, 1, 4\) does not broadcast .* \(2, 2, 4, 4\)"):
        model(src, tgt, src_mask=padding_mask(torch.ones(3, 4, dtype=torch.long), 0))
    with pytest.raises(ValueError, match="must be a bool tensor .* got dtype torch.float32"):
        model(src, tgt, tgt_mask=torch.ones(5, 5))
    with pytest.raises(ValueError, match=r"mask of shape \(4, 4\) does not broadcast .* \(2, 2, 5, 5\)"):
        model(src, tgt, tgt_mask=torch.ones(4, 4, dtype=torch.bool))


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(num_heads=0), "d_model=16 and num_heads=0 must both be at least 1"),
        (dict(num_heads=3), "d_model=16 is not divisible by num_heads=3: choose num_heads that divides d_model, "
                            "e.g. 2 or 4 or 8"),
        (dict(dropout=1.0), r"dropout=1.0 is outside \[0, 1\)"),
        (dict(dropout=-0.1), r"dropout=-0.1 is outside \[0, 1\)"),
        (dict(src_vocab_size=0), "src_vocab_size=0 must be at least 1: pass len"),
        (dict(max_len=0), "max_len=0 must be at least 1"),
    ],
)
def test_impossible_configs_raise_before_any_weight_is_built(overrides, message):
    with pytest.raises(ValueError, match=message):
        TransformerConfig(**{"src_vocab_size": 11, "tgt_vocab_size": 13, "share_embeddings": False, **SMALL,
                             **overrides})


@pytest.mark.parametrize("norm_first", [False, True])
def test_parameter_breakdown_adds_up_to_the_count(norm_first):
    model = _small_model(norm_first=norm_first)
    breakdown = parameter_breakdown(model)
    assert sum(breakdown.values()) == count_parameters(model)
    assert breakdown["embeddings + output"] == 11 * 16 + 13 * 16  # the output projection is tied to the target one
    d, d_ff = 16, 32
    assert breakdown["encoder attention"] == 2 * (4 * d * d + 4 * d)  # two layers of W_q, W_k, W_v, W_o and biases
    assert breakdown["encoder feed-forward"] == 2 * (2 * d * d_ff + d_ff + d)
    extra_norms = 2 * d if norm_first else 0  # pre-LN ends each stack with one more LayerNorm
    assert breakdown["decoder layer norms"] == 2 * 3 * 2 * d + extra_norms


def test_cross_attention_weights_are_distributions_over_real_source_tokens():
    model = _small_model()
    src = torch.tensor([[3, 4, 5, 0], [6, 7, 0, 0]])
    maps = cross_attention_weights(model, src, torch.tensor([[1, 6, 7], [1, 8, 9]]), src_mask=padding_mask(src, 0))
    assert len(maps) == 2 and maps[0].shape == (2, 2, 3, 4)  # one per decoder layer: (batch, heads, T, S)
    torch.testing.assert_close(maps[0].sum(-1), torch.ones(2, 2, 3, dtype=torch.float64))
    assert (maps[1][0, ..., 3] == 0).all() and (maps[1][1, ..., 2:] == 0).all()  # padded sources get no weight
    assert not model.decoder_layers[0].multihead_attn._forward_hooks  # the hooks are removed again
    assert not model.decoder_layers[0].multihead_attn._forward_pre_hooks


def test_dropout_acts_on_the_sum_of_embeddings_and_positions_in_training_only():
    """As the paper's section 5.4 says: dropout on the scaled embeddings plus positions, in both stacks."""
    model = _small_model(dropout=0.5)
    tokens = torch.tensor([[1, 2, 3, 4, 5]])
    summed = model.src_embedding(tokens) * model.config.d_model**0.5 + model.positions[:5]  # (1, 5, d_model)
    torch.testing.assert_close(model._embed(model.src_embedding, tokens, "src"), summed)  # eval: no dropout
    torch.manual_seed(0)
    dropped = model.train()._embed(model.src_embedding, tokens, "src")
    survivors = dropped != 0
    assert 0 < survivors.float().mean() < 1  # some dropped, some kept
    torch.testing.assert_close(dropped[survivors], (summed / 0.5)[survivors])  # survivors scaled by 1/(1-p)
