"""Checks for lesson 06's exercises: a head split fixed, merging heads, a multi-head forward pass for self- and
cross-attention, which offset each head attends to, and a layer's parameter count."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from ..attention import scaled_dot_product_attention
from ..masks import causal_mask, padding_mask
from ..multi_head import MultiHeadAttention, merge_heads, split_heads
from ._feedback import CheckResult, Exercise, Hint


def _input(batch: int, length: int, d_model: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(batch, length, d_model, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def split_into_heads(student_fn: Callable) -> CheckResult:
    """Check a function ((batch, T, d_model), num_heads) -> (batch, heads, T, d_head)."""
    ex = Exercise("split_into_heads")
    with ex.run():
        x = _input(2, 5, 12)  # batch 2, T 5, 3 heads of 4: every bug below gives other numbers
        if not ex.compare(
            "12 features split into 3 heads of 4 (batch 2, 5 tokens)",
            ex.call(student_fn, x, 3),
            split_heads(x, 3),
            hint="view as (batch, T, heads, d_head), then swap the T and heads axes with .transpose(1, 2)",
            mistakes={
                Hint("you reshaped straight to (batch, heads, T, d_head), as the buggy function does: that mixes "
                     "tokens into heads. View as (batch, T, heads, d_head) first, then transpose(1, 2)",
                     id="reshape-without-transpose"): x.reshape(2, 3, 5, 4),
                Hint("you cut the features into heads but kept (batch, T, heads, d_head): transpose(1, 2) to put the "
                     "heads before T", id="heads-axis-not-moved"): x.view(2, 5, 3, 4),
                Hint("head i holds the contiguous features i*d_head … (i+1)*d_head - 1: view as (batch, T, heads, "
                     "d_head), not (batch, T, d_head, heads)", id="heads-interleaved"): (
                    x.view(2, 5, 4, 3).permute(0, 3, 1, 2)
                ),
            },
        ):
            return ex.result  # the first failure stops: one hint, one diagnosis
        y = _input(3, 2, 8, seed=4)
        ex.compare("8 features split into 4 heads of 2 (batch 3, 2 tokens)", ex.call(student_fn, y, 4),
                   split_heads(y, 4), hint="read batch, T and d_model from x.shape; d_head = d_model // num_heads")
    return ex.result


def merge_from_heads(student_fn: Callable) -> CheckResult:
    """Check a function (batch, heads, T, d_head) -> (batch, T, heads * d_head), the inverse of splitting."""
    ex = Exercise("merge_from_heads")
    with ex.run():
        heads = split_heads(_input(2, 5, 12, seed=1), 3)  # (2, 3, 5, 4)
        got = ex.call(student_fn, heads)
        if not ex.compare(
            "3 heads of 4 merged back into 12 features",
            got,
            merge_heads(heads),
            hint="transpose(1, 2) to (batch, T, heads, d_head) first, then reshape to (batch, T, heads * d_head)",
            mistakes={
                Hint("you merged the heads in the wrong order (reshaped without transposing): transpose(1, 2) first",
                     id="reshape-without-transpose"): heads.reshape(2, 5, 12),
                Hint("head i's features must stay side by side (features i*d_head … (i+1)*d_head - 1): bring the "
                     "axes to (batch, T, heads, d_head), not (batch, T, d_head, heads), before reshaping",
                     id="heads-interleaved"): heads.permute(0, 2, 3, 1).reshape(2, 5, 12),
                Hint("you moved the heads axis but stopped at (batch, T, heads, d_head): reshape the last two axes "
                     "into one of heads * d_head features", id="heads-not-flattened"): heads.transpose(1, 2),
                Hint("the heads' outputs are concatenated, not averaged: each head keeps its own d_head features, "
                     "so the result has heads * d_head of them", id="heads-averaged"): heads.mean(dim=1),
            },
        ):
            return ex.result  # the first failure stops: one hint, one diagnosis
        x = _input(1, 3, 8, seed=2)
        ex.compare("merging undoes splitting (8 features, 2 heads)", ex.call(student_fn, split_heads(x, 2)), x)
    return ex.result


def _variant(mha: MultiHeadAttention, queries_from: torch.Tensor, keys_values_from: torch.Tensor,
             mask: torch.Tensor, scale: float, project_out: bool = True, zero_fill: bool = False,
             inverted: bool = False) -> torch.Tensor:
    """Multi-head attention from the core's pieces with another scale, without W^O, with blocked scores set to 0
    (``zero_fill``) or with the mask's polarity inverted (``inverted``): typical wrong answers."""
    q = split_heads(mha.q_proj(queries_from), mha.num_heads)  # (batch, heads, T_q, d_head)
    k = split_heads(mha.k_proj(keys_values_from), mha.num_heads)  # (batch, heads, T_k, d_head)
    v = split_heads(mha.v_proj(keys_values_from), mha.num_heads)  # (batch, heads, T_k, d_head)
    if zero_fill or inverted:  # blocked scores become 0, an ordinary score; or the allowed ones -inf
        scores = q @ k.transpose(-2, -1) * scale  # (batch, heads, T_q, T_k)
        filled = scores.masked_fill(mask, float("-inf")) if inverted else scores.masked_fill(~mask, 0.0)
        return mha.out_proj(merge_heads(torch.softmax(filled, dim=-1) @ v))  # NaN where a row has no key left
    attended, _ = scaled_dot_product_attention(q, k, v, mask=mask, scale=scale)  # (batch, heads, T_q, d_head)
    merged = merge_heads(attended)  # (batch, T_q, d_model)
    return mha.out_proj(merged) if project_out else merged


def multi_head_forward(student_fn: Callable) -> CheckResult:
    """Check a function (queries_from, keys_values_from, mha, mask) -> (batch, T_q, d_model)."""
    ex = Exercise("multi_head_forward")
    with ex.run():
        torch.manual_seed(0)
        mha = MultiHeadAttention(d_model=8, num_heads=2).double().eval()
        one_head = MultiHeadAttention(d_model=8, num_heads=1).double().eval()
        one_head.load_state_dict(mha.state_dict())
        x = _input(2, 4, 8, seed=3)
        decoder, encoder = _input(2, 3, 8, seed=5), _input(2, 5, 8, seed=6)
        source = torch.tensor([[4, 7, 1, 9, 0], [5, 2, 0, 0, 0]])  # lengths 4 and 2, pad id 0: both padded
        cases = (
            ("self-attention with 2 heads and a causal mask (batch 2, 4 tokens, d_model 8)", x, x, causal_mask(4)),
            ("cross-attention: 3 decoder queries, 5 encoder keys, source lengths 4 and 2 (padding mask)",
             decoder, encoder, padding_mask(source, 0)),
        )
        with torch.no_grad():
            for what, queries_from, keys_values_from, mask in cases:
                expected, _ = mha(queries_from, keys_values_from, keys_values_from, mask=mask)
                got = ex.call(student_fn, queries_from, keys_values_from, mha, mask)
                if not ex.compare(
                    what,
                    got,
                    expected,
                    hint="queries from queries_from, keys and values from keys_values_from; split into heads, "
                    "scale by sqrt(d_head), mask, softmax, weight the values, merge, then mha.out_proj",
                    mistakes={
                        Hint("you attended with one head of width d_model: split the projections into "
                             "mha.num_heads heads, and scale by sqrt(d_head)", id="single-head"): one_head(
                            queries_from, keys_values_from, keys_values_from, mask=mask)[0],
                        Hint("the mask was ignored: block the scores where the mask is False", id="mask-ignored"): mha(
                            queries_from, keys_values_from, keys_values_from)[0],
                        Hint("scale by sqrt(d_head), the width of one head (here 4), not sqrt(d_model)",
                             id="scaled-by-sqrt-d-model"): _variant(
                            mha, queries_from, keys_values_from, mask, scale=1 / math.sqrt(8)),
                        Hint("divide the scores by sqrt(d_head) before the softmax: unscaled scores make the "
                             "weights too peaked", id="missing-sqrt-dk"): _variant(
                            mha, queries_from, keys_values_from, mask, scale=1.0),
                        Hint("finish with mha.out_proj (W^O), which mixes the heads", id="output-projection-missing"): (
                            _variant(mha, queries_from, keys_values_from, mask, scale=1 / math.sqrt(4),
                                     project_out=False)
                        ),
                        Hint("blocked keys still get weight: a score of 0 (filling with 0, or multiplying by the "
                             "mask) is an ordinary score; fill the blocked scores with -inf before the softmax",
                             id="masked-with-zero"): _variant(mha, queries_from, keys_values_from, mask,
                                                              scale=1 / math.sqrt(4), zero_fill=True),
                        Hint("the mask polarity is inverted: True means the key is allowed, so block where it is "
                             "False (masked_fill(~mask, -inf))", id="inverted-polarity"): mha(
                            queries_from, keys_values_from, keys_values_from, mask=~mask)[0],
                        Hint("the mask polarity is inverted: True means the key is allowed, so block where it is "
                             "False (masked_fill(~mask, -inf)); the NaN comes from a query left with no key",
                             id="inverted-polarity"): _variant(mha, queries_from, keys_values_from, mask,
                                                               scale=1 / math.sqrt(4), inverted=True),
                    },
                ):
                    break  # the first failure stops: one hint, one diagnosis
    return ex.result


def _offset_heads(offsets: tuple[int, ...], length: int, seed: int) -> torch.Tensor:
    """Weights (heads, T, T) of a core MultiHeadAttention whose head h looks offsets[h] positions away, plus noise."""
    heads = len(offsets)
    generator = torch.Generator().manual_seed(seed)
    mha = MultiHeadAttention(d_model=heads * length, num_heads=heads, bias=False).double()
    x = torch.zeros(1, length, heads * length, dtype=torch.float64)  # (batch, T, d_model)
    x[0, :, :length] = torch.eye(length, dtype=torch.float64)  # position one-hot
    x[0, :, length:] = 0.3 * torch.randn(length, (heads - 1) * length, generator=generator, dtype=torch.float64)
    with torch.no_grad():
        for proj in (mha.q_proj, mha.k_proj):
            proj.weight.copy_(0.1 * torch.randn(proj.weight.shape, generator=generator, dtype=torch.float64))
        for h, offset in enumerate(offsets):
            for i in range(length):  # head h's query i looks for the key of position i + offset
                if 0 <= i + offset < length:
                    mha.q_proj.weight[h * length + i + offset, i] += 8.0
                mha.k_proj.weight[h * length + i, i] += 1.0
        _, weights = mha(x, x, x)  # (1, heads, T, T)
    return weights[0]


def head_offsets(student_fn: Callable) -> CheckResult:
    """Check a function weights (heads, T_q, T_k) -> for each head, the offset key - query that it attends to."""
    ex = Exercise("head_offsets")
    with ex.run():
        for offsets, length, seed in (((-1, 0, 2, -3), 8, 0), ((1, -2), 6, 1)):
            weights = _offset_heads(offsets, length, seed)
            queries = torch.arange(length)
            per_query = weights.argmax(dim=-1) - queries  # (heads, T): key - query of each row's largest weight
            if not ex.compare(
                f"{len(offsets)} heads over {length} tokens",
                ex.call(student_fn, weights),
                list(offsets),
                hint="for each query (row) take the key with the largest weight, compute key - query, and keep "
                "the offset most rows agree on",
                mistakes={
                    Hint("your offsets have the wrong sign: the offset is key position - query position, with the "
                         "argmax taken along the keys (the last axis)", id="offset-sign-flipped"): [
                        -o for o in offsets
                    ],
                    Hint("you averaged the offsets: rows with nothing to find (the first query of a 'previous "
                         "token' head) pull the mean away; keep the offset most rows agree on",
                         id="offsets-averaged"): per_query.double().mean(-1),
                    Hint("you looked at the first query only: it may have nothing to find; use every row",
                         id="first-query-only"): per_query[:, 0],
                },
            ):
                break  # the first failure stops: one hint, one diagnosis
    return ex.result


def parameter_count(student_fn: Callable) -> CheckResult:
    """Check a prediction (d_model, num_heads, bias) -> the number of parameters of a multi-head attention layer."""
    ex = Exercise("parameter_count")
    with ex.run():
        for d_model, heads, bias in ((512, 8, True), (512, 1, True), (64, 4, False), (12288, 96, True)):
            with torch.device("meta"):  # shapes only: no memory for GPT-3's 12288-wide layer
                layer = MultiHeadAttention(d_model, heads, bias=bias)
            expected = sum(p.numel() for p in layer.parameters())
            weights, biases = 4 * d_model * d_model, 4 * d_model
            mistakes = {
                Hint("the heads share the projections: each head's W^Q is d_model x d_head, so all heads "
                     "together are d_model x d_model; the count does not depend on the number of heads",
                     id="multiplied-by-heads"): heads * expected,
                Hint("with bias=True each of the four projections also has a bias vector of d_model numbers",
                     id="biases-forgotten"): weights,
                Hint("bias=False: the projections have no bias vectors", id="biases-counted-without-bias"): (
                    weights + biases
                ),
                Hint("do not forget the output projection W^O: four projections, not three",
                     id="output-projection-missing"): expected * 3 // 4,
            }
            if not ex.compare(
                f"d_model = {d_model}, {heads} head{'s' if heads > 1 else ''}, bias={bias}",
                ex.call(student_fn, d_model, heads, bias),
                expected,
                hint="four d_model x d_model projections (W^Q, W^K, W^V, W^O), plus a bias vector of d_model for "
                "each when bias=True",
                # a mistake that gives the right count for this layer (one head, or the bias it does have) is no
                # mistake here
                mistakes={hint: wrong for hint, wrong in mistakes.items() if wrong != expected},
                atol=0,
                rtol=0,  # a count is exact: GPT-3's 49152 biases are 8e-5 of its count, inside the default rtol
            ):
                break  # the first failure stops: one hint, one diagnosis
    return ex.result
