"""The hooks of transformer_lib.interpret read and change what they claim, and leave the model as it was."""

import pytest
import torch
import torch.nn.functional as F

from transformer_lib import GPT, GPTConfig, set_seed
from transformer_lib.interpret import (
    ablate_heads,
    attention_input,
    attention_patterns,
    head_output_means,
    logit_lens,
    patched_logits,
    patched_projection_logits,
    residual_stream,
    token_ranks,
    trace_projections,
    trace_residual,
)
from transformer_lib.multi_head import merge_heads, split_heads


def small_gpt(feed_forward=True):
    set_seed(0)
    config = GPTConfig(vocab_size=11, block_size=12, d_model=16, num_heads=4, num_layers=2, d_ff=32,
                       feed_forward=feed_forward)
    return GPT(config).double().eval()


TOKENS = torch.tensor([[1, 2, 3, 4, 5, 1, 2, 3, 4, 5], [6, 7, 8, 9, 10, 6, 7, 8, 9, 10]])


@pytest.mark.parametrize("feed_forward", [True, False])
def test_residual_stream_starts_at_the_embeddings_and_ends_at_the_logits(feed_forward):
    model = small_gpt(feed_forward)
    stream = residual_stream(model, TOKENS)
    assert stream.shape == (3, 2, 10, 16)
    embeddings = model.token_embedding(TOKENS) + model.position_embedding(torch.arange(10))
    torch.testing.assert_close(stream[0], embeddings)
    torch.testing.assert_close(logit_lens(model, stream[-1]), model(TOKENS))
    assert not model.dropout._forward_hooks and not any(block._forward_hooks for block in model.blocks)


def test_attention_patterns_are_the_layers_own_weights():
    model = small_gpt()
    weights = attention_patterns(model, TOKENS)
    assert weights.shape == (2, 2, 4, 10, 10)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 2, 4, 10, dtype=torch.float64))
    assert torch.all(weights.triu(diagonal=1) == 0)
    stream = residual_stream(model, TOKENS)
    for layer, block in enumerate(model.blocks):
        _, expected = block.self_attn(block.norm1(stream[layer]), need_weights=True)
        torch.testing.assert_close(weights[layer], expected)


def test_zero_ablation_equals_a_head_with_zero_values():
    model = small_gpt()
    with ablate_heads(model, [(1, 2)], kind="zero"), torch.no_grad():
        ablated = model(TOKENS)
    d_head = 4
    with torch.no_grad():
        model.blocks[1].self_attn.v_proj.weight[2 * d_head : 3 * d_head] = 0.0  # head 2's values are 0
        model.blocks[1].self_attn.v_proj.bias[2 * d_head : 3 * d_head] = 0.0
        silenced = model(TOKENS)
    torch.testing.assert_close(ablated, silenced)


def test_mean_ablation_changes_only_inside_the_block_and_needs_means():
    model = small_gpt()
    with torch.no_grad():
        before = model(TOKENS)
    means = head_output_means(model, TOKENS)
    assert means.shape == (2, 4, 4)
    with ablate_heads(model, [(0, 1), (1, 3)], kind="mean", means=means), torch.no_grad():
        ablated = model(TOKENS)
    with torch.no_grad():
        after = model(TOKENS)
    assert not torch.allclose(ablated, before)
    assert torch.equal(after, before)  # one code path run twice: the hooks are gone
    with pytest.raises(ValueError, match="mean-ablation needs"):
        with ablate_heads(model, [(0, 0)], kind="mean"):
            pass
    with pytest.raises(ValueError, match="does not exist"):
        with ablate_heads(model, [(2, 0)], kind="zero"):
            pass


def test_patching_restores_what_it_copies():
    model = small_gpt()
    corrupted = TOKENS.clone()
    corrupted[:, 2] = 0
    clean_stream = residual_stream(model, TOKENS)
    with torch.no_grad():
        clean_logits, corrupted_logits = model(TOKENS), model(corrupted)
    same = patched_logits(model, corrupted, 1, 5, residual_stream(model, corrupted)[1, :, 5])
    torch.testing.assert_close(same, corrupted_logits)
    restored = patched_logits(model, corrupted, 0, 2, clean_stream[0, :, 2])  # the embedding of the changed token
    torch.testing.assert_close(restored, clean_logits)
    last = patched_logits(model, corrupted, 2, 7, clean_stream[2, :, 7])  # the final stream at position 7
    torch.testing.assert_close(last[:, 7], clean_logits[:, 7])
    with pytest.raises(ValueError, match="depth=3 does not exist"):
        patched_logits(model, corrupted, 3, 0, clean_stream[0, :, 0])


def test_trace_residual_has_one_value_per_depth_and_position():
    model = small_gpt()
    corrupted = TOKENS.clone()
    corrupted[:, 2] = 0
    target = TOKENS[:, 8]
    trace = trace_residual(model, TOKENS, corrupted, 7, target)
    assert trace.shape == (3, 10)
    with torch.no_grad():
        clean = torch.log_softmax(model(TOKENS)[:, 7], -1).gather(-1, target[:, None]).mean()
    torch.testing.assert_close(trace[2, 7], clean)  # the final stream at the predicting position is the clean run's
    torch.testing.assert_close(trace[0, 2], clean)  # so is the restored embedding of the changed token


def test_token_ranks_count_ties_against_the_target():
    logits = torch.tensor([[0.5, 2.0, 1.0], [1.0, 1.0, 1.0]])
    assert token_ranks(logits, torch.tensor([1, 0])).tolist() == [0, 2]
    assert token_ranks(logits, torch.tensor([0, 2])).tolist() == [2, 2]
    by_depth = torch.stack([logits, -logits])  # (depths, positions, V): one row of targets serves both
    assert token_ranks(by_depth, torch.tensor([1, 0])).tolist() == [[0, 2], [2, 2]]


def test_per_position_means_average_to_the_pooled_means_and_ablate_nothing_on_one_sequence():
    model = small_gpt()
    means = head_output_means(model, TOKENS, per_position=True)
    assert means.shape == (2, 4, 10, 4)
    torch.testing.assert_close(means.mean(dim=2), head_output_means(model, TOKENS))
    same = TOKENS[:1].expand(3, -1)  # one sequence three times: each position's mean is the head's own output
    with torch.no_grad():
        intact = model(same)
    own = head_output_means(model, same, per_position=True)
    with ablate_heads(model, [(0, 1), (1, 2)], kind="mean", means=own), torch.no_grad():
        torch.testing.assert_close(model(same), intact)
    with ablate_heads(model, [(0, 1), (1, 2)], kind="mean", means=means), torch.no_grad():
        assert not torch.allclose(model(same), intact)  # other sequences' means change it


def manual_forward(model, tokens, layer, projection, position, replacement):
    """An attention-only GPT written out, one projection's input at ``position`` of block ``layer`` replaced."""
    x = model.token_embedding(tokens) + model.position_embedding(torch.arange(tokens.shape[1]))
    for index, block in enumerate(model.blocks):
        attn = block.self_attn
        h = block.norm1(x)
        inputs = {name: h for name in ("q", "k", "v")}
        if index == layer:
            inputs[projection] = h.clone()
            inputs[projection][:, position] = replacement
        q, k, v = (split_heads(getattr(attn, f"{name}_proj")(inputs[name]), attn.num_heads) for name in "qkv")
        x = x + attn.out_proj(merge_heads(F.scaled_dot_product_attention(q, k, v, is_causal=True)))
    return model.head(model.final_norm(x))


@pytest.mark.parametrize("projection", ["q", "k", "v"])
def test_a_projection_patch_changes_that_projections_input_only(projection):
    model = small_gpt(feed_forward=False)
    other = TOKENS.flip(0)
    replacement = attention_input(model, other, 1)[:, 4]  # (batch, d_model): another run's input at position 4
    patched = patched_projection_logits(model, TOKENS, 1, projection, 4, replacement)
    with torch.no_grad():
        torch.testing.assert_close(patched, manual_forward(model, TOKENS, 1, projection, 4, replacement))
        intact = model(TOKENS)
    torch.testing.assert_close(patched[:, :4], intact[:, :4])  # earlier positions never see position 4
    if projection == "q":  # a query serves its own position only
        torch.testing.assert_close(patched[:, 5:], intact[:, 5:])
    assert not any(module._forward_pre_hooks for module in model.modules())
    with pytest.raises(ValueError, match="projection='o' is unknown"):
        patched_projection_logits(model, TOKENS, 1, "o", 4, replacement)


def test_trace_projections_is_one_patch_per_projection_and_position():
    model = small_gpt(feed_forward=False)
    corrupted = TOKENS.clone()
    corrupted[:, 2] = 0
    target = TOKENS[:, 8]
    trace = trace_projections(model, TOKENS, corrupted, 1, 7, target)
    assert trace.shape == (3, 10)
    clean_input = attention_input(model, TOKENS, 1)
    logits = patched_projection_logits(model, corrupted, 1, "k", 3, clean_input[:, 3])
    expected = torch.log_softmax(logits[:, 7], -1).gather(-1, target[:, None]).mean()
    torch.testing.assert_close(trace[1, 3], expected)
    with torch.no_grad():
        corrupted_log_p = torch.log_softmax(model(corrupted)[:, 7], -1).gather(-1, target[:, None]).mean()
    torch.testing.assert_close(trace[:, 8:], corrupted_log_p.expand(3, 2))  # positions after 7 cannot matter
