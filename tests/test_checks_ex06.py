"""The lesson 06 checks accept the solutions, spot stubs, and name the typical mistakes (head order, one head,
the scale, W^O, offsets, parameter counts), each recognised as itself: the hint's text is shown and its id is the
diagnosis the class report counts."""

import math

import torch

from check_helpers import assert_diagnosed, assert_rejected_with, stub
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
    reshaped = lambda x, h: x.reshape(x.shape[b], h, x.shape[t], -1)  # noqa: E731
    not_moved = lambda x, h: x.view(x.shape[b], x.shape[t], h, -1)  # noqa: E731
    interleaved = lambda x, h: x.view(x.shape[b], x.shape[t], x.shape[d] // h, h).permute(0, 3, 1, 2)  # noqa: E731
    assert_rejected_with(check.split_into_heads(reshaped), "mixes tokens into heads")
    assert_diagnosed(check.split_into_heads(reshaped), "reshape-without-transpose")
    assert_rejected_with(check.split_into_heads(not_moved), "transpose(1, 2) to put the heads before T")
    assert_diagnosed(check.split_into_heads(not_moved), "heads-axis-not-moved")
    assert_rejected_with(check.split_into_heads(interleaved), "not (batch, T, d_head, heads)")
    assert_diagnosed(check.split_into_heads(interleaved), "heads-interleaved")
    assert_rejected_with(check.split_into_heads(lambda x, h: x.view(2, 5, h, -1).transpose(1, 2)), "raised")


def test_merge_accepts_the_solution_and_names_order_interleaving_flattening_and_averaging():
    assert check.merge_from_heads(merge).ok
    reshaped = lambda x: x.reshape(x.shape[0], x.shape[2], -1)  # noqa: E731
    interleaved = lambda x: x.permute(0, 2, 3, 1).reshape(x.shape[0], x.shape[2], -1)  # noqa: E731
    not_flattened = lambda x: x.transpose(1, 2)  # noqa: E731
    averaged = lambda x: x.mean(dim=1)  # noqa: E731
    assert_rejected_with(check.merge_from_heads(reshaped), "merged the heads in the wrong order")
    assert_diagnosed(check.merge_from_heads(reshaped), "reshape-without-transpose")
    assert_rejected_with(check.merge_from_heads(interleaved), "not (batch, T, d_head, heads)")
    assert_diagnosed(check.merge_from_heads(interleaved), "heads-interleaved")
    assert_rejected_with(check.merge_from_heads(not_flattened), "reshape the last two axes")
    assert_diagnosed(check.merge_from_heads(not_flattened), "heads-not-flattened")
    assert_rejected_with(check.merge_from_heads(averaged), "concatenated, not averaged")
    assert_diagnosed(check.merge_from_heads(averaged), "heads-averaged")


def test_forward_accepts_the_solution_and_names_one_head_missing_mask_scale_and_output_projection():
    assert check.multi_head_forward(forward).ok
    one_head = lambda qf, kvf, mha, mask: forward(qf, kvf, mha, mask, num_heads=1)  # noqa: E731
    no_mask = lambda qf, kvf, mha, mask: forward(qf, kvf, mha, torch.ones_like(mask))  # noqa: E731
    d_model_scale = lambda qf, kvf, mha, mask: forward(qf, kvf, mha, mask, scale_by=mha.d_model)  # noqa: E731
    unscaled = lambda qf, kvf, mha, mask: forward(qf, kvf, mha, mask, scale_by=1)  # noqa: E731
    no_out_proj = lambda qf, kvf, mha, mask: forward(qf, kvf, mha, mask, project_out=False)  # noqa: E731
    assert_rejected_with(check.multi_head_forward(one_head), "with one head")
    assert_diagnosed(check.multi_head_forward(one_head), "single-head")
    assert_rejected_with(check.multi_head_forward(no_mask), "mask was ignored")
    assert_diagnosed(check.multi_head_forward(no_mask), "mask-ignored")
    assert_rejected_with(check.multi_head_forward(d_model_scale), "not sqrt(d_model)")
    assert_diagnosed(check.multi_head_forward(d_model_scale), "scaled-by-sqrt-d-model")
    assert_rejected_with(check.multi_head_forward(unscaled), "divide the scores by sqrt(d_head)")
    assert_diagnosed(check.multi_head_forward(unscaled), "missing-sqrt-dk")
    assert_rejected_with(check.multi_head_forward(no_out_proj), "finish with mha.out_proj")
    assert_diagnosed(check.multi_head_forward(no_out_proj), "output-projection-missing")
    keys_from_the_decoder = check.multi_head_forward(lambda qf, kvf, mha, mask: forward(qf, qf, mha, mask))
    assert keys_from_the_decoder.passed == 1  # right for self-attention, where both inputs are the same
    assert_rejected_with(keys_from_the_decoder, "raised RuntimeError")  # the source mask cannot fit (T_q, T_q)


def test_head_offsets_accepts_the_solution_and_names_sign_mean_and_first_row():
    assert check.head_offsets(offsets).ok
    per_query = lambda w: w.argmax(dim=-1) - torch.arange(w.shape[-1])  # noqa: E731
    query_minus_key = lambda w: torch.mode(torch.arange(w.shape[-1]) - w.argmax(dim=-1), dim=-1).values  # noqa: E731
    over_queries = lambda w: torch.mode(w.argmax(dim=-2) - torch.arange(w.shape[-1]), dim=-1).values  # noqa: E731
    averaged = lambda w: per_query(w).double().mean(-1)  # noqa: E731
    first_row = lambda w: per_query(w)[:, 0]  # noqa: E731
    assert_rejected_with(check.head_offsets(query_minus_key), "wrong sign")
    assert_diagnosed(check.head_offsets(query_minus_key), "offset-sign-flipped")
    assert_diagnosed(check.head_offsets(over_queries), "offset-sign-flipped")  # argmax along the queries
    assert_rejected_with(check.head_offsets(averaged), "you averaged the offsets")
    assert_diagnosed(check.head_offsets(averaged), "offsets-averaged")
    assert_rejected_with(check.head_offsets(first_row), "the first query only")
    assert_diagnosed(check.head_offsets(first_row), "first-query-only")


def test_parameter_count_accepts_the_prediction_and_names_each_wrong_count():
    assert check.parameter_count(parameters).ok
    per_head = lambda d, h, bias: h * parameters(d, h, bias)  # noqa: E731
    no_biases = lambda d, h, bias: 4 * d * d  # noqa: E731
    always_biases = lambda d, h, bias: 4 * d * d + 4 * d  # noqa: E731
    three = lambda d, h, bias: 3 * d * d + (3 * d if bias else 0)  # noqa: E731
    assert_rejected_with(check.parameter_count(per_head), "does not depend on the number of heads")
    assert_diagnosed(check.parameter_count(per_head), "multiplied-by-heads")
    assert_rejected_with(check.parameter_count(no_biases), "also has a bias vector")
    assert_diagnosed(check.parameter_count(no_biases), "biases-forgotten")
    assert_rejected_with(check.parameter_count(always_biases), "have no bias vectors")
    assert_diagnosed(check.parameter_count(always_biases), "biases-counted-without-bias")
    assert_rejected_with(check.parameter_count(three), "four projections, not three")
    assert_diagnosed(check.parameter_count(three), "output-projection-missing")
    gpt3_without_biases = lambda d, h, bias: 4 * d * d if d == 12288 else parameters(d, h, bias)  # noqa: E731
    result = check.parameter_count(gpt3_without_biases)  # 49152 short of 604 million: counts are compared exactly
    assert result.passed == 3
    assert_diagnosed(check.parameter_count(gpt3_without_biases), "biases-forgotten")


def _filled(fill=float("-inf"), invert=False):
    """multi_head_attention whose blocked scores are filled with ``fill``, or whose mask is read inverted."""
    def attend(queries_from, keys_values_from, mha, mask):
        q = split(mha.q_proj(queries_from), mha.num_heads)
        k = split(mha.k_proj(keys_values_from), mha.num_heads)
        v = split(mha.v_proj(keys_values_from), mha.num_heads)
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        weights = torch.softmax(scores.masked_fill(mask if invert else ~mask, fill), dim=-1)
        return mha.out_proj(merge(weights @ v))
    return attend


def test_forward_names_a_zero_fill_and_an_inverted_mask_and_takes_other_correct_forms():
    assert_diagnosed(check.multi_head_forward(_filled(fill=0.0)), "masked-with-zero")
    assert_diagnosed(check.multi_head_forward(_filled(invert=True)), "inverted-polarity")  # NaN on the last query

    def multiplied(queries_from, keys_values_from, mha, mask):  # blocked scores become 0: the same mistake
        q = split(mha.q_proj(queries_from), mha.num_heads)
        k, v = split(mha.k_proj(keys_values_from), mha.num_heads), split(mha.v_proj(keys_values_from), mha.num_heads)
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]) * mask
        return mha.out_proj(merge(torch.softmax(scores, dim=-1) @ v))

    def first_sentence_mask(queries_from, keys_values_from, mha, mask):  # as if the batch had one sentence
        return _filled()(queries_from, keys_values_from, mha, mask[:1] if mask.dim() == 4 else mask)

    def torch_kernel(queries_from, keys_values_from, mha, mask):
        q = split(mha.q_proj(queries_from), mha.num_heads)
        k, v = split(mha.k_proj(keys_values_from), mha.num_heads), split(mha.v_proj(keys_values_from), mha.num_heads)
        return mha.out_proj(merge(torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)))

    assert_diagnosed(check.multi_head_forward(multiplied), "masked-with-zero")
    result = check.multi_head_forward(first_sentence_mask)
    assert not result.ok and "mask-ignored" not in {d["mistake"] for d in result.diagnoses}  # both are padded
    assert check.multi_head_forward(_filled(fill=-1e9)).ok  # no row is fully blocked here
    assert check.multi_head_forward(torch_kernel).ok


def test_a_repeated_mistake_gets_one_hint():
    for result in (check.multi_head_forward(_filled(fill=0.0)),
                   check.split_into_heads(lambda x, num_heads: x.reshape(x.shape[0], num_heads, x.shape[1], -1)),
                   check.head_offsets(lambda weights: [-o for o in offsets(weights)])):
        hints = [line for line in result.lines if line.startswith("  hint:")]
        assert len(hints) == len(result.diagnoses) == 1, result.lines
