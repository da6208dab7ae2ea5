"""The full Transformer: shapes, configuration errors, parameter counts, tied weights and cached decoding."""

import pytest
import torch

from transformer_lib import padding_mask
from transformer_lib.decoding import greedy_decode
from transformer_lib.model import Transformer, TransformerConfig, count_parameters

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
    src = torch.tensor([[4, 5, 6, 7, 2, 0], [4, 8, 2, 0, 0, 0]])
    src_mask = padding_mask(src, 0)
    cached = greedy_decode(model, src, bos_id=1, eos_id=2, max_len=8, src_mask=src_mask)
    uncached = greedy_decode(model, src, bos_id=1, eos_id=2, max_len=8, src_mask=src_mask, use_cache=False)
    assert torch.equal(cached, uncached)
    assert cached.shape[1] <= 9 and (cached[:, 0] == 1).all()


def test_positions_beyond_max_len_are_rejected():
    model = _small_model()
    with pytest.raises(ValueError, match="max_len"):
        model.encode(torch.zeros(1, 21, dtype=torch.long))
