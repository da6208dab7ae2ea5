"""The lesson 07 checks accept the solutions, spot stubs, and name the typical mistakes."""

from functools import partial

import pytest
import torch

from check_helpers import assert_diagnosed, assert_rejected_with, stub
from transformer_lib.checks import ex07_encoder_decoder_blocks as check
from transformer_lib.checks._feedback import NOT_ATTEMPTED


def layer_norm_solution(x, weight, bias, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    variance = x.var(-1, unbiased=False, keepdim=True)
    return (x - mean) / torch.sqrt(variance + eps) * weight + bias


def test_stubs_are_not_attempted(capsys):
    checks = (check.layer_norm, check.add_and_norm, check.cross_attention_sublayer, check.decoder_layer,
              check.predict_influence)
    for check_fn in checks:
        assert not check_fn(stub).attempted
    assert capsys.readouterr().out.count(NOT_ATTEMPTED) == len(checks)


def test_layer_norm_accepts_the_solution_and_names_the_mistakes():
    assert check.layer_norm(layer_norm_solution).ok

    def over_batch(x, weight, bias, eps=1e-5):
        return (x - x.mean(0)) / torch.sqrt(x.var(0, unbiased=False) + eps) * weight + bias

    assert_rejected_with(check.layer_norm(over_batch), "you normalised over the batch")

    def unbiased(x, weight, bias, eps=1e-5):
        return (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True) + eps) * weight + bias

    assert_rejected_with(check.layer_norm(unbiased), "biased variance")


def test_add_and_norm_accepts_the_solution_and_names_the_mistakes():
    assert check.add_and_norm(lambda x, sublayer, norm: norm(x + sublayer(x))).ok
    assert_rejected_with(check.add_and_norm(lambda x, sublayer, norm: norm(sublayer(x))), "you forgot the residual")
    assert_rejected_with(check.add_and_norm(lambda x, sublayer, norm: x + sublayer(norm(x))), "that is pre-LN")


def test_add_and_norm_names_the_residual_after_the_norm():
    assert_rejected_with(check.add_and_norm(lambda x, sublayer, norm: x + norm(sublayer(x))), "normalise the sum")


def cross_attention_solution(x, memory, attention, norm, memory_mask):
    return norm(x + attention(x, memory, memory, mask=memory_mask)[0])


@pytest.mark.parametrize(("wrong", "hint"), [
    (lambda x, memory, attention, norm, mask: norm(x + attention(memory, memory, x, mask=mask)[0]),
     "queries come from the decoder"),
    (lambda x, memory, attention, norm, mask: norm(x + attention(memory, x, x, mask=mask)[0]),
     "queries come from the decoder"),
    (lambda x, memory, attention, norm, mask: norm(x + attention(x, memory, memory)[0]),
     "padded source positions are still visible"),
    (lambda x, memory, attention, norm, mask: norm(attention(x, memory, memory, mask=mask)[0]),
     "you forgot the residual"),
    (lambda x, memory, attention, norm, mask: x + attention(norm(x), memory, memory, mask=mask)[0],
     "that is pre-LN"),
    (lambda x, memory, attention, norm, mask: x + norm(attention(x, memory, memory, mask=mask)[0]),
     "normalise the sum"),
])
def test_cross_attention_sublayer_names_the_mistakes(wrong, hint):
    assert check.cross_attention_sublayer(cross_attention_solution).ok
    assert_rejected_with(check.cross_attention_sublayer(wrong), hint)


def _decoder(layer, x, memory, tgt_mask, memory_mask, *, self_mask=True, cross_mask=True, pre_ln=False,
             swap=False, norm_the_sublayer=False):
    """A decoder layer written out, with switches for the classic mistakes."""
    def wrap(x, sublayer, norm):
        if pre_ln:
            return x + sublayer(norm(x))
        return x + norm(sublayer(x)) if norm_the_sublayer else norm(x + sublayer(x))

    def cross(h):
        if swap:
            return layer.multihead_attn(memory, memory, h, mask=memory_mask)[0]
        return layer.multihead_attn(h, memory, memory, mask=memory_mask if cross_mask else None)[0]

    x = wrap(x, lambda h: layer.self_attn(h, h, h, mask=tgt_mask if self_mask else None)[0], layer.norm1)
    x = wrap(x, cross, layer.norm2)
    return wrap(x, lambda h: layer.linear2(torch.relu(layer.linear1(h))), layer.norm3)


@pytest.mark.parametrize(("mistake", "hint"), [
    ({"self_mask": False}, "must be causal"),
    ({"cross_mask": False}, "padded source positions are still visible"),
    ({"pre_ln": True}, "that is pre-LN"),
    ({"norm_the_sublayer": True}, "normalise the sum"),
    ({"swap": True}, "queries come from the decoder"),
])
def test_decoder_layer_names_the_mistakes(mistake, hint):
    assert check.decoder_layer(_decoder).ok
    assert_rejected_with(check.decoder_layer(partial(_decoder, **mistake)), hint)


def _influence(target, source):
    return lambda: (target, source)


TARGET = torch.ones(5, 5, dtype=torch.bool).tril()
SOURCE = torch.tensor([[True] * 4 + [False] * 2] * 5)


@pytest.mark.parametrize(("target", "source", "hint"), [
    (torch.ones(5, 5, dtype=torch.bool).triu(), SOURCE, "that is the future"),
    (torch.ones(5, 5, dtype=torch.bool), SOURCE, "self-attention is causal"),
    (torch.ones(5, 5, dtype=torch.bool).tril(-1), SOURCE, "the diagonal"),
    (torch.eye(5, dtype=torch.bool), SOURCE, "attention mixes positions"),
    (TARGET, torch.ones(5, 6, dtype=torch.bool), "padded source positions are masked"),
    (TARGET, torch.ones(5, 6, dtype=torch.bool).tril() & SOURCE, "cross-attention has no causal mask"),
])
def test_predict_influence_names_the_mistakes(target, source, hint):
    assert check.predict_influence(_influence(TARGET, SOURCE)).ok
    assert_rejected_with(check.predict_influence(_influence(target, source)), hint)


def test_predict_influence_wants_two_tensors():
    assert_rejected_with(check.predict_influence(lambda: TARGET), "you returned two tensors")


def test_hints_name_the_idea_first_and_the_code_on_a_second_failure():
    def unmasked(x, memory, attention, norm, mask):
        return norm(x + attention(x, memory, memory)[0])

    first = check.cross_attention_sublayer(unmasked)
    assert not any("mask=memory_mask" in line for line in first.lines if line.startswith("  hint:")), first.lines
    again = check.cross_attention_sublayer(unmasked)
    assert_rejected_with(again, "next step: attention(x, memory, memory, mask=memory_mask)")


def test_each_named_mistake_is_diagnosed_as_itself():
    def normalised(x):
        return (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + 1e-5)

    assert_diagnosed(check.layer_norm(lambda x, w, b, eps=1e-5: (x - x.mean(0)) / torch.sqrt(
        x.var(0, unbiased=False) + eps) * w + b), "normalised-over-batch")
    assert_diagnosed(check.layer_norm(lambda x, w, b, eps=1e-5: normalised(x)), "weight-and-bias-left-out")
    assert_diagnosed(check.layer_norm(lambda x, w, b, eps=1e-5: (x - x.mean(-1, keepdim=True)) / torch.sqrt(
        x.var(-1, keepdim=True) + eps) * w + b), "unbiased-variance")

    assert_diagnosed(check.add_and_norm(lambda x, sublayer, norm: norm(sublayer(x))), "residual-missing")
    assert_diagnosed(check.add_and_norm(lambda x, sublayer, norm: x + sublayer(norm(x))), "pre-ln-instead")
    assert_diagnosed(check.add_and_norm(lambda x, sublayer, norm: x + norm(sublayer(x))), "residual-after-norm")

    assert_diagnosed(check.cross_attention_sublayer(
        lambda x, memory, attention, norm, mask: norm(x + attention(x, memory, memory)[0])), "memory-mask-missing")
    assert_diagnosed(check.cross_attention_sublayer(
        lambda x, memory, attention, norm, mask: norm(x + attention(memory, memory, x, mask=mask)[0])),
        "queries-from-memory")

    assert_diagnosed(check.decoder_layer(partial(_decoder, self_mask=False)), "self-attention-not-causal")
    assert_diagnosed(check.decoder_layer(partial(_decoder, cross_mask=False)), "memory-mask-missing")
    assert_diagnosed(check.decoder_layer(partial(_decoder, pre_ln=True)), "pre-ln-instead")
    assert_diagnosed(check.decoder_layer(partial(_decoder, norm_the_sublayer=True)), "residual-after-norm")

    ones = torch.ones(5, 5, dtype=torch.bool)
    assert_diagnosed(check.predict_influence(_influence(ones.triu(), SOURCE)), "future-above-diagonal")
    assert_diagnosed(check.predict_influence(_influence(ones, SOURCE)), "not-causal")
    assert_diagnosed(check.predict_influence(_influence(ones.tril(-1), SOURCE)), "diagonal-missing")
    assert_diagnosed(check.predict_influence(_influence(torch.eye(5, dtype=torch.bool), SOURCE)), "own-position-only")
    assert_diagnosed(check.predict_influence(_influence(TARGET, torch.ones(5, 6, dtype=torch.bool))),
                     "padding-visible")
    assert_diagnosed(check.predict_influence(_influence(TARGET, torch.ones(5, 6, dtype=torch.bool).tril() & SOURCE)),
                     "cross-attention-made-causal")


def _normalised(x, weight, bias, eps=1e-5, eps_inside=True):
    centred = x - x.mean(dim=-1, keepdim=True)
    variance = x.var(dim=-1, unbiased=False, keepdim=True)
    return centred / (torch.sqrt(variance + eps) if eps_inside else variance.sqrt() + eps) * weight + bias


def test_layer_norm_uses_the_eps_argument_inside_the_root_on_any_layout():
    assert_diagnosed(check.layer_norm(lambda x, weight, bias, eps=1e-5: _normalised(x, weight, bias)),
                     "eps-argument-ignored")
    assert_diagnosed(check.layer_norm(lambda x, weight, bias, eps=1e-5: _normalised(x, weight, bias, eps, False)),
                     "eps-outside-sqrt")

    def rows_by_view(x, weight, bias, eps=1e-5):  # view(-1, d) needs the batch and T axes to be contiguous
        return _normalised(x.view(-1, x.shape[-1]), weight, bias, eps).view(x.shape)

    result = check.layer_norm(rows_by_view)
    assert result.passed == 2 and not result.ok  # right on the contiguous inputs
    assert_rejected_with(result, "raised RuntimeError")
    assert check.layer_norm(lambda x, weight, bias, eps=1e-5: torch.nn.functional.layer_norm(
        x, x.shape[-1:], weight, bias, eps)).ok
    assert check.layer_norm(lambda x, weight, bias, eps=1e-5: _normalised(x.reshape(-1, x.shape[-1]), weight, bias,
                                                                          eps).reshape(x.shape)).ok
    assert check.layer_norm(lambda x, weight, bias, eps=1e-5: _normalised(x.float(), weight.float(), bias.float(),
                                                                          eps)).ok


@pytest.mark.parametrize(("mistake", "mistake_id", "where"), [
    ({"self_mask": False}, "self-attention-not-causal", "the first sub-module whose output differs is "
     "self_attn.out_proj (the difference arises inside self_attn); likely mask-missing: no causal mask"),
    ({"pre_ln": True}, "pre-ln-instead", "the first sub-module whose output differs is self_attn.q_proj (the "
     "difference arises in your forward's own code)"),
    ({"norm_the_sublayer": True}, "residual-after-norm", "the first sub-module whose output differs is norm1 (the "
     "difference arises in your forward's own code); likely missing-residual"),
])
def test_decoder_layer_hint_says_where_the_layer_parts_from_the_librarys(mistake, mistake_id, where):
    """A wrong decoder layer is run as a DecoderLayer's forward beside the library's: its one hint keeps the check's
    mistake and adds the sub-module compare_models finds first, with the mistake it names there."""
    result = check.decoder_layer(partial(_decoder, **mistake))
    assert_diagnosed(result, mistake_id)
    hints = [line for line in result.lines if line.startswith("  hint:")]
    assert len(hints) == 1 and len(result.diagnoses) == 1, result.lines
    assert where in hints[0] and where in result.diagnoses[0]["hint"], hints


def test_decoder_layer_adds_no_location_when_the_function_cannot_run():
    """The swapped inputs raise: the shape hint alone, said once; the right answer passes."""
    result = check.decoder_layer(partial(_decoder, swap=True))
    hints = [line for line in result.lines if line.startswith("  hint:")]
    assert len(hints) == 1 and "sub-module" not in hints[0], hints
    assert check.decoder_layer(_decoder).ok
