"""Checks for lesson 07's exercises: layer normalisation, Add & Norm, the cross-attention sub-layer, a decoder layer
built from its parts, and which inputs can change which outputs of a decoder layer. A wrong decoder layer is also run
as a ``DecoderLayer``'s forward beside the library's, and :func:`~transformer_lib.compare.compare_models` says where
they part (:func:`_where_it_differs`, which lesson 08's check uses too)."""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable
from dataclasses import replace

import torch
from torch import nn

from ..compare import MISTAKES, compare_models, same_name_mapping
from ..layers import DecoderLayer, LayerNorm, position_wise_feed_forward, residual_connection
from ..masks import causal_mask, padding_mask
from ._feedback import CheckResult, Exercise, Hint, describe_mismatch

D_MODEL, HEADS, D_FF = 8, 2, 16
SWAPPED_HINT = Hint(idea="queries come from the decoder (x), keys and values from the encoder output (memory): "
                         "with T=4 target and S=6 source positions, any other choice gives a result that cannot be "
                         "added to x",
                    code="attention(x, memory, memory, mask=memory_mask)[0]  # query, key, value",
                    id="queries-from-memory")
MEMORY_MASK_HINT = Hint(idea="padded source positions are still visible: the cross-attention never receives the "
                             "source padding mask",
                        code="attention(x, memory, memory, mask=memory_mask)", id="memory-mask-missing")
RESIDUAL_IDEA = "you forgot the residual: add the sub-layer's input x to its output before normalising"
PRE_LN_IDEA = "that is pre-LN, x + sublayer(norm(x)): the paper (post-LN) normalises after adding"
AFTER_NORM_IDEA = "normalise the sum: norm(x + sublayer(x)), not x + norm(sublayer(x))"


def _inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(7)
    x = torch.randn(2, 3, 4, generator=generator, dtype=torch.float64) * 3 + 1  # (batch, T, d_model)
    weight = torch.tensor([1.0, 2.0, 0.5, -1.0], dtype=torch.float64)
    bias = torch.tensor([0.0, 0.1, -0.2, 0.3], dtype=torch.float64)
    return x, weight, bias


def _reference_norm(weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5) -> LayerNorm:
    norm = LayerNorm(weight.shape[0], eps=eps).double()
    norm.load_state_dict({"weight": weight, "bias": bias})
    return norm


def _decoder_inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """x (2, T=4, d_model), memory (2, S=6, d_model), the causal mask (4, 4), a source padding mask (2, 1, 1, 6)."""
    generator = torch.Generator().manual_seed(11)
    x = torch.randn(2, 4, D_MODEL, generator=generator, dtype=torch.float64)
    memory = torch.randn(2, 6, D_MODEL, generator=generator, dtype=torch.float64)
    source = torch.tensor([[4, 5, 6, 7, 8, 9], [4, 5, 6, 7, 0, 0]])  # the second sentence ends in two <pad>
    return x, memory, causal_mask(4), padding_mask(source, pad_id=0)


def _decoder_layer(norm_first: bool = False) -> DecoderLayer:
    """A float64 decoder layer in eval mode, its LayerNorms given distinct scales and shifts."""
    torch.manual_seed(3)
    layer = DecoderLayer(D_MODEL, HEADS, D_FF, dropout=0.0, norm_first=norm_first).double().eval()
    with torch.no_grad():
        for norm in (layer.norm1, layer.norm2, layer.norm3):
            norm.weight.uniform_(0.5, 1.5)
            norm.bias.normal_(0.0, 0.3)
    return layer


def _call_or_explain_shapes(ex: Exercise, student_fn: Callable[..., torch.Tensor], *args: object
                            ) -> torch.Tensor | None:
    """Call the student's function; a shape error (the classic swap of decoder and encoder inputs) gets its hint."""
    if not callable(student_fn):
        return ex.call(student_fn)  # reports "expected a function" and stops the checks
    try:
        return student_fn(*args)
    except NotImplementedError:
        raise
    except (RuntimeError, ValueError) as error:
        name = getattr(student_fn, "__name__", "your function")
        ex.require(f"{name} runs on T=4 target and S=6 source positions", False,
                   problem=f"it raised {type(error).__name__}: {error}", hint=SWAPPED_HINT)
        return None


def layer_norm(student_fn: Callable[..., torch.Tensor]) -> CheckResult:
    """Check ``layer_norm(x, weight, bias, eps)``: normalise each position's features, then scale and shift."""
    ex = Exercise("layer_norm")
    with ex.run():
        x, weight, bias = _inputs()
        expected = _reference_norm(weight, bias)(x)
        over_batch = (x - x.mean(0)) / torch.sqrt(x.var(0, unbiased=False) + 1e-5) * weight + bias
        unscaled = (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + 1e-5)
        unbiased = (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True) + 1e-5) * weight + bias
        ex.compare("layer norm of a (2, 3, 4) batch", ex.call(student_fn, x, weight, bias, 1e-5), expected,
                   hint=Hint(idea="take the mean and the variance of each position's own features (the last "
                                  "dimension), normalise with them, then scale by weight and shift by bias",
                             code="mean = x.mean(dim=-1, keepdim=True); variance = x.var(dim=-1, unbiased=False, "
                                  "keepdim=True); (x - mean) / torch.sqrt(variance + eps) * weight + bias"),
                   mistakes={Hint("you normalised over the batch (dim 0): LayerNorm uses each token's own "
                                  "features, the last dimension", id="normalised-over-batch"): over_batch,
                             Hint("you normalised but did not scale by weight and shift by bias",
                                  id="weight-and-bias-left-out"): unscaled,
                             Hint(idea="you used the unbiased variance (dividing by d_model - 1): use the biased "
                                       "variance, dividing by d_model, as nn.LayerNorm does",
                                  code="x.var(dim=-1, unbiased=False, keepdim=True)", id="unbiased-variance"):
                             unbiased})
        if not ex.result.ok:
            return ex.result  # the first failure stops: one hint, one diagnosis
        constant = torch.full((1, 2, 4), 3.0, dtype=torch.float64)
        if not ex.compare("a constant vector (variance 0) gives the bias, not NaN",
                          ex.call(student_fn, constant, weight, bias, 1e-5), bias.expand(1, 2, 4),
                          hint="add eps to the variance before the square root"):
            return ex.result
        # eps = 0.1 on small features: the eps argument counts, and where it goes shows; the rows are stored
        # transposed (not contiguous), d_model = 6
        small = (torch.randn(2, 6, 3, generator=torch.Generator().manual_seed(8), dtype=torch.float64) * 0.3
                 ).transpose(1, 2)  # (batch 2, T 3, d_model 6)
        weight6, bias6 = torch.linspace(0.5, 2.0, 6, dtype=torch.float64), torch.linspace(-0.3, 0.3, 6,
                                                                                           dtype=torch.float64)
        centred = small - small.mean(-1, keepdim=True)
        variance = small.var(-1, unbiased=False, keepdim=True)
        ex.compare("eps = 0.1 on small features (2, 3, 6), stored transposed (not contiguous)",
                   ex.call(student_fn, small, weight6, bias6, 0.1), _reference_norm(weight6, bias6, 0.1)(small),
                   hint="use the eps argument, added to the variance inside the square root",
                   mistakes={Hint("you ignored the eps argument (a fixed 1e-5 instead): use the eps you are given",
                                  id="eps-argument-ignored"): _reference_norm(weight6, bias6)(small),
                             Hint(idea="eps goes inside the square root, added to the variance: sqrt(variance + eps), "
                                       "not sqrt(variance) + eps",
                                  code="(x - mean) / torch.sqrt(variance + eps) * weight + bias",
                                  id="eps-outside-sqrt"): centred / (variance.sqrt() + 0.1) * weight6 + bias6})
    return ex.result


def add_and_norm(student_fn: Callable[..., torch.Tensor]) -> CheckResult:
    """Check ``add_and_norm(x, sublayer, norm)`` = norm(x + sublayer(x)) (post-LN, as in the paper)."""
    ex = Exercise("add_and_norm")
    with ex.run():
        x, weight, bias = _inputs()
        norm = _reference_norm(weight, bias)
        torch.manual_seed(0)
        sublayer = nn.Linear(4, 4).double()
        with torch.no_grad():
            expected = residual_connection(x, sublayer, norm, nn.Identity(), norm_first=False)
            mistakes = {
                Hint(RESIDUAL_IDEA, id="residual-missing"): norm(sublayer(x)),
                Hint(PRE_LN_IDEA, id="pre-ln-instead"):
                    residual_connection(x, sublayer, norm, nn.Identity(), norm_first=True),
                Hint(AFTER_NORM_IDEA, id="residual-after-norm"): x + norm(sublayer(x)),
            }
        got = ex.call(student_fn, x, sublayer, norm)
        ex.compare("norm(x + sublayer(x)) for a linear sublayer", got, expected,
                   hint="add the sublayer's output to its input, then apply norm", mistakes=mistakes)
    return ex.result


def cross_attention_sublayer(student_fn: Callable[..., torch.Tensor]) -> CheckResult:
    """Check ``cross_attention_sublayer(x, memory, attention, norm, memory_mask)``: post-LN Add & Norm around
    cross-attention whose queries come from ``x`` and whose keys and values come from ``memory``."""
    ex = Exercise("cross_attention_sublayer")
    with ex.run():
        x, memory, _, memory_mask = _decoder_inputs()
        layer = _decoder_layer()
        attention, norm = layer.multihead_attn, layer.norm2
        with torch.no_grad():
            def attend(h: torch.Tensor, mask: torch.Tensor | None = memory_mask) -> torch.Tensor:
                return attention(h, memory, memory, mask=mask)[0]  # (batch, T, d_model)

            expected = residual_connection(x, attend, norm, nn.Identity())
            mistakes = {
                MEMORY_MASK_HINT: residual_connection(x, lambda h: attend(h, None), norm, nn.Identity()),
                Hint(RESIDUAL_IDEA, id="residual-missing"): norm(attend(x)),
                Hint(PRE_LN_IDEA, id="pre-ln-instead"):
                    residual_connection(x, attend, norm, nn.Identity(), norm_first=True),
                Hint(AFTER_NORM_IDEA, id="residual-after-norm"): x + norm(attend(x)),
            }
            got = _call_or_explain_shapes(ex, student_fn, x, memory, attention, norm, memory_mask)
        if got is not None:
            ex.compare("cross-attention sub-layer, T=4 target and S=6 source positions (two padded)", got,
                       expected, hint=Hint(idea="attend from the decoder stream x to the memory with the source "
                                                "padding mask, add x back, then normalise (post-LN)",
                                           code="norm(x + attention(x, memory, memory, mask=memory_mask)[0])"),
                       mistakes=mistakes)
    return ex.result


def _where_it_differs(learner: nn.Module, reference: nn.Module, *inputs: object, what: str) -> str:
    """Where ``learner`` first parts from ``reference`` (same sub-module names, the same weights, eval mode, dropout
    0), both run on ``inputs``: the first sub-module whose output differs, where the difference arises and the mistake
    ``compare_models`` names there; '' when nothing differs or the comparison cannot run (its attention re-runs do not
    take a padding mask). Dropouts are left out: with P_drop = 0 they change nothing, and a learner may skip them."""
    try:
        mapping = {name: name for name in same_name_mapping(learner, reference)
                   if not isinstance(reference.get_submodule(name), nn.Dropout)}
        with warnings.catch_warnings():  # its attention re-runs warn on a padding mask before they raise
            warnings.simplefilter("ignore", UserWarning)
            comparison = compare_models(learner, reference, *inputs, mapping=mapping)
    except (RuntimeError, ValueError):
        return ""
    first = comparison.first
    if first is None:
        return ""
    if first.status == "not run":  # the library's forward calls every mapped sub-module
        return f"{what}: your forward never calls {first.learner}, which the library's calls"
    if not first.learner:
        return f"{what}: every sub-module's output agrees, and only the final output differs"
    inside = f"inside {comparison.culprit}" if comparison.culprit else "in your forward's own code"
    arises = "" if comparison.inside else f" (the difference arises {inside})"
    likely = "".join(f"; likely {d.mistake}: {MISTAKES[d.mistake]}" for d in comparison.diagnoses)
    return f"{what}: the first sub-module whose output differs is {first.learner}{arises}{likely}"


def _with_where(hint: str | Hint, where: str) -> str | Hint:
    """``hint`` with the sentence ``where`` appended to its idea (its code and id kept); ``hint`` if ``where`` is ''."""
    if not where:
        return hint
    return replace(hint, idea=f"{hint.idea}. {where}") if isinstance(hint, Hint) else f"{hint}. {where}"


def _as_forward(student_fn: Callable[..., torch.Tensor], layer: DecoderLayer) -> DecoderLayer:
    """A copy of ``layer`` whose forward is ``student_fn(copy, x, memory, tgt_mask, memory_mask)``: the learner's
    function calls the copy's sub-modules, which ``compare_models`` records."""
    written = copy.deepcopy(layer)
    written.forward = lambda *inputs: student_fn(written, *inputs)
    return written


def decoder_layer(student_fn: Callable[..., torch.Tensor]) -> CheckResult:
    """Check ``decoder_layer(layer, x, memory, tgt_mask, memory_mask)`` against ``DecoderLayer.forward`` (post-LN)."""
    ex = Exercise("decoder_layer")
    with ex.run():
        x, memory, tgt_mask, memory_mask = _decoder_inputs()
        layer = _decoder_layer()
        pre_ln = _decoder_layer(norm_first=True)
        pre_ln.load_state_dict(layer.state_dict())
        with torch.no_grad():
            expected = layer(x, memory, tgt_mask, memory_mask)
            mistakes = {
                Hint(idea="the decoder's self-attention must be causal: position i may see only 0 … i, and "
                          "tgt_mask says so", code="layer.self_attn(x, x, x, mask=tgt_mask)[0]",
                     id="self-attention-not-causal"):
                    layer(x, memory, None, memory_mask),
                Hint(idea=MEMORY_MASK_HINT.idea, code="layer.multihead_attn(x, memory, memory, mask=memory_mask)[0]",
                     id="memory-mask-missing"):
                    layer(x, memory, tgt_mask, None),
                Hint(PRE_LN_IDEA, id="pre-ln-instead"): pre_ln(x, memory, tgt_mask, memory_mask),
                Hint(AFTER_NORM_IDEA, id="residual-after-norm"):
                    _residual_after_norm(layer, x, memory, tgt_mask, memory_mask),
            }
            got = _call_or_explain_shapes(ex, student_fn, layer, x, memory, tgt_mask, memory_mask)
        if got is not None:
            hint = ("three sub-layers in order: masked self-attention with norm1, cross-attention with norm2, the "
                    "feed-forward network (linear1, ReLU, linear2) with norm3")
            if describe_mismatch(got, expected) is not None:  # every hint says where the layer parts from the library's
                where = _where_it_differs(_as_forward(student_fn, layer), layer, x, memory, tgt_mask, memory_mask,
                                         what="Your function run as a DecoderLayer's forward beside the library's")
                hint, mistakes = _with_where(hint, where), {_with_where(h, where): v for h, v in mistakes.items()}
            ex.compare("a decoder layer, batch 2, T=4 target and S=6 source positions (two padded)", got, expected,
                       hint=hint, mistakes=mistakes)
    return ex.result


def _residual_after_norm(layer: DecoderLayer, x: torch.Tensor, memory: torch.Tensor, tgt_mask: torch.Tensor,
                         memory_mask: torch.Tensor) -> torch.Tensor:
    """The mistake x + norm(sublayer(x)) at each of the three sub-layers."""
    x = x + layer.norm1(layer.self_attn(x, x, x, mask=tgt_mask)[0])
    x = x + layer.norm2(layer.multihead_attn(x, memory, memory, mask=memory_mask)[0])
    return x + layer.norm3(position_wise_feed_forward(x, layer.linear1, layer.linear2, layer.dropout))


def _measured_influence() -> tuple[torch.Tensor, torch.Tensor]:
    """Which outputs of a post-LN decoder layer change when one input position changes (causal mask; source of 6
    positions whose last 2 are padding): (target (5, 5), source (5, 6)), [i, j] True when output i changes."""
    generator = torch.Generator().manual_seed(5)
    x = torch.randn(1, 5, D_MODEL, generator=generator, dtype=torch.float64)  # one sentence, T=5
    memory = torch.randn(1, 6, D_MODEL, generator=generator, dtype=torch.float64)  # S=6
    memory_mask = padding_mask(torch.tensor([[4, 5, 6, 7, 0, 0]]), pad_id=0)  # (1, 1, 1, 6)
    layer = _decoder_layer()

    def output(x: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return layer(x, memory, causal_mask(5), memory_mask)[0]  # (5, d_model)

    base = output(x, memory)

    def changed_rows(other: torch.Tensor) -> torch.Tensor:
        return (other - base).abs().amax(dim=-1) > 1e-9  # (5,)

    target = torch.stack([changed_rows(output(_perturb(x, j), memory)) for j in range(5)], dim=1)  # (5, 5)
    source = torch.stack([changed_rows(output(x, _perturb(memory, s))) for s in range(6)], dim=1)  # (5, 6)
    return target, source


def _perturb(h: torch.Tensor, position: int) -> torch.Tensor:
    h = h.clone()
    h[:, position] += 1.0
    return h


def predict_influence(student_fn: Callable[[], tuple[torch.Tensor, torch.Tensor]]) -> CheckResult:
    """Check the learner's prediction of which decoder outputs each target and source position can change."""
    ex = Exercise("predict_influence")
    with ex.run():
        prediction = ex.call(student_fn)
        if not ex.require("you returned two tensors (target, source)",
                          isinstance(prediction, tuple | list) and len(prediction) == 2,
                          problem=f"got {type(prediction).__name__}", hint="return target, source"):
            return ex.result
        target, source = prediction
        expected_target, expected_source = _measured_influence()
        ones = torch.ones(5, 5, dtype=torch.bool)
        ex.compare("target positions: output i can change when input j changes (5 × 5)", target, expected_target,
                   hint="rows are outputs i, columns inputs j; the causal mask lets i see j ≤ i",
                   mistakes={Hint("that is the future (above the diagonal): with outputs as rows, output i "
                                  "depends on inputs j ≤ i, the lower triangle", id="future-above-diagonal"):
                             ones.triu(),
                             Hint("the decoder's self-attention is causal: output i cannot see later inputs",
                                  id="not-causal"): ones,
                             Hint("output i also depends on itself (the diagonal): its own input reaches it through "
                                  "the residual and through attention", id="diagonal-missing"): ones.tril(-1),
                             Hint("attention mixes positions: output i depends on every earlier input too, not only "
                                  "on its own", id="own-position-only"): torch.eye(5, dtype=torch.bool)})
        all_source = torch.ones(5, 6, dtype=torch.bool)
        ex.compare("source positions: output i can change when memory position s changes (5 × 6)", source,
                   expected_source, hint="cross-attention has no causal mask, but the padding mask hides <pad>",
                   mistakes={Hint("padded source positions are masked in cross-attention: they change nothing",
                                  id="padding-visible"): all_source,
                             Hint("cross-attention has no causal mask: every target position sees every real "
                                  "source token", id="cross-attention-made-causal"):
                             torch.ones(5, 6, dtype=torch.bool).tril() & expected_source})
    return ex.result
