"""The lesson 06 checks accept the solutions, spot stubs, and name the typical mistakes (head order, one head,
the scale, W^O, offsets, parameter counts)."""

import math

import torch

from check_helpers import assert_rejected_with, stub
from transformer_lib.checks import ex06_multi_head_attention as check
from transformer_lib.checks._feedback import NOT_ATTEMPTED

CHECKS = (check.split_into_heads, check.merge_from_heads, check.multi_head_forward, check.head_offsets,
          check.parameter_count)


def split(x, num_heads):
    batch, length, d_model = x.shape
    return x.view(batch, length, num_heads, d_model // num_heads).transpose(1, 2)


def merge(x):
    batch, heads, length, d_head = x.shape
    return x.transpose(1, 2).reshape(batch, length, heads * d_head)


def forward(queries_from, keys_values_from, mha, mask, num_heads=None, scale_by=None, project_out=True):
    heads = num_heads or mha.num_heads
    q = split(mha.q_proj(queries_from), heads)
    k, v = split(mha.k_proj(keys_values_from), heads), split(mha.v_proj(keys_values_from), heads)
    scores = q @ k.transpose(-2, -1) / math.sqrt(scale_by or q.shape[-1])
    weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    merged = merge(weights @ v)
    return mha.out_proj(merged) if project_out else merged


def offsets(weights):
    per_query = weights.argmax(dim=-1) - torch.arange(weights.shape[-1])  # (heads, T)
    return torch.mode(per_query, dim=-1).values.tolist()


def parameters(d_model, num_heads, bias):
    return 4 * d_model * d_model + (4 * d_model if bias else 0)


def test_stubs_are_not_attempted(capsys):
    for check_fn in CHECKS:
        assert not check_fn(stub).attempted
    assert capsys.readouterr().out.count(NOT_ATTEMPTED) == len(CHECKS)


def test_split_accepts_the_fix_and_names_each_wrong_split():
    assert check.split_into_heads(split).ok
    b, t, d = 0, 1, 2  # axes of x
    wrong = {
        "mixes tokens into heads": lambda x, h: x.reshape(x.shape[b], h, x.shape[t], -1),
        "transpose(1, 2) to put the heads before T": lambda x, h: x.view(x.shape[b], x.shape[t], h, -1),
        "not (batch, T, d_head, heads)": lambda x, h: x.view(x.shape[b], x.shape[t], x.shape[d] // h, h).permute(
            0, 3, 1, 2),
    }
    for hint, fn in wrong.items():
        assert_rejected_with(check.split_into_heads(fn), hint)
    assert_rejected_with(check.split_into_heads(lambda x, h: x.view(2, 5, h, -1).transpose(1, 2)), "raised")


def test_merge_accepts_the_solution_and_names_the_wrong_order():
    assert check.merge_from_heads(merge).ok
    assert_rejected_with(
        check.merge_from_heads(lambda x: x.reshape(x.shape[0], x.shape[2], -1)), "merged the heads in the wrong order"
    )


def test_forward_accepts_the_solution_and_names_one_head_missing_mask_scale_and_output_projection():
    assert check.multi_head_forward(forward).ok
    wrong = {
        "with one head": lambda qf, kvf, mha, mask: forward(qf, kvf, mha, mask, num_heads=1),
        "mask was ignored": lambda qf, kvf, mha, mask: forward(qf, kvf, mha, torch.ones_like(mask)),
        "not sqrt(d_model)": lambda qf, kvf, mha, mask: forward(qf, kvf, mha, mask, scale_by=mha.d_model),
        "finish with mha.out_proj": lambda qf, kvf, mha, mask: forward(qf, kvf, mha, mask, project_out=False),
    }
    for hint, fn in wrong.items():
        assert_rejected_with(check.multi_head_forward(fn), hint)
    keys_from_the_decoder = check.multi_head_forward(lambda qf, kvf, mha, mask: forward(qf, qf, mha, mask))
    assert keys_from_the_decoder.passed == 1  # right for self-attention, where both inputs are the same
    assert_rejected_with(keys_from_the_decoder, "raised RuntimeError")  # the source mask cannot fit (T_q, T_q)


def test_head_offsets_accepts_the_solution_and_names_sign_mean_and_first_row():
    assert check.head_offsets(offsets).ok
    per_query = lambda w: w.argmax(dim=-1) - torch.arange(w.shape[-1])  # noqa: E731
    wrong = {
        "wrong sign": lambda w: [-o for o in offsets(w)],
        "you averaged the offsets": lambda w: per_query(w).double().mean(-1),
        "the first query only": lambda w: per_query(w)[:, 0],
    }
    for hint, fn in wrong.items():
        assert_rejected_with(check.head_offsets(fn), hint)


def test_parameter_count_accepts_the_prediction_and_names_each_wrong_count():
    assert check.parameter_count(parameters).ok
    wrong = {
        "does not depend on the number of heads": lambda d, h, bias: h * parameters(d, h, bias),
        "also has a bias vector": lambda d, h, bias: 4 * d * d,
        "have no bias vectors": lambda d, h, bias: 4 * d * d + 4 * d,
        "four projections, not three": lambda d, h, bias: 3 * d * d + (3 * d if bias else 0),
    }
    for hint, fn in wrong.items():
        assert_rejected_with(check.parameter_count(fn), hint)
