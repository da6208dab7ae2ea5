"""Checks for lesson 15's exercises: the response mask of supervised fine-tuning, a LoRA layer, and merging LoRA's
update into the weight."""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable
from functools import cache

import torch
from torch import nn

from ..data import CharTokenizer, python_docs
from ..lora import LoRALinear
from ..sft import END, IGNORE_INDEX, Instruction, encode_instruction, sft_batch
from ._feedback import CheckResult, Exercise, Hint


@cache
def _tokenizer() -> CharTokenizer:
    """Lesson 11's character tokenizer, the one lesson 15 fine-tunes with."""
    return CharTokenizer(python_docs())


def _batches() -> list[tuple[str, list[tuple[torch.Tensor, torch.Tensor]]]]:
    """(description, pairs) of (prompt ids, response ids), padded with the lesson's pad id: the end marker ``~``.

    The first batch is the lesson's: prompts of three lengths, the longest in the middle. The second holds one pair
    (no padding); the third responses of different lengths, a one-token prompt and a response that is only the end
    marker, its prompts stored with a stride (non-contiguous)."""
    tokenizer = _tokenizer()
    lesson = [encode_instruction(tokenizer, i) for i in (Instruction("first", "abc"), Instruction("count", "abcdef"),
                                                         Instruction("last", "qwer"))]
    single = [encode_instruction(tokenizer, Instruction("last", "python"))]
    strided = [(torch.stack((tokenizer.encode(p), tokenizer.encode(p)), dim=1)[:, 0], tokenizer.encode(r))
               for p, r in (("{say}", "hello~"), ("{", "~"), ("{first xyz}", "x~"))]
    return [("the lesson's batch: 3 prompts of different lengths", lesson), ("one pair alone, no padding", single),
            ("responses of 6, 1 and 2 tokens, strided prompts", strided)]


def _labels_with(pairs: list[tuple[torch.Tensor, torch.Tensor]], pad_id: int,
                 masked: Callable[[int], int]) -> torch.Tensor:
    """The labels with the first ``masked(T_p)`` positions of each row ignored (T_p = that row's prompt length)."""
    _, labels = sft_batch(pairs, pad_id, prompt_in_loss=True)
    for row, (prompt, _) in enumerate(pairs):
        labels[row, : max(0, masked(len(prompt)))] = IGNORE_INDEX
    return labels


def _label_mistakes(pairs: list[tuple[torch.Tensor, torch.Tensor]], pad_id: int) -> dict[Hint, torch.Tensor]:
    """Each typical wrong answer's labels for ``pairs``."""
    expected_inputs, expected_labels = sft_batch(pairs, pad_id)
    padding_counted = expected_labels.clone()  # the prompt masked, but the padding labelled with pad_id
    for row, (prompt, response) in enumerate(pairs):
        padding_counted[row, len(prompt) + len(response) - 1 :] = pad_id
    return {
        Hint(idea="the prompt is in the loss: its labels must be -100 too, so the model is trained on the answers "
                  "only", id="prompt-in-loss"): sft_batch(pairs, pad_id, prompt_in_loss=True)[1],
        Hint(idea="off by one at the boundary: you masked the label at position T_p - 1 as well, which is the FIRST "
                  "response token; mask only the positions before it",
             code="labels[row, : len(prompt) - 1] = -100", id="first-answer-token-masked"): (
            _labels_with(pairs, pad_id, lambda p: p)),
        Hint(idea="off by one at the boundary: the label at position T_p - 2 is still a prompt token (the "
                  "answer-start character); mask T_p - 1 positions",
             code="labels[row, : len(prompt) - 1] = -100", id="last-prompt-token-counted"): (
            _labels_with(pairs, pad_id, lambda p: p - 2)),
        Hint(idea="padding is in the loss: label padded positions -100, not pad_id, or the model learns to predict "
                  "padding", id="padding-counted"): padding_counted,
        Hint(idea="every answer's last label, the end marker ~ that teaches the model to stop, is -100. Here, as in "
                  "the lesson, the pad id is also the end marker, so padding found by its value (labels equal to "
                  "pad_id) masks it too; so does a row whose labels stop one token early. Find the padding by "
                  "position: it starts where the row's own tokens end",
             id="padding-masked-by-value"): torch.where(expected_labels == pad_id, IGNORE_INDEX, expected_labels),
        Hint(idea="the labels are the inputs shifted by one: position t predicts token t + 1",
             id="labels-not-shifted"): torch.where(expected_labels == IGNORE_INDEX, IGNORE_INDEX, expected_inputs),
    }


def _input_mistakes(pairs: list[tuple[torch.Tensor, torch.Tensor]], pad_id: int) -> dict[Hint, torch.Tensor]:
    """Each typical wrong answer's inputs for ``pairs``."""
    sequences = [torch.cat((prompt, response))[:-1] for prompt, response in pairs]  # (T_p + T_r - 1,) each
    length = max(len(s) for s in sequences)
    left = torch.stack([torch.cat((torch.full((length - len(s),), pad_id), s)) for s in sequences])  # (batch, T)
    zero = torch.stack([torch.cat((s, torch.zeros(length - len(s), dtype=torch.long))) for s in sequences])
    return {
        Hint(idea="the padding goes on the right, after each row's tokens: a causal model then never sees it from a "
                  "real position, and position t of every row is the row's token t", id="padded-on-the-left"): left,
        Hint(idea="pad with pad_id, the id the function is given, not with 0 (id 0 is a real character here)",
             id="padded-with-zero"): zero,
    }


def response_mask(student_fn: Callable) -> CheckResult:
    """Check a function (pairs, pad_id) -> (inputs (batch, T), labels (batch, T)) for SFT on the responses only, on
    three batches padded with the lesson's pad id (the end marker ``~``). The first batch that fails gives the hints;
    its labels are compared only when its inputs are right (left padding would fail both, one mistake)."""
    ex = Exercise("response_mask")
    with ex.run():
        pad_id = _tokenizer().ids[END]
        for number, (description, pairs) in enumerate(_batches()):
            got = ex.call(student_fn, [(p.clone(), r.clone()) for p, r in pairs], pad_id,
                          description=f"response_mask({description}, pad_id={pad_id})")
            two = isinstance(got, tuple | list) and len(got) == 2
            if (number == 0 or not two) and not ex.require("returns two tensors (inputs, labels)", two,
                                                           hint="return inputs, labels"):
                return ex.result
            inputs, labels = got
            expected_inputs, expected_labels = sft_batch(pairs, pad_id)
            inputs_ok = ex.compare(
                f"{description}: the inputs, prompt + response without its last token, padded on the right", inputs,
                expected_inputs,
                hint=Hint(idea="the model reads every token but the last (nothing comes after it); pad shorter rows "
                               "with pad_id after their tokens", code="inputs[row, :n] = sequence[:-1]"),
                mistakes=_input_mistakes(pairs, pad_id),
            )
            if not inputs_ok:
                break
            labels_ok = ex.compare(
                f"{description}: the labels, the next token where it is a response token, IGNORE_INDEX (-100) "
                "elsewhere", labels, expected_labels,
                hint=Hint(idea="label position t with token t + 1; a label is kept only where token t + 1 belongs to "
                               "the response, so the prompt's last position (T_p - 1) keeps its label, the first "
                               "response token", code="labels[row, : len(prompt) - 1] = -100"),
                mistakes=_label_mistakes(pairs, pad_id),
            )
            if not labels_ok:
                break  # one batch's hints are enough
            if number == 0 and not ex.require(
                    "inputs and labels are long tensors (token ids)",
                    isinstance(inputs, torch.Tensor) and isinstance(labels, torch.Tensor)
                    and inputs.dtype == labels.dtype == torch.long,
                    problem=f"got {getattr(inputs, 'dtype', type(inputs).__name__)} inputs and "
                            f"{getattr(labels, 'dtype', type(labels).__name__)} labels",
                    hint=Hint(idea="return long torch tensors: nn.Embedding and F.cross_entropy's targets need "
                                   "token ids as integers (torch.ones, torch.zeros and a fill of -100.0 make float "
                                   "tensors)", code="torch.full((batch, T), -100, dtype=torch.long)",
                              id="ids-not-long")):
                break
    return ex.result


COUNT_CASES = ((6, 6, 2), (64, 256, 2), (256, 64, 4), (3, 1000, 1), (4096, 4096, 8))  # (in, out, rank)


def lora_parameter_count(student_fn: Callable) -> CheckResult:
    """Check a function (in_features, out_features, rank) -> the number of numbers LoRA trains on such a layer."""
    ex = Exercise("lora_parameter_count")
    with ex.run():
        got = [ex.call(student_fn, n_in, n_out, r) for n_in, n_out, r in COUNT_CASES]
        whole = all(float(g).is_integer() for g in got)  # int() would floor an answer of 24.4 to 24
        numbers = torch.tensor([int(g) for g in got]) if whole else torch.tensor([float(g) for g in got])
        expected = [sum(p.numel() for p in LoRALinear(nn.Linear(n_in, n_out, device="meta"), r, 1.0).parameters()
                        if p.requires_grad) for n_in, n_out, r in COUNT_CASES]
        ex.compare(
            f"the trainable count for (in, out, rank) = {', '.join(map(str, COUNT_CASES))}",
            numbers, torch.tensor(expected), atol=0.0, rtol=0.0,  # counts are exact
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


def _layer(n_in: int = 6, n_out: int = 6) -> nn.Linear:
    """An ``n_in`` -> ``n_out`` float64 layer drawn from a fixed seed (square by default, so that an update applied
    transposed still fits its shape)."""
    torch.manual_seed(15)
    return nn.Linear(n_in, n_out).double()


def _inputs(*shape: int, seed: int = 1) -> torch.Tensor:
    return torch.randn(*shape, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))


def _set_adapters(layer: nn.Module, a: torch.Tensor, b: torch.Tensor) -> None:
    with torch.no_grad():
        layer.lora_A.copy_(a)
        layer.lora_B.copy_(b)


# (in, out, rank, alpha) of the layers the LoRA check builds: a square one, whose scale alpha / rank = 4 shows a
# missing (1) or inverted (0.25) scale and where an update applied transposed still fits; then a rectangular one
# with another rank and a scale that is not a whole number (7 / 3, which alpha // rank floors to 2), fed
# (batch, T, in) inputs that are not contiguous.
LORA_CASES = ((6, 6, 2, 8.0), (5, 7, 3, 7.0))


def _case_inputs(n_in: int, square: bool) -> torch.Tensor:
    """(4, in) for the square layer; (2, 3, in) with a non-contiguous layout for the other."""
    return _inputs(4, n_in) if square else _inputs(3, 2, n_in, seed=4).transpose(0, 1)


def _no_gradient_hint(a: torch.Tensor, b: torch.Tensor) -> Hint:
    if not a.any() and not b.any():
        return Hint(idea="A and B both start at zero: then every gradient of A and of B is zero (each one's gradient "
                         "is a product with the other) and LoRA never trains. Start one of them random, the other at "
                         "zero", id="both-zero")
    return Hint(idea="no gradient reaches lora_A or lora_B: the low-rank path must be computed from the parameters "
                     "themselves in forward (no .data, .detach() or torch.no_grad() there)", id="no-gradient")


def _paired_directions(a: torch.Tensor, b: torch.Tensor) -> tuple[int, int] | None:
    """Two of the rank's directions k, l that start equal (row k of A = row l, column k of B = column l), or None.
    Such a pair gets equal gradients at every step and stays equal, so B A never reaches rank r."""
    for k, m in itertools.combinations(range(a.shape[0]), 2):
        if torch.equal(a[k], a[m]) and torch.equal(b[:, k], b[:, m]):
            return k, m
    return None


def _equal_directions_hint(a: torch.Tensor) -> Hint:
    random_one, its = ("A", "rows") if a.any() else ("B", "columns")
    return Hint(idea=f"two of {random_one}'s {its} start equal (as with {random_one} filled with one value): those "
                     f"two get equal gradients at every step and stay equal, so B A never reaches rank r (a constant "
                     f"fill keeps it at rank 1 for good). Draw {random_one} at random so that its {its} differ",
                id="equal-directions")


def lora_layer(student_cls: Callable) -> CheckResult:
    """Check a class (base nn.Linear, rank, alpha) -> module with ``lora_A`` (r, in), ``lora_B`` (out, r), the base
    frozen, computing the base's output plus (alpha / rank) · x Aᵀ Bᵀ, on two layers (``LORA_CASES``).

    Any start is right whose B A is zero (the layer starts as the base) and from which LoRA trains: a gradient
    reaches A or B, and no two of the rank's directions start equal. Hu et al. start A random and B at zero; A at
    zero with B random passes too."""
    ex = Exercise("lora_layer")
    with ex.run():
        cases = []
        for number, (n_in, n_out, rank, alpha) in enumerate(LORA_CASES):
            base = _layer(n_in, n_out)
            original = copy.deepcopy(base)
            layer = ex.call(student_cls, base, rank, alpha,
                            description=f"LoRA(nn.Linear({n_in}, {n_out}), rank={rank}, alpha={alpha:g})")
            cases.append((layer, original, rank, alpha, _case_inputs(n_in, number == 0)))
        wrong_shapes = [
            f"for nn.Linear({original.in_features}, {original.out_features}) with rank {rank}, expected lora_A "
            f"{(rank, original.in_features)} and lora_B {(original.out_features, rank)}, got lora_A "
            f"{tuple(getattr(getattr(layer, 'lora_A', None), 'shape', ()))}, lora_B "
            f"{tuple(getattr(getattr(layer, 'lora_B', None), 'shape', ()))}"
            for layer, original, rank, _, _ in cases
            if not (isinstance(getattr(layer, "lora_A", None), nn.Parameter)
                    and isinstance(getattr(layer, "lora_B", None), nn.Parameter)
                    and layer.lora_A.shape == (rank, original.in_features)
                    and layer.lora_B.shape == (original.out_features, rank))]
        if not ex.require(
                "lora_A has shape (rank, in) and lora_B (out, rank), both nn.Parameter", not wrong_shapes,
                problem=wrong_shapes[0] if wrong_shapes else "",
                hint="self.lora_A = nn.Parameter(...) of shape (rank, base.in_features), lora_B (base.out_features, "
                     "rank)"):
            return ex.result
        wrong_dtypes = sorted({f"lora_A {layer.lora_A.dtype}, lora_B {layer.lora_B.dtype}" for layer, *_ in cases
                               if not layer.lora_A.dtype == layer.lora_B.dtype == torch.float64})
        if not ex.require(
                "lora_A and lora_B have the base weight's dtype (float64 here)", not wrong_dtypes,
                problem=f"got {wrong_dtypes[0]}" if wrong_dtypes else "",
                hint=Hint(idea="torch.randn and torch.zeros make float32 tensors unless told otherwise: create A and B "
                               "with the base weight's dtype, or x @ A.T fails on a float64 layer",
                          code="dtype=base.weight.dtype", id="adapter-dtype")):
            return ex.result
        others = sorted({name for layer, *_ in cases for name, p in layer.named_parameters()
                         if p.requires_grad and name not in ("lora_A", "lora_B")})
        ex.require("the layer's parameters other than lora_A and lora_B (the base's weight and bias) are frozen",
                   not others, problem=f"these still train: {', '.join(others)}",
                   hint=Hint(idea="the base weights must not train: only A and B do (and the optimiser then holds "
                                  "state for them alone)", code="base.requires_grad_(False)", id="base-trainable"))
        trains = ex.require("lora_A and lora_B train",
                            all(layer.lora_A.requires_grad and layer.lora_B.requires_grad for layer, *_ in cases),
                            hint=Hint(idea="nn.Parameter requires a gradient by default: do not freeze A or B",
                                      id="adapter-frozen"))
        starts = [(layer.lora_A.detach().clone(), layer.lora_B.detach().clone()) for layer, *_ in cases]
        starts_zero = ex.require("B A is zero at the start, so the adapted layer starts as the base layer",
                                 all(not (b @ a).any() for a, b in starts),
                                 hint=Hint(idea="B A is not zero at the start: the adapted model no longer computes "
                                                "what the base model computed before any training. Start one of A "
                                                "and B at zero (Hu et al.: B) and the other random",
                                           code="nn.init.zeros_(self.lora_B)", id="update-nonzero-at-start"))
        # The square layer first: every named mistake below gives an output of the right shape there.
        (layer, original, rank, alpha, x), (wide, wide_original, wide_rank, wide_alpha, wide_x) = cases
        out = layer(x)  # (batch, out)
        if out.requires_grad:  # not, when forward detached A and B (the base being frozen)
            (out * _inputs(*out.shape, seed=5)).sum().backward()  # the output along a random direction
        reached = any(p.grad is not None and bool(p.grad.any()) for p in (layer.lora_A, layer.lora_B))
        layer.zero_grad(set_to_none=True)
        if trains:  # a frozen A or B was named above
            reached = ex.require("a gradient reaches lora_A or lora_B at the first step, so LoRA can train", reached,
                                 hint=None if reached else _no_gradient_hint(*starts[0]))
        paired = next(((a, pair) for a, b in starts  # both zero is named above
                       if (a.any() or b.any()) and (pair := _paired_directions(a, b))), None)
        ex.require("no two of the rank's directions start equal (rows of A with their columns of B), so B A can "
                   "reach rank r", paired is None,
                   problem=f"directions {paired[1][0]} and {paired[1][1]} start equal" if paired else "",
                   hint=_equal_directions_hint(paired[0]) if paired else None)
        if starts_zero:  # else named above, the same fact
            ex.compare("at the start the layer computes what the base layer computes", out, original(x),
                       hint="return the base layer's output plus the low-rank path")
        generator = torch.Generator().manual_seed(2)
        a = torch.randn(rank, 6, dtype=torch.float64, generator=generator)  # (r, in)
        b = torch.randn(6, rank, dtype=torch.float64, generator=generator)  # (out, r)
        _set_adapters(layer, a, b)
        reference = LoRALinear(copy.deepcopy(original), rank, alpha)
        _set_adapters(reference, a, b)
        base_out = original(x)  # (batch, out)
        update = x @ a.T @ b.T  # (batch, out): the unscaled low-rank path
        if not ex.compare(
                "with A and B set, the output is base(x) + (alpha / rank) · x Aᵀ Bᵀ", layer(x), reference(x),
                hint=Hint(idea="down to rank r with A, up with B, scaled by alpha / rank",
                          code="self.base(x) + self.scale * (x @ self.lora_A.T) @ self.lora_B.T"),
                mistakes={
                    Hint(idea="the scale alpha / rank is missing: it keeps the update's size steady when you change "
                              "the rank", id="scale-missing"): base_out + update,
                    Hint(idea="the scale is alpha / rank, not rank / alpha", id="scale-inverted"): (
                        base_out + rank / alpha * update),
                    Hint(idea="the update B A is applied transposed: x (B A)ᵀ = x Aᵀ Bᵀ; A comes first (it maps in "
                              "-> rank)", code="(x @ self.lora_A.T) @ self.lora_B.T", id="transposed-update"): (
                        base_out + alpha / rank * x @ (b @ a)),
                }):
            return ex.result
        if trains and reached:  # else named above
            # At the start only one of A and B gets a gradient (the other's is a product with a zero matrix), so a
            # forward that detaches the other passes the first step; with both non-zero, both must get one.
            (layer(x) * _inputs(*out.shape, seed=5)).sum().backward()
            detached = [name for name in ("lora_A", "lora_B")
                        if (grad := getattr(layer, name).grad) is None or not grad.any()]
            layer.zero_grad(set_to_none=True)
            ex.require("with A and B both non-zero, a gradient reaches both", not detached,
                       problem=f"none reaches {' or '.join(detached)}",
                       hint=Hint(idea=f"forward cuts {' and '.join(detached)} out of the graph (.detach(), .data "
                                      "or torch.no_grad()): no gradient reaches it, so it never trains. Use the "
                                      "parameters themselves in forward", id="adapter-detached"))
        # Then the rectangular layer, with another rank and scale and (batch, T, in) inputs that are not contiguous.
        where = (f"on nn.Linear(5, 7) with rank {wide_rank}, alpha {wide_alpha:g} and non-contiguous (batch, T, in) "
                 "inputs")
        wide_out, wide_expected = wide(wide_x), wide_original(wide_x)  # (batch, T, out)
        shape_hint = ("write forward for inputs of any leading shape (..., in), returning (..., out): matrix "
                      "products and .T work on them as they are, without a view or reshape to 2-D"
                      if wide_out.shape != wide_expected.shape else None)
        if starts_zero and not ex.compare(f"{where}: at the start the layer computes what the base layer computes",
                                          wide_out, wide_expected,
                                          hint=shape_hint or "return the base layer's output plus the low-rank path"):
            return ex.result
        a = torch.randn(wide_rank, 5, dtype=torch.float64, generator=generator)  # (r, in)
        b = torch.randn(7, wide_rank, dtype=torch.float64, generator=generator)  # (out, r)
        _set_adapters(wide, a, b)
        reference = LoRALinear(copy.deepcopy(wide_original), wide_rank, wide_alpha)
        _set_adapters(reference, a, b)
        wide_base, wide_update = wide_original(wide_x), wide_x @ a.T @ b.T  # (batch, T, out) each
        ex.compare(f"{where}: with A and B set, the output is the formula's", wide(wide_x), reference(wide_x),
                   hint=shape_hint or "use the layer's own in, out, rank and alpha (nothing fixed to the first "
                                      "layer's)",
                   mistakes={Hint(idea="alpha / rank is a true division: integer division (//) drops the fraction "
                                       "when the rank does not divide alpha", id="scale-floored"): (
                       wide_base + (wide_alpha // wide_rank) * wide_update)})
    return ex.result


def _trained_lora_layer(n_in: int = 6, n_out: int = 6, rank: int = 2, alpha: float = 8.0,
                        bias: bool = True) -> LoRALinear:
    """A LoRA layer on ``_layer(n_in, n_out)`` (with its bias, or none) whose B is no longer zero, as after
    training."""
    base = _layer(n_in, n_out)
    if not bias:
        base.bias = None
    layer = LoRALinear(base, rank, alpha)
    generator = torch.Generator().manual_seed(3)
    _set_adapters(layer, torch.randn(rank, n_in, dtype=torch.float64, generator=generator),
                  torch.randn(n_out, rank, dtype=torch.float64, generator=generator))
    return layer


def merge_lora_layer(student_fn: Callable) -> CheckResult:
    """Check a function (LoRALinear) -> a new nn.Linear with weight W + (alpha / rank) · B A, the layer unchanged: on
    a square layer (where a transposed update still fits), a rectangular one and one without bias."""
    ex = Exercise("merge_lora_layer")
    with ex.run():
        layer = _trained_lora_layer()
        before = copy.deepcopy(layer)
        x = _inputs(4, 6)
        merged = ex.call(student_fn, layer)
        if not ex.require("returns an nn.Linear", isinstance(merged, nn.Linear),
                          problem=f"got {type(merged).__name__}", hint="build a new nn.Linear and copy the weights in"):
            return ex.result
        w, bias = before.base.weight.detach(), before.base.bias.detach()
        ba = (before.lora_B @ before.lora_A).detach()  # (out, in)
        weight_ok = ex.compare(
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
        bias_ok = ex.compare("the merged layer keeps the base's bias", merged_bias, bias,
                             mistakes={Hint(idea="copy the base layer's bias into the merged layer: merging changes "
                                                 "only the weight", id="bias-dropped"): torch.zeros_like(bias)})
        dtype_ok = ex.require(
            "the merged layer has the base weight's dtype (float64 here)", merged.weight.dtype == w.dtype,
            problem=f"got {merged.weight.dtype}",
            hint=Hint(idea="nn.Linear makes a float32 layer unless told otherwise, and copying float64 numbers into it "
                           "rounds them: give it the base weight's dtype", code="dtype=base.weight.dtype",
                      id="merged-dtype"))
        if weight_ok and bias_ok and dtype_ok:  # else named above
            ex.compare("the merged layer's output equals the LoRA layer's (float64 tolerance)", merged(x).detach(),
                       before(x).detach(), atol=1e-10, rtol=1e-10)
        ex.require(
            "the LoRA layer you merged is unchanged (its base weight still W)",
            torch.equal(layer.base.weight, before.base.weight),
            hint=Hint(idea="you added the update into the base layer's own weight in place: the LoRA layer now adds "
                           "it twice. Build the merged weight as a new tensor", code="weight = W + update  # not W += "
                           "update", id="merged-in-place"),
        )
        if not (weight_ok and bias_ok and dtype_ok):
            return ex.result  # the other layers would repeat the same mistake
        wide = _trained_lora_layer(5, 7, rank=3, alpha=7.0)
        wide_x = _inputs(3, 2, 5, seed=4).transpose(0, 1)  # (2, 3, in), not contiguous
        merged = ex.call(student_fn, copy.deepcopy(wide), description="merge(a 5 -> 7 LoRA layer of rank 3)")
        ex.require("on a 5 -> 7 layer of rank 3 (alpha 7), the merged layer computes the same",
                   isinstance(merged, nn.Linear) and merged.weight.shape == (7, 5)
                   and torch.allclose(merged(wide_x), wide(wide_x), atol=1e-10, rtol=1e-10),
                   hint="use the layer's own shapes and scale: B A is (out, in), like W")
        no_bias = _trained_lora_layer(bias=False)
        merged = ex.call(student_fn, copy.deepcopy(no_bias), description="merge(a LoRA layer whose base has bias=None)")
        if ex.require("a base without bias gives a merged layer without bias",
                      isinstance(merged, nn.Linear) and merged.bias is None,
                      hint=Hint(idea="nn.Linear(..., bias=False) when the base has none (base.bias is None); copy "
                                     "the bias only when there is one", code="bias=layer.base.bias is not None",
                                id="bias-none-added")):
            ex.compare("without bias, the merged layer computes what the LoRA layer computes", merged(x).detach(),
                       no_bias(x).detach(), atol=1e-10, rtol=1e-10)
    return ex.result
