"""Checks for lesson 15's exercises: the response mask of supervised fine-tuning, a LoRA layer, and merging LoRA's
update into the weight."""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch
from torch import nn

from ..lora import LoRALinear
from ..sft import IGNORE_INDEX, sft_batch
from ._feedback import CheckResult, Exercise, Hint

PAD = 0  # the padding id the mask check passes


def _pairs() -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Three (prompt, response) id pairs of different lengths, so two rows need padding."""
    return [(torch.tensor([5, 6, 7, 8]), torch.tensor([9, 10, 3])),
            (torch.tensor([5, 6, 7]), torch.tensor([11, 3])),
            (torch.tensor([5, 6, 7, 8, 12]), torch.tensor([13, 14, 15, 3]))]


def _labels_with(pairs: list[tuple[torch.Tensor, torch.Tensor]], masked: Callable[[int], int]) -> torch.Tensor:
    """The labels with the first ``masked(T_p)`` positions of each row ignored (T_p = that row's prompt length)."""
    _, labels = sft_batch(pairs, PAD, prompt_in_loss=True)
    for row, (prompt, _) in enumerate(pairs):
        labels[row, : masked(len(prompt))] = IGNORE_INDEX
    return labels


def response_mask(student_fn: Callable) -> CheckResult:
    """Check a function (pairs, pad_id) -> (inputs (batch, T), labels (batch, T)) for SFT on the responses only."""
    ex = Exercise("response_mask")
    with ex.run():
        pairs = _pairs()
        got = ex.call(student_fn, [(p.clone(), r.clone()) for p, r in pairs], PAD)
        if not ex.require("returns two tensors (inputs, labels)", isinstance(got, tuple | list) and len(got) == 2,
                          hint="return inputs, labels"):
            return ex.result
        inputs, labels = got
        expected_inputs, expected_labels = sft_batch(pairs, PAD)
        ex.compare(
            "the inputs: prompt + response without its last token, padded on the right", inputs, expected_inputs,
            hint=Hint(idea="the model reads every token but the last (nothing comes after it); pad shorter rows "
                           "with pad_id after their tokens", code="inputs[row, :n] = sequence[:-1]"),
        )
        padding_counted = expected_labels.clone()  # the prompt masked, but the padding labelled with pad_id
        for row, (prompt, response) in enumerate(pairs):
            padding_counted[row, len(prompt) + len(response) - 1 :] = PAD
        ex.compare(
            "the labels: the next token where it is a response token, IGNORE_INDEX (-100) elsewhere", labels,
            expected_labels,
            hint=Hint(idea="label position t with token t + 1; a label is kept only where token t + 1 belongs to the "
                           "response, so the prompt's last position (T_p - 1) keeps its label, the first response "
                           "token", code="labels[row, : len(prompt) - 1] = -100"),
            mistakes={
                Hint(idea="the prompt is in the loss: its labels must be -100 too, so the model is trained on the "
                          "answers only", id="prompt-in-loss"): sft_batch(pairs, PAD, prompt_in_loss=True)[1],
                Hint(idea="off by one at the boundary: you masked the label at position T_p - 1 as well, which is the "
                          "FIRST response token; mask only the positions before it",
                     code="labels[row, : len(prompt) - 1] = -100", id="first-answer-token-masked"): (
                    _labels_with(pairs, lambda p: p)),
                Hint(idea="off by one at the boundary: the label at position T_p - 2 is still a prompt token (the "
                          "answer-start character); mask T_p - 1 positions",
                     code="labels[row, : len(prompt) - 1] = -100", id="last-prompt-token-counted"): (
                    _labels_with(pairs, lambda p: p - 2)),
                Hint(idea="padding is in the loss: label padded positions -100, not pad_id, or the model learns to "
                          "predict padding", id="padding-counted"): padding_counted,
                Hint(idea="the labels are the inputs shifted by one: position t predicts token t + 1",
                     id="labels-not-shifted"): torch.where(expected_labels == IGNORE_INDEX, IGNORE_INDEX,
                                                           expected_inputs),
            },
        )
    return ex.result


COUNT_CASES = ((6, 6, 2), (64, 256, 2), (256, 64, 4), (4096, 4096, 8))  # (in, out, rank)


def lora_parameter_count(student_fn: Callable) -> CheckResult:
    """Check a function (in_features, out_features, rank) -> the number of numbers LoRA trains on such a layer."""
    ex = Exercise("lora_parameter_count")
    with ex.run():
        got = [ex.call(student_fn, n_in, n_out, r) for n_in, n_out, r in COUNT_CASES]
        expected = [sum(p.numel() for p in LoRALinear(nn.Linear(n_in, n_out, device="meta"), r, 1.0).parameters()
                        if p.requires_grad) for n_in, n_out, r in COUNT_CASES]
        ex.compare(
            f"the trainable count for (in, out, rank) = {', '.join(map(str, COUNT_CASES))}",
            torch.tensor([int(g) for g in got]), torch.tensor(expected),
            hint=Hint(idea="only A (rank, in) and B (out, rank) train; count their numbers"),
            mistakes={
                Hint(idea="the base's weight and bias are frozen: they are not part of LoRA's count",
                     id="count-includes-base"): torch.tensor([i * o + o + r * (i + o) for i, o, r in COUNT_CASES]),
                Hint(idea="there are two matrices: A (rank, in) and B (out, rank)", id="count-one-matrix"): (
                    torch.tensor([r * i for i, o, r in COUNT_CASES])),
                Hint(idea="B A has the shape of W, but LoRA stores A and B, not their product",
                     id="count-product"): torch.tensor([i * o for i, o, r in COUNT_CASES]),
                Hint(idea="A and B have no bias of their own: they are plain matrices", id="count-with-bias"): (
                    torch.tensor([r * (i + o) + r + o for i, o, r in COUNT_CASES])),
            },
        )
    return ex.result


def _square_layer() -> nn.Linear:
    """A 6 -> 6 layer drawn from a fixed seed: square, so that an update applied transposed still fits its shape."""
    torch.manual_seed(15)
    return nn.Linear(6, 6).double()


def _inputs() -> torch.Tensor:
    return torch.randn(4, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(1))  # (batch, in)


def _set_adapters(layer: nn.Module, a: torch.Tensor, b: torch.Tensor) -> None:
    with torch.no_grad():
        layer.lora_A.copy_(a)
        layer.lora_B.copy_(b)


RANK, ALPHA = 2, 8.0  # scale alpha / rank = 4: a missing (1) or inverted (0.25) scale shows


def lora_layer(student_cls: Callable) -> CheckResult:
    """Check a class (base nn.Linear, rank, alpha) -> module with ``lora_A`` (r, in), ``lora_B`` (out, r), the base
    frozen, computing the base's output plus (alpha / rank) · x Aᵀ Bᵀ."""
    ex = Exercise("lora_layer")
    with ex.run():
        base = _square_layer()
        original = copy.deepcopy(base)
        x = _inputs()
        layer = ex.call(student_cls, base, RANK, ALPHA)
        shapes_ok = ex.require(
            "lora_A has shape (rank, in) and lora_B (out, rank), both nn.Parameter",
            isinstance(getattr(layer, "lora_A", None), nn.Parameter)
            and isinstance(getattr(layer, "lora_B", None), nn.Parameter)
            and layer.lora_A.shape == (RANK, 6) and layer.lora_B.shape == (6, RANK),
            problem=f"got lora_A {tuple(getattr(getattr(layer, 'lora_A', None), 'shape', ()))}, lora_B "
                    f"{tuple(getattr(getattr(layer, 'lora_B', None), 'shape', ()))}",
            hint="self.lora_A = nn.Parameter(...) of shape (rank, base.in_features), lora_B (base.out_features, rank)")
        if not shapes_ok:
            return ex.result
        others = [name for name, p in layer.named_parameters() if p.requires_grad and name not in ("lora_A", "lora_B")]
        ex.require("the layer's parameters other than lora_A and lora_B (the base's weight and bias) are frozen",
                   not others, problem=f"these still train: {', '.join(others)}",
                   hint=Hint(idea="the base weights must not train: only A and B do (and the optimiser then holds "
                                  "state for them alone)", code="base.requires_grad_(False)", id="base-trainable"))
        ex.require("lora_A and lora_B train", layer.lora_A.requires_grad and layer.lora_B.requires_grad,
                   hint="nn.Parameter requires a gradient by default: do not freeze A or B")
        ex.require("lora_B starts at zero", not bool(layer.lora_B.detach().any()),
                   hint=Hint(idea="B starts at zero, so B A = 0 and the model is unchanged until it trains (A starts "
                                  "random)", code="nn.init.zeros_(self.lora_B)", id="b-random"))
        ex.require("lora_A starts random (not zero), so B receives a gradient at the first step",
                   bool(layer.lora_A.detach().any()),
                   hint=Hint(idea="with A and B both zero every gradient of A and B is zero and LoRA never trains: "
                                  "draw A at random, keep B at zero", id="a-zero"))
        ex.compare("at the start the layer computes what the base layer computes", layer(x), original(x),
                   hint="return the base layer's output plus the low-rank path")
        generator = torch.Generator().manual_seed(2)
        a = torch.randn(RANK, 6, dtype=torch.float64, generator=generator)  # (r, in)
        b = torch.randn(6, RANK, dtype=torch.float64, generator=generator)  # (out, r)
        _set_adapters(layer, a, b)
        reference = LoRALinear(copy.deepcopy(original), RANK, ALPHA)
        _set_adapters(reference, a, b)
        base_out = original(x)  # (batch, out)
        update = x @ a.T @ b.T  # (batch, out): the unscaled low-rank path
        ex.compare(
            "with A and B set, the output is base(x) + (alpha / rank) · x Aᵀ Bᵀ", layer(x), reference(x),
            hint=Hint(idea="down to rank r with A, up with B, scaled by alpha / rank",
                      code="self.base(x) + self.scale * (x @ self.lora_A.T) @ self.lora_B.T"),
            mistakes={
                Hint(idea="the scale alpha / rank is missing: it keeps the update's size steady when you change the "
                          "rank", id="scale-missing"): base_out + update,
                Hint(idea="the scale is alpha / rank, not rank / alpha", id="scale-inverted"): (
                    base_out + RANK / ALPHA * update),
                Hint(idea="the update B A is applied transposed: x (B A)ᵀ = x Aᵀ Bᵀ; A comes first (it maps in -> "
                          "rank)", code="(x @ self.lora_A.T) @ self.lora_B.T", id="transposed-update"): (
                    base_out + ALPHA / RANK * x @ (b @ a)),
            },
        )
    return ex.result


def _trained_lora_layer(bias: bool = True) -> LoRALinear:
    """A LoRA layer on ``_square_layer`` (with its bias, or none) whose B is no longer zero, as after training."""
    base = _square_layer()
    if not bias:
        base.bias = None
    layer = LoRALinear(base, RANK, ALPHA)
    generator = torch.Generator().manual_seed(3)
    _set_adapters(layer, torch.randn(RANK, 6, dtype=torch.float64, generator=generator),
                  torch.randn(6, RANK, dtype=torch.float64, generator=generator))
    return layer


def merge_lora_layer(student_fn: Callable) -> CheckResult:
    """Check a function (LoRALinear) -> a new nn.Linear with weight W + (alpha / rank) · B A, the layer unchanged."""
    ex = Exercise("merge_lora_layer")
    with ex.run():
        layer = _trained_lora_layer()
        before = copy.deepcopy(layer)
        x = _inputs()
        merged = ex.call(student_fn, layer)
        if not ex.require("returns an nn.Linear", isinstance(merged, nn.Linear),
                          problem=f"got {type(merged).__name__}", hint="build a new nn.Linear and copy the weights in"):
            return ex.result
        w, bias = before.base.weight.detach(), before.base.bias.detach()
        ba = (before.lora_B @ before.lora_A).detach()  # (out, in)
        ex.compare(
            "the merged weight is W + (alpha / rank) · B A", merged.weight.detach(), before.merged().weight.detach(),
            hint=Hint(idea="B (out, r) times A (r, in) is an (out, in) matrix like W; scale it by alpha / rank",
                      code="base.weight + layer.scale * layer.lora_B @ layer.lora_A"),
            mistakes={
                Hint(idea="the scale alpha / rank is missing from the merged update", id="merge-scale-missing"): (
                    w + ba),
                Hint(idea="the update is B A (out, in), the same layout as W; (B A)ᵀ is transposed",
                     id="merge-transposed"): w + before.scale * ba.T,
                Hint(idea="adding the update once is enough: the base weight already holds W", id="merged-twice"): (
                    w + 2 * before.scale * ba),
            },
        )
        merged_bias = merged.bias.detach() if merged.bias is not None else torch.zeros_like(bias)
        ex.compare("the merged layer keeps the base's bias", merged_bias, bias,
                   mistakes={Hint(idea="copy the base layer's bias into the merged layer: merging changes only the "
                                       "weight", id="bias-dropped"): torch.zeros_like(bias)})
        ex.compare("the merged layer's output equals the LoRA layer's (float64 tolerance)", merged(x).detach(),
                   before(x).detach(), atol=1e-10, rtol=1e-10)
        ex.require(
            "the LoRA layer you merged is unchanged (its base weight still W)",
            torch.equal(layer.base.weight, before.base.weight),
            hint=Hint(idea="you added the update into the base layer's own weight in place: the LoRA layer now adds "
                           "it twice. Build the merged weight as a new tensor", code="weight = W + update  # not W += "
                           "update", id="merged-in-place"),
        )
        no_bias = _trained_lora_layer(bias=False)
        merged = ex.call(student_fn, no_bias, description="merge(a LoRA layer whose base has bias=None)")
        ex.require("a base without bias gives a merged layer without bias, computing the same",
                   isinstance(merged, nn.Linear) and merged.bias is None
                   and torch.allclose(merged(x), no_bias(x), atol=1e-10, rtol=1e-10),
                   hint=Hint(idea="nn.Linear(..., bias=False) when the base has none (base.bias is None); copy the "
                                  "bias only when there is one", code="bias=layer.base.bias is not None",
                             id="bias-none-added"))
    return ex.result
