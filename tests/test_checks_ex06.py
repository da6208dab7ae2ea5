"""The lesson 06 checks accept the solutions, spot stubs, and name the typical mistakes (head order, one head)."""

import math

import torch

from check_helpers import assert_rejected_with, stub
from transformer_lib.checks import ex06_multi_head_attention as check
from transformer_lib.checks._feedback import NOT_ATTEMPTED


def split(x, num_heads):
    batch, length, d_model = x.shape
    return x.view(batch, length, num_heads, d_model // num_heads).transpose(1, 2)


def merge(x):
    batch, heads, length, d_head = x.shape
    return x.transpose(1, 2).reshape(batch, length, heads * d_head)


def forward(x, mha, mask, num_heads=None):
    heads = num_heads or mha.num_heads
    q, k, v = (split(proj(x), heads) for proj in (mha.q_proj, mha.k_proj, mha.v_proj))
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    return mha.out_proj(merge(weights @ v))


def test_stubs_are_not_attempted(capsys):
    for check_fn in (check.split_into_heads, check.merge_from_heads, check.multi_head_forward):
        assert not check_fn(stub).attempted
    assert capsys.readouterr().out.count(NOT_ATTEMPTED) == 3


def test_split_accepts_the_solution_and_names_a_plain_reshape():
    assert check.split_into_heads(split).ok
    assert_rejected_with(
        check.split_into_heads(lambda x, h: x.reshape(x.shape[0], h, x.shape[1], -1)), "mixes tokens into heads"
    )


def test_merge_accepts_the_solution_and_names_the_wrong_order():
    assert check.merge_from_heads(merge).ok
    assert_rejected_with(
        check.merge_from_heads(lambda x: x.reshape(x.shape[0], x.shape[2], -1)), "merged the heads in the wrong order"
    )


def test_forward_accepts_the_solution_and_names_one_head_and_missing_mask():
    assert check.multi_head_forward(forward).ok
    assert_rejected_with(
        check.multi_head_forward(lambda x, mha, mask: forward(x, mha, mask, num_heads=1)), "with one head"
    )
    assert_rejected_with(
        check.multi_head_forward(lambda x, mha, mask: forward(x, mha, torch.ones_like(mask))), "mask was ignored"
    )
