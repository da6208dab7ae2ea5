"""The course's GPT, configured as GPT-2 and loaded with ``GPT.from_hf_gpt2``, equals Hugging Face's
``GPT2LMHeadModel``: logits within 1e-4 in float32 and 1e-10 in float64, the same greedy generations (each choice
clear of a near-tie); a wrong weight mapping (a Conv1D weight not transposed, queries and keys swapped) is caught.
Nothing is downloaded: the Hugging Face models are built from small random configurations."""

import pytest
import torch
import transformers

from transformer_lib.decoding import GreedyWithMargin, generate, top_two_gap
from transformer_lib.gpt import GPT, hf_gpt2_weights

VOCAB = 50
# float32 logits (up to about 6.5) of two implementations, summed in other orders, differ by up to 6e-6 (with
# COURSE_MOVE_LAST_BITS=1): 1e-4 relative and absolute is far above that and far below a wrong mapping's error (> 1).
FLOAT32 = dict(rtol=1e-4, atol=1e-4)
MARGIN = 1e-3  # a greedy choice compared across implementations must lead its runner-up by this much


def hf_model(dtype=torch.float32, **overrides):
    """A small random GPT2LMHeadModel without dropout; every weight (LayerNorm gains around 1, biases around 0) drawn
    from a seed, so a wrong copy shows and greedy generation does not repeat one token."""
    torch.manual_seed(0)
    settings = dict(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4, n_positions=16, resid_pdrop=0.0,
                    embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=VOCAB - 1, eos_token_id=VOCAB - 1)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(**{**settings, **overrides})).eval()
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            parameter.normal_(0.0, 0.3).add_(1.0 if ".ln_" in name and name.endswith("weight") else 0.0)
    return model.to(dtype)


def tokens(batch=3, length=11):
    return torch.randint(0, VOCAB, (batch, length), generator=torch.Generator().manual_seed(1))


def logits_of(model, hf):
    with torch.no_grad():
        return model(tokens()), hf(tokens()).logits


def wrong_mapping(mistake):
    """``hf_gpt2_weights`` followed by ``mistake(weights)``, which spoils one entry."""

    def mapping(hf_weights, num_layers):
        weights = hf_gpt2_weights(hf_weights, num_layers)
        mistake(weights)
        return weights

    return mapping


# -- the configuration -------------------------------------------------------------------------------------------


def test_gpt2_is_a_configuration_of_the_course_gpt():
    hf = hf_model(layer_norm_epsilon=1e-2)
    ours = GPT.from_hf_gpt2(hf)
    c = ours.config
    assert (c.vocab_size, c.block_size, c.d_model, c.num_heads, c.num_layers, c.d_ff) == (VOCAB, 16, 32, 4, 2, 128)
    assert (c.activation, c.bias, c.tie_output, c.dropout) == ("gelu_tanh", True, True, 0.0)
    assert ours.head.weight is ours.token_embedding.weight
    assert {block.norm1.eps for block in ours.blocks} | {ours.final_norm.eps} == {1e-2}
    assert not ours.training and GPT.from_hf_gpt2(hf.train()).training  # GPT-2's mode is kept


def test_the_mapping_names_every_course_weight_once():
    hf = hf_model(tie_word_embeddings=False)
    ours = GPT.from_hf_gpt2(hf)
    weights = hf_gpt2_weights(hf.state_dict(), 2)
    assert set(weights) == set(ours.state_dict())
    q, k, v = hf.transformer.h[1].attn.c_attn.weight.split(32, dim=1)  # (in, 3 · out) -> three (in, out)
    assert torch.equal(weights["blocks.1.self_attn.k_proj.weight"], k.T)
    assert torch.equal(weights["blocks.1.linear1.weight"], hf.transformer.h[1].mlp.c_fc.weight.T)


def test_unsupported_configurations_are_refused():
    with pytest.raises(ValueError, match="activation_function='silu'"):
        GPT.from_hf_gpt2(hf_model(activation_function="silu"))
    with pytest.raises(ValueError, match="scale_attn_by_inverse_layer_idx"):
        GPT.from_hf_gpt2(hf_model(scale_attn_by_inverse_layer_idx=True))


# -- the whole model -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("tie", [True, False])
def test_logits_equal_hugging_faces_in_float32(tie):
    hf = hf_model(tie_word_embeddings=tie)
    torch.testing.assert_close(*logits_of(GPT.from_hf_gpt2(hf), hf), **FLOAT32)


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_logits_equal_hugging_faces_in_float64(attention):
    """Hugging Face's GPT-2 computes every step in the model's dtype (no float32 step, unlike its Llama), with
    PyTorch's fused attention or its own readable one."""
    hf = hf_model(torch.float64, attn_implementation=attention)
    ours = GPT.from_hf_gpt2(hf)
    assert next(ours.parameters()).dtype == torch.float64
    torch.testing.assert_close(*logits_of(ours, hf), rtol=0, atol=1e-10)


def test_greedy_generations_are_identical():
    """The course's ``generate`` with a greedy picker (with and without its KV cache) against Hugging Face's
    ``generate(do_sample=False)``, to the model's full context of 16 positions. The tokens are compared exactly
    because every choice leads its runner-up by more than MARGIN, in Hugging Face's logits and in ours."""
    hf = hf_model()
    ours = GPT.from_hf_gpt2(hf)
    prompt, eos = tokens(length=4), hf.config.eos_token_id
    expected = hf.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=12, do_sample=False,
                           pad_token_id=eos)
    assert expected.shape == (3, 16) and len(expected[:, 4:].unique()) > 3  # not one token repeated
    with torch.no_grad():
        hf_logits = hf(expected, attention_mask=torch.ones_like(expected)).logits[:, 3:-1]  # those that chose 4 … 15
    assert top_two_gap(hf_logits).min() > MARGIN
    for use_cache in (True, False):
        picker = GreedyWithMargin()
        got = generate(ours, prompt, 12, picker, eos_id=eos, use_cache=use_cache)
        assert picker.smallest_gap > MARGIN
        assert torch.equal(got, expected)


# -- a wrong mapping is caught -------------------------------------------------------------------------------------


def test_a_square_conv1d_weight_not_transposed_loads_but_the_logits_differ(monkeypatch):
    def untranspose(weights):
        weights["blocks.0.self_attn.out_proj.weight"] = weights["blocks.0.self_attn.out_proj.weight"].T  # 32 x 32

    monkeypatch.setattr("transformer_lib.gpt.hf_gpt2_weights", wrong_mapping(untranspose))
    hf = hf_model()
    ours, theirs = logits_of(GPT.from_hf_gpt2(hf), hf)  # loads without an error
    assert (ours - theirs).abs().max() > 1e-2
    with pytest.raises(AssertionError):
        torch.testing.assert_close(ours, theirs, **FLOAT32)


def test_a_non_square_conv1d_weight_not_transposed_raises(monkeypatch):
    def untranspose(weights):
        weights["blocks.1.linear1.weight"] = weights["blocks.1.linear1.weight"].T  # (32, 128) left as GPT-2 stores it

    monkeypatch.setattr("transformer_lib.gpt.hf_gpt2_weights", wrong_mapping(untranspose))
    with pytest.raises(ValueError, match=r"blocks.1.linear1.weight has shape \(32, 128\), but .* needs \(128, 32\)"):
        GPT.from_hf_gpt2(hf_model())


def test_queries_and_keys_swapped_are_caught(monkeypatch):
    def swap(weights):
        for part in ("weight", "bias"):
            q, k = f"blocks.0.self_attn.q_proj.{part}", f"blocks.0.self_attn.k_proj.{part}"
            weights[q], weights[k] = weights[k], weights[q]

    monkeypatch.setattr("transformer_lib.gpt.hf_gpt2_weights", wrong_mapping(swap))
    hf = hf_model()
    ours, theirs = logits_of(GPT.from_hf_gpt2(hf), hf)
    with pytest.raises(AssertionError):
        torch.testing.assert_close(ours, theirs, **FLOAT32)
