"""Where does my model differ? Run a learner's model and a reference on the same input, find the first sub-module
whose output differs, and name the likely mistake by testing the numbers.

:func:`compare_models` records every mapped sub-module's input and output with forward hooks (removed afterwards,
whatever happens), compares each pair in the reference's order of the forward pass with a tolerance for the dtype
(``TOLERANCES``), and returns a :class:`Comparison`: a table of the sub-modules (``str()`` as text, ``_repr_html_`` in
a notebook), the first that differs, the module in which the difference arises, and the mistakes that explain it.

Where it arises: the first differing sub-module, if its input still agreed; otherwise the innermost mapped module
around it whose input agreed: the difference then arose in that module's own code, between its mapped sub-modules
(an activation, a residual connection, a dropout written inline).

The mistakes (``MISTAKES``, ids as in the exercise checks) are tested, never guessed from names: the reference's
computation is re-run on the learner's recorded input with one mistake planted (scores not scaled, softmax over the
other axis, …) and the mistake is named when that reproduces the learner's output; relations between recorded tensors
(the next sub-layer reads the attention output without the residual stream added) name the rest. The attention
re-runs assume self-attention with the reference's own mask (causal for the GPT and Llama models) and no padding.

Mappings (learner name -> reference name) are built by :func:`gpt2_mapping` and :func:`llama_mapping` (the course's
GPT and Llama against Hugging Face's ``GPT2LMHeadModel`` and ``LlamaForCausalLM``) and :func:`same_name_mapping`
(a learner's model of lessons 07-08 against the library's, or any two models with the same module names);
:func:`auto_mapping` picks one. This module imports nothing from ``transformers``: it reads the models it is given.

Shape legend: batch, T = positions, d_model, heads, kv_heads, d_head = d_model / heads.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from .masks import causal_mask
from .multi_head import MultiHeadAttention

# dtype -> (rtol, atol): two tensors differ when max|a - b| > atol + rtol · max|b|. float32: PyTorch's and Hugging
# Face's models agree to about 1e-6 relative, so 1e-4 absorbs any summation order. float64: Hugging Face's Llama
# builds its RoPE tables in float32 even in a float64 model (logits 1e-6 relative apart at T = 64), hence 1e-5.
TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float64: (1e-5, 1e-8),
    torch.float32: (1e-4, 1e-5),
    torch.float16: (1e-2, 1e-4),
    torch.bfloat16: (2e-2, 1e-3),
}

MISTAKES: dict[str, str] = {
    "unscaled-scores": "attention scores not scaled by 1/√d_k",
    "softmax-wrong-axis": "softmax over the queries' axis (dim=-2) instead of the keys' (dim=-1)",
    "mask-inverted": "causal mask inverted: positions attend to later positions instead of earlier ones",
    "mask-missing": "no causal mask: future positions get weight",
    "transposed-weight": "a square weight used as W instead of Wᵀ (nn.Linear computes x Wᵀ; Conv1D stores W)",
    "layer-norm-eps": "the normalisation's ε differs from the reference's",
    "unbiased-variance": "LayerNorm with the unbiased variance (divides by d - 1) instead of the biased one",
    "gelu-tanh-vs-erf": "GELU's tanh approximation where the exact (erf) one is used, or the other way round",
    "wrong-activation": "another activation function than the reference's",
    "rope-interleaved": "RoPE pairs neighbours (2m, 2m+1) where the reference pairs halves (m, m + d_head/2)",
    "rope-offset": "RoPE positions of the queries or the keys offset (the same offset on both changes no score)",
    "pre-vs-post-norm": "post-norm (norm after the residual add) where the reference normalises first, or vice versa",
    "missing-residual": "a residual connection missing: the sub-layer's output replaces the stream",
    "missing-bias": "a linear layer's bias left out",
    "tied-embeddings": "the output layer tied to the token embedding where the reference's is not, or vice versa",
    "dropout-in-eval": "dropout left on: entries zeroed and the rest scaled by 1/(1 - P_drop)",
    "heads-split-order": "heads split in the wrong order: features reshaped as (d_head, heads), not (heads, d_head)",
}


# -- recording -----------------------------------------------------------------------------------------------------


@dataclass
class Call:
    """One sub-module's first call: its arguments, primary input and output (the first tensor of each), and when it
    started and ended among all recorded calls."""

    args: tuple
    kwargs: dict
    input: torch.Tensor | None
    output: torch.Tensor | None = None
    start: int = 0
    end: int = -1


def first_tensor(value: Any) -> torch.Tensor | None:
    """The first tensor in a tensor, a tuple/list or a dict (a Hugging Face ``ModelOutput``), else None."""
    if isinstance(value, torch.Tensor):
        return value
    items = value.values() if isinstance(value, dict) else value if isinstance(value, (tuple, list)) else ()
    return next((t for t in map(first_tensor, items) if t is not None), None)


def primary_input(args: tuple, kwargs: dict) -> torch.Tensor | None:
    """The tensor a module reads: its first positional tensor, else ``hidden_states`` or the first tensor keyword."""
    found = first_tensor(args)
    if found is None and "hidden_states" in kwargs:
        found = first_tensor(kwargs["hidden_states"])
    return found if found is not None else first_tensor(kwargs)


def _snapshot(tensor: torch.Tensor | None) -> torch.Tensor | None:
    return None if tensor is None else tensor.detach().clone()


@contextmanager
def recording(model: nn.Module, names: list[str]) -> Iterator[dict[str, Call]]:
    """Within the block, the first call of every sub-module in ``names`` is recorded into the yielded dict; the hooks
    are removed on leaving it, also when the model raised."""
    modules = dict(model.named_modules())
    calls: dict[str, Call] = {}
    clock = iter(range(1 << 62))

    def on_start(name: str) -> Callable[..., None]:
        def hook(module: nn.Module, args: tuple, kwargs: dict) -> None:
            if name not in calls:
                calls[name] = Call(args, kwargs, _snapshot(primary_input(args, kwargs)), start=next(clock))

        return hook

    def on_end(name: str) -> Callable[..., None]:
        def hook(module: nn.Module, args: tuple, kwargs: dict, output: Any) -> None:
            if calls[name].end < 0:
                calls[name].output, calls[name].end = _snapshot(first_tensor(output)), next(clock)

        return hook

    handles = []
    try:
        for name in names:
            handles.append(modules[name].register_forward_pre_hook(on_start(name), with_kwargs=True))
            handles.append(modules[name].register_forward_hook(on_end(name), with_kwargs=True))
        yield calls
    finally:
        for handle in handles:
            handle.remove()


# -- measuring a difference ----------------------------------------------------------------------------------------


def tolerance(dtype: torch.dtype) -> tuple[float, float]:
    """(rtol, atol) for tensors of ``dtype``; integers and booleans compare exactly."""
    return TOLERANCES.get(dtype, (0.0, 0.0))


def aligned(got: torch.Tensor, expected: torch.Tensor) -> torch.Tensor:
    """``got`` in ``expected``'s shape when they differ by leading 1s only (positions (T, d) against (1, T, d))."""
    def strip(shape: torch.Size) -> torch.Size:
        return shape[next((i for i, n in enumerate(shape) if n != 1), len(shape)):]

    same = got.shape != expected.shape and strip(got.shape) == strip(expected.shape)
    return got.reshape(expected.shape) if same else got


def _measure(got: torch.Tensor, expected: torch.Tensor) -> tuple[float, float]:
    """(max |got - expected|, max |expected|) over the entries finite in both; (inf, ·) if their NaNs differ."""
    got_nan, expected_nan = got.isnan(), expected.isnan()
    if not torch.equal(got_nan, expected_nan):
        return math.inf, 1.0
    diff = (got - expected).abs().nan_to_num_(0.0, 0.0, 0.0)  # inf - inf is NaN: left out, as NaNs are
    scale = expected.abs().nan_to_num_(0.0, 0.0, 0.0)
    return (diff.max().item(), scale.max().item()) if diff.numel() else (0.0, 0.0)


def errors(got: torch.Tensor, expected: torch.Tensor) -> tuple[float, float]:
    """(max abs error, max abs error / max |expected|) over the entries finite in both; inf if NaNs disagree."""
    diff, scale = _measure(got, expected)
    return diff, diff / max(scale, 1e-300)


def agree(got: torch.Tensor | None, expected: torch.Tensor | None, ignore_nan: bool = False) -> bool:
    """Same shape and max|got - expected| <= atol + rtol · max|expected| (the dtype's tolerance). With
    ``ignore_nan``, entries NaN in ``expected`` are skipped (where a planted mistake leaves a row undefined)."""
    if got is None or expected is None:
        return got is None and expected is None
    got = aligned(got, expected)
    if got.shape != expected.shape:
        return False
    if not got.is_floating_point():
        return torch.equal(got, expected)
    if ignore_nan:
        keep = ~expected.isnan()
        got, expected = got[keep], expected[keep]
    rtol, atol = tolerance(got.dtype)
    diff, scale = _measure(got, expected.to(got.dtype))
    return diff <= atol + rtol * scale


def _ranges(indices: list[int]) -> str:
    """[0, 1, 2, 5] -> '0-2, 5'."""
    parts, start = [], None
    for i, index in enumerate(indices):
        start = index if start is None else start
        if i + 1 == len(indices) or indices[i + 1] != index + 1:
            parts.append(f"{start}" if start == index else f"{start}-{index}")
            start = None
    return ", ".join(parts)


def describe_difference(got: torch.Tensor, expected: torch.Tensor) -> str:
    """Where two (…, T, features) tensors differ: which positions, how many features, any NaN."""
    got = aligned(got, expected)
    if got.shape != expected.shape:
        return f"shape {tuple(got.shape)} where the reference has {tuple(expected.shape)}"
    if not got.is_floating_point() or got.dim() < 2:
        return f"{int((got != expected).sum())} of {got.numel()} entries differ"
    rtol, atol = tolerance(got.dtype)
    bound = atol + rtol * expected.double().abs().nan_to_num(0.0, 0.0, 0.0).max().item()
    wrong = ((got.double() - expected.double()).abs() > bound) | (got.isnan() != expected.isnan())  # (…, T, d)
    positions = [t for t in range(got.shape[-2]) if wrong[..., t, :].any()]
    features = int(wrong.flatten(0, -2).any(dim=0).sum())
    nans = int(got.isnan().sum())
    text = f"positions {_ranges(positions) or 'none'} of 0-{got.shape[-2] - 1}, {features} of {got.shape[-1]} features"
    return text + (f", {nans} NaN" if nans else "")


# -- mappings ------------------------------------------------------------------------------------------------------


def _check_names(learner: nn.Module, reference: nn.Module, mapping: dict[str, str]) -> dict[str, str]:
    """``mapping`` itself; a ValueError naming every learner or reference name that is not a sub-module."""
    ours, theirs = dict(learner.named_modules()), dict(reference.named_modules())
    missing = [f"learner's {name!r}" for name in mapping if name not in ours]
    missing += [f"reference's {name!r}" for name in mapping.values() if name not in theirs]
    if missing:
        raise ValueError(f"cannot map these sub-modules, which the models do not have: {', '.join(missing)}; pass "
                         "mapping={learner_name: reference_name} with names from model.named_modules()")
    return mapping


def gpt2_mapping(learner: nn.Module, reference: nn.Module) -> dict[str, str]:
    """The course's ``GPT`` (configured as GPT-2) against Hugging Face's ``GPT2LMHeadModel``. GPT-2's ``c_attn``
    computes queries, keys and values together, so they are compared as the attention's output only."""
    mapping = {"": "", "token_embedding": "transformer.wte", "position_embedding": "transformer.wpe",
               "dropout": "transformer.drop"}
    for i in range(reference.config.n_layer):
        ours, hf = f"blocks.{i}", f"transformer.h.{i}"
        mapping |= {ours: hf, f"{ours}.norm1": f"{hf}.ln_1", f"{ours}.self_attn": f"{hf}.attn",
                    f"{ours}.self_attn.out_proj": f"{hf}.attn.c_proj", f"{ours}.norm2": f"{hf}.ln_2",
                    f"{ours}.linear1": f"{hf}.mlp.c_fc", f"{ours}.linear2": f"{hf}.mlp.c_proj"}
    mapping |= {"final_norm": "transformer.ln_f", "head": "lm_head"}
    return _check_names(learner, reference, mapping)


def llama_mapping(learner: nn.Module, reference: nn.Module) -> dict[str, str]:
    """The course's ``Llama`` against Hugging Face's ``LlamaForCausalLM``; every projection is mapped."""
    mapping = {"": "", "token_embedding": "model.embed_tokens"}
    for i in range(reference.config.num_hidden_layers):
        ours, hf = f"blocks.{i}", f"model.layers.{i}"
        mapping |= {ours: hf, f"{ours}.attention_norm": f"{hf}.input_layernorm", f"{ours}.attention": f"{hf}.self_attn"}
        mapping |= {f"{ours}.attention.{p}": f"{hf}.self_attn.{p}" for p in ("q_proj", "k_proj", "v_proj", "o_proj")}
        mapping |= {f"{ours}.feed_forward_norm": f"{hf}.post_attention_layernorm", f"{ours}.feed_forward": f"{hf}.mlp"}
        mapping |= {f"{ours}.feed_forward.{p}": f"{hf}.mlp.{p}" for p in ("gate_proj", "up_proj", "down_proj")}
    mapping |= {"final_norm": "model.norm", "head": "lm_head"}
    return _check_names(learner, reference, mapping)


def same_name_mapping(learner: nn.Module, reference: nn.Module) -> dict[str, str]:
    """Every sub-module name the two models share (a learner's model of lessons 07-08 against the library's
    ``Transformer``, or a learner's GPT against the course's). A ValueError names the modules holding weights that
    have no namesake on the other side."""
    ours, theirs = dict(learner.named_modules()), dict(reference.named_modules())

    def unmatched(modules: dict[str, nn.Module], other: dict[str, nn.Module]) -> list[str]:
        """The outermost modules with weights and no namesake (their parent has one)."""
        return [n for n, m in modules.items() if n not in other and n.rpartition(".")[0] in other
                and any(True for _ in m.parameters())]

    lonely = [f"learner's {n!r}" for n in unmatched(ours, theirs)] + [f"reference's {n!r}"
                                                                      for n in unmatched(theirs, ours)]
    if lonely:
        raise ValueError(f"cannot map these sub-modules, which have no namesake in the other model: "
                         f"{', '.join(lonely)}; pass mapping={{learner_name: reference_name}} for them")
    containers = (nn.ModuleList, nn.ModuleDict, nn.Sequential)
    return {name: name for name, module in theirs.items() if name in ours and not isinstance(module, containers)}


def auto_mapping(learner: nn.Module, reference: nn.Module) -> dict[str, str]:
    """``gpt2_mapping`` or ``llama_mapping`` for Hugging Face's GPT-2 and Llama, else ``same_name_mapping``."""
    builders = {"GPT2LMHeadModel": gpt2_mapping, "LlamaForCausalLM": llama_mapping}
    return builders.get(type(reference).__name__, same_name_mapping)(learner, reference)


# -- the reference's computations, with one mistake planted ---------------------------------------------------------


def module_kind(module: nn.Module, is_root: bool = False) -> str:
    """'model', 'embedding', 'linear', 'dropout', 'norm', 'attention', 'block' (holds an attention) or 'module'."""
    name = type(module).__name__
    if is_root:
        return "model"
    if isinstance(module, nn.Embedding):
        return "embedding"
    if isinstance(module, nn.Linear) or name == "Conv1D":
        return "linear"
    if isinstance(module, nn.Dropout):
        return "dropout"
    if name.endswith("Norm"):
        return "norm"
    if "Attention" in name:
        return "attention"
    has_attention = any("Attention" in type(m).__name__ for m in module.modules())
    return "block" if has_attention else "module"


def linear_weights(module: nn.Module) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(weight (out, in) as ``nn.Linear`` stores it, bias or None); GPT-2's ``Conv1D`` stores (in, out)."""
    weight = module.weight.T if type(module).__name__ == "Conv1D" else module.weight
    return weight.detach(), None if module.bias is None else module.bias.detach()


@dataclass
class Planted:
    """One candidate explanation: a mistake id, what exactly was planted, and the learner-side output it predicts."""

    mistake: str
    detail: str
    predicted: torch.Tensor


@dataclass
class AttentionWeights:
    """What the attention re-runs need: projections (weight (out, in), bias) by 'q', 'k', 'v', 'o', head counts,
    RoPE tables (cos, sin), each (T, d_head) in the halves layout, or None, and the mask (True = allowed)."""

    projections: dict[str, tuple[torch.Tensor, torch.Tensor | None]]
    num_heads: int
    num_kv_heads: int
    rope: tuple[torch.Tensor, torch.Tensor] | None
    mask: torch.Tensor | None


def attention_weights(module: nn.Module, call: Call, length: int) -> AttentionWeights | None:
    """The weights of the course's or Hugging Face's GPT-2/Llama attention, with its RoPE tables for ``length``
    positions and its mask; None for another attention."""
    if hasattr(module, "c_attn"):  # Hugging Face's GPT-2: one Conv1D for q, k, v
        weight, bias = linear_weights(module.c_attn)  # (3 · d_model, d_model), (3 · d_model,)
        projections = dict(zip("qkv", zip(weight.chunk(3), bias.chunk(3), strict=True), strict=True))
        return AttentionWeights(projections | {"o": linear_weights(module.c_proj)}, module.num_heads,
                                module.num_heads, None, causal_mask(length, device=weight.device))
    out = getattr(module, "o_proj", None) or getattr(module, "out_proj", None)
    if out is None or not all(hasattr(module, p) for p in ("q_proj", "k_proj", "v_proj")):
        return None
    projections = {p[0]: linear_weights(getattr(module, p)) for p in ("q_proj", "k_proj", "v_proj")}
    projections["o"] = linear_weights(out)
    config = getattr(module, "config", None)
    heads = getattr(module, "num_heads", None) or config.num_attention_heads
    kv_heads = getattr(module, "num_kv_heads", None) or getattr(config, "num_key_value_heads", heads)
    if type(module) is MultiHeadAttention:  # the encoder-decoder's: its mask is an argument
        mask = call.kwargs.get("mask", call.args[3] if len(call.args) > 3 else None)
    else:
        mask = causal_mask(length, device=out.weight.device)
    return AttentionWeights(projections, heads, kv_heads, rope_tables(module, call, length), mask)


def rope_tables(module: nn.Module, call: Call, length: int) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(cos, sin), each (T, d_head), halves layout: Hugging Face's recorded ``position_embeddings`` or the course
    ``GroupedQueryAttention``'s frequencies at positions 0 … T-1; None without RoPE."""
    if "position_embeddings" in call.kwargs:
        cos, sin = call.kwargs["position_embeddings"]  # each (batch, T, d_head)
        return cos[0], sin[0]
    frequencies = getattr(module, "rope_frequencies", None)  # (d_head/2,)
    if frequencies is None:
        return None
    angles = torch.arange(length, dtype=torch.float64)[:, None] * frequencies.double().cpu()  # (T, d_head/2)
    angles = torch.cat((angles, angles), dim=-1).to(module.q_proj.weight.device)  # (T, d_head)
    dtype = module.q_proj.weight.dtype
    return angles.cos().to(dtype), angles.sin().to(dtype)


def _shift_rope(cos: torch.Tensor, sin: torch.Tensor, step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The tables of positions 1 … T (``step=1``) or -1 … T-2 (``step=-1``): R(t + step) = R(t) R(step)."""
    c1, s1 = cos[1], sin[1] * step  # (d_head,): one position's rotation, the table starting at position 0
    return cos * c1 - sin * s1, sin * c1 + cos * s1


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool) -> torch.Tensor:
    """RoPE on (batch, heads, T, d_head): pairs (m, m + d_head/2), or neighbours (2m, 2m+1) if ``interleaved``."""
    if interleaved:
        half = x.shape[-1] // 2
        c, s = cos[..., :half].repeat_interleave(2, -1), sin[..., :half].repeat_interleave(2, -1)  # (T, d_head)
        pair_partner = torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)  # (-x_1, x_0, -x_3, x_2, …)
        return x * c + pair_partner * s
    first, second = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-second, first), dim=-1) * sin


def _split(x: torch.Tensor, heads: int, swapped: bool) -> torch.Tensor:
    """(batch, T, heads · d_head) -> (batch, heads, T, d_head); ``swapped``: features read as (d_head, heads)."""
    batch, length, width = x.shape
    if swapped:
        return x.view(batch, length, width // heads, heads).permute(0, 3, 1, 2)
    return x.view(batch, length, heads, width // heads).transpose(1, 2)


def planted_attention(x: torch.Tensor, w: AttentionWeights, mistake: str | None = None, part: str = "",
                      key_value: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
    """The reference's attention on ``x`` (batch, T, d_model) with ``mistake`` planted (an id of ``MISTAKES``; ``part``
    names the projection, the mask's form or the RoPE shift it concerns) -> (batch, T, d_model)."""
    projections = dict(w.projections)
    if mistake == "transposed-weight":
        projections[part] = (projections[part][0].T, projections[part][1])
    if mistake == "missing-bias":
        projections[part] = (projections[part][0], None)
    key, value = key_value or (x, x)
    swapped = mistake == "heads-split-order"
    q = _split(F.linear(x, *projections["q"]), w.num_heads, swapped)  # (batch, heads, T, d_head)
    k = _split(F.linear(key, *projections["k"]), w.num_kv_heads, swapped)  # (batch, kv_heads, T, d_head)
    v = _split(F.linear(value, *projections["v"]), w.num_kv_heads, swapped)
    if w.rope is not None:
        shifted = _shift_rope(*w.rope, int(part[1:])) if mistake == "rope-offset" else w.rope
        q = _rotate(q, *(shifted if part.startswith("q") else w.rope), mistake == "rope-interleaved")
        k = _rotate(k, *(shifted if part.startswith("k") else w.rope), mistake == "rope-interleaved")
    k, v = (t.repeat_interleave(w.num_heads // w.num_kv_heads, dim=1) for t in (k, v))  # (batch, heads, T, d_head)
    scale = 1.0 if mistake == "unscaled-scores" else q.shape[-1] ** -0.5
    scores = q @ k.transpose(-2, -1) * scale  # (batch, heads, T, T)
    mask = w.mask
    if mistake == "mask-missing":
        mask = None
    if mistake == "mask-inverted":
        mask = ~mask if part == "strict" else mask.T
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-2 if mistake == "softmax-wrong-axis" else -1)  # (batch, heads, T, T)
    attended = weights @ v  # (batch, heads, T, d_head)
    if swapped and part == "merge":
        merged = attended.permute(0, 2, 3, 1).flatten(2)  # the inverse of the swapped split
    else:
        merged = attended.transpose(1, 2).flatten(2)  # (batch, T, heads · d_head)
    return F.linear(merged, *projections["o"])


def attention_candidates(module: nn.Module, call: Call, reference_call: Call) -> list[Planted]:
    """The reference attention ``module`` re-run on the learner's recorded ``call`` with each applicable mistake; its
    mask and RoPE tables come from its own recorded call."""
    x = call.input
    w = attention_weights(module, reference_call, x.shape[1])
    if w is None:
        return []
    key_value = tuple(call.args[1:3]) if type(module) is MultiHeadAttention and len(call.args) >= 3 else None
    plans = [("unscaled-scores", ""), ("softmax-wrong-axis", ""), ("mask-missing", ""),
             ("mask-inverted", "strict"), ("mask-inverted", "with the diagonal"),
             ("heads-split-order", "split"), ("heads-split-order", "merge")]
    causal = w.mask is not None and w.mask.shape[-1] == w.mask.shape[-2]  # (…, T, T): the catalogue's masks are causal
    plans = [(m, p) for m, p in plans if causal or not m.startswith("mask")]  # a padding mask (…, 1, S): not tried
    if w.rope is not None:
        plans += [("rope-interleaved", "")] + [("rope-offset", f"{t}{step:+d}") for t in "qk" for step in (1, -1)]
    for name, (weight, bias) in w.projections.items():
        plans += [("transposed-weight", name)] if weight.shape[0] == weight.shape[1] else []
        plans += [("missing-bias", name)] if bias is not None else []
    details = {"q+1": "the queries' positions start at 1", "q-1": "the queries' positions start at -1",
               "k+1": "the keys' positions start at 1", "k-1": "the keys' positions start at -1",
               "q": "W^Q", "k": "W^K", "v": "W^V", "o": "W^O", "split": "in the split",
               "merge": "in the split and the merge"}
    return [Planted(m, details.get(p, p), planted_attention(x, w, m, p, key_value)) for m, p in plans]


def planted_norm(x: torch.Tensor, module: nn.Module, eps: float, unbiased: bool = False) -> torch.Tensor:
    """The reference norm (LayerNorm, or RMSNorm when its class name says so) on (…, d) with ``eps``."""
    weight, bias = module.weight.detach(), getattr(module, "bias", None)
    if "RMS" in type(module).__name__:
        normalised = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)  # (…, d)
    else:
        centred = x - x.mean(-1, keepdim=True)
        normalised = centred / torch.sqrt(x.var(-1, correction=int(unbiased), keepdim=True) + eps)  # (…, d)
    return normalised * weight + (0.0 if bias is None else bias.detach())


def norm_eps(module: nn.Module) -> float:
    """The ε of ``LayerNorm``, ``RMSNorm`` or Hugging Face's ``LlamaRMSNorm`` (``variance_epsilon``)."""
    return float(getattr(module, "eps", None) or getattr(module, "variance_epsilon", 0.0) or 0.0)


def fitted_eps(x: torch.Tensor, y: torch.Tensor, module: nn.Module) -> float:
    """The ε that best explains ``y = norm(x)``: per position, the least-squares scale s of (x - mean) ≈ s · z,
    z = (y - bias) / weight, gives s² = variance + ε; the median over positions."""
    bias = getattr(module, "bias", None)
    z = (y.double() - (0.0 if bias is None else bias.double())) / module.weight.double()  # (…, d)
    rms = "RMS" in type(module).__name__
    centred = x.double() if rms else x.double() - x.double().mean(-1, keepdim=True)
    s = (centred * z).sum(-1) / (z * z).sum(-1)  # (…,)
    variance = centred.pow(2).mean(-1)
    return (s * s - variance).median().item()


def norm_candidates(module: nn.Module, call: Call, reference_call: Call) -> list[Planted]:
    """The reference norm re-run with the learner's fitted ε, and (LayerNorm) with the unbiased variance."""
    x, eps = call.input, norm_eps(module)
    found = fitted_eps(x, call.output, module)
    plans = []
    if found >= 0 and not math.isclose(found, eps, rel_tol=0.1, abs_tol=1e-12):
        plans.append(Planted("layer-norm-eps", f"ε ≈ {found:.1e} where the reference uses {eps:.0e}",
                             planted_norm(x, module, found)))
    if "RMS" not in type(module).__name__:
        plans.append(Planted("unbiased-variance", "", planted_norm(x, module, eps, unbiased=True)))
    return plans


def linear_candidates(module: nn.Module, call: Call, reference_call: Call) -> list[Planted]:
    """The reference linear layer re-run with its weight transposed (square ones) or without its bias."""
    weight, bias = linear_weights(module)
    plans = []
    if weight.shape[0] == weight.shape[1]:
        plans.append(Planted("transposed-weight", "", F.linear(call.input, weight.T, bias)))
    if bias is not None:
        plans.append(Planted("missing-bias", "", F.linear(call.input, weight)))
    return plans


# -- relations between recorded tensors ----------------------------------------------------------------------------


def dropout_rate(got: torch.Tensor, expected: torch.Tensor) -> float | None:
    """P_drop if ``got`` is ``expected`` with entries zeroed and the rest scaled by 1/(1 - P_drop), else None."""
    if got.shape != expected.shape or not got.is_floating_point():
        return None
    dropped = (got == 0) & (expected != 0)
    kept = ~dropped
    if not dropped.any() or not kept.any():
        return None
    scale = (got[kept].double().abs().sum() / expected[kept].double().abs().sum()).item()
    if scale <= 1 or not agree(got[kept], expected[kept] * scale):
        return None
    return 1 - 1 / scale


ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "GELU (erf)": F.gelu,
    "GELU (tanh)": lambda h: F.gelu(h, approximate="tanh"),
    "ReLU": F.relu,
    "SiLU": F.silu,
}


def activation_of(hidden: torch.Tensor, result: torch.Tensor) -> str | None:
    """The name of the activation f in ``ACTIVATIONS`` with f(hidden) ≈ result, else None."""
    return next((name for name, f in ACTIVATIONS.items() if agree(result, f(hidden))), None)


@dataclass
class Side:
    """One model's recorded calls and mapped names, to read relations between its tensors."""

    calls: dict[str, Call]
    names: dict[str, str]  # learner name -> this side's name

    def input(self, learner_name: str) -> torch.Tensor | None:
        call = self.calls.get(self.names[learner_name])
        return None if call is None else call.input

    def output(self, learner_name: str) -> torch.Tensor | None:
        call = self.calls.get(self.names[learner_name])
        return None if call is None else call.output


def relation_candidates(parent: str, child: str | None, before: list[str], kinds: dict[str, str],
                        learner: Side, reference: Side) -> list[tuple[str, str]]:
    """Mistakes in ``parent``'s own code, between its mapped sub-modules: ``child`` is the first whose input differs
    (None: ``parent``'s output), ``before`` the sub-modules that ended before it, latest last, their outputs agreeing.
    A relation is named when it holds between the learner's tensors and not between the reference's."""
    def glue(side: Side) -> torch.Tensor | None:  # what parent's code made between the sub-modules
        return side.input(child) if child is not None else side.output(parent)

    found = []
    rate = dropout_rate(glue(learner), glue(reference))
    if rate is not None:
        found.append(("dropout-in-eval", f"P_drop ≈ {rate:.2f}"))
    if before:
        last = before[-1]
        ours, theirs = activation_of(learner.output(last), glue(learner)), activation_of(reference.output(last),
                                                                                           glue(reference))
        if ours and theirs and ours != theirs:
            mistake = "gelu-tanh-vs-erf" if "GELU" in ours and "GELU" in theirs else "wrong-activation"
            found.append((mistake, f"{ours} where the reference uses {theirs}"))
        if agree(glue(learner), learner.output(last)) and not agree(glue(reference), reference.output(last)):
            found.append(("missing-residual", f"after {last}"))
    if _post_norm(parent, kinds, learner) != _post_norm(parent, kinds, reference):
        found.append(("pre-vs-post-norm", "post-norm" if _post_norm(parent, kinds, learner) else "pre-norm"))
    return found


def _post_norm(parent: str, kinds: dict[str, str], side: Side) -> bool:
    """Whether the first norm of block ``parent`` reads ``input + attention(input)``, the attention reading the
    block's input itself."""
    children = [n for n in kinds if n.startswith(parent + ".")]
    norm = next((n for n in children if kinds[n] == "norm"), None)
    attention = next((n for n in children if kinds[n] == "attention"), None)
    if norm is None or attention is None or side.output(attention) is None or side.input(norm) is None:
        return False
    block_input = side.input(parent)
    return agree(side.input(attention), block_input) and agree(side.input(norm), block_input + side.output(attention))


def tying_candidates(name: str, learner: nn.Module, reference: nn.Module, mapping: dict[str, str],
                     call: Call) -> list[tuple[str, str]]:
    """'tied-embeddings' when the learner's output layer ``name`` computes with its own weight and shares it with
    its token embedding while the reference's does not, or the other way round."""
    def tied(model: nn.Module, head_name: str) -> bool:
        head = model.get_submodule(head_name)
        return any(isinstance(m, nn.Embedding) and m.weight.shape == head.weight.shape
                   and torch.equal(m.weight, head.weight) for m in model.modules())

    head = learner.get_submodule(name)
    if not isinstance(head, nn.Linear) or not agree(call.output, head(call.input)):
        return []
    ours, theirs = tied(learner, name), tied(reference, mapping[name])
    if ours == theirs:
        return []
    return [("tied-embeddings", "yours is tied, the reference's is not" if ours else
             "the reference's is tied to the token embedding, yours has its own weight")]


# -- the comparison ------------------------------------------------------------------------------------------------


@dataclass
class Row:
    """One mapped pair: status 'same', 'differs' or 'not run', with the errors of the learner's output."""

    learner: str
    reference: str
    kind: str
    status: str
    max_abs: float = 0.0
    relative: float = 0.0


@dataclass
class Diagnosis:
    """A named mistake: its id (a key of ``MISTAKES``), the detail found, and the evidence."""

    mistake: str
    detail: str
    evidence: str

    def __str__(self) -> str:
        detail = f" ({self.detail})" if self.detail else ""
        return f"{self.mistake}{detail}: {MISTAKES[self.mistake]}; {self.evidence}"


@dataclass
class Comparison:
    """The result of :func:`compare_models`. ``first``: the first differing row (None: the models agree);
    ``culprit``: the learner's module where the difference arises; ``between``: for a difference in the culprit's own
    code, the sub-module whose input differed first (None: the culprit's output); ``diagnoses``: the named mistakes,
    most specific first (empty: unknown); ``looks_like``: where the first difference is."""

    rows: list[Row]
    first: Row | None = None
    culprit: str | None = None
    inside: bool = True
    between: str | None = None
    diagnoses: list[Diagnosis] = field(default_factory=list)
    looks_like: str = ""

    @property
    def differs(self) -> bool:
        return self.first is not None

    @property
    def mistakes(self) -> list[str]:
        return [d.mistake for d in self.diagnoses]

    def headline(self) -> list[str]:
        """The verdict, a few lines."""
        if self.first is None:
            return [f"no difference: {len(self.rows)} sub-modules agree within the dtype's tolerance"]
        f = self.first
        lines = [f"first difference: {f.learner or '(model)'} (reference {f.reference or '(model)'}): max abs "
                 f"{f.max_abs:.2e}, relative {f.relative:.2e}; {self.looks_like}"]
        where = "inside it" if self.inside else (
            f"in its own code, before {self.between}'s input" if self.between else "in its own code, after its last "
            "mapped sub-module")
        lines.append(f"it arises in {self.culprit or '(model)'}, {where}")
        if not self.diagnoses:
            lines.append("likely mistake: unknown (no mistake of the catalogue reproduces it)")
        lines += [f"likely mistake: {d}" for d in self.diagnoses]
        return lines

    def _marks(self) -> list[str]:
        return ["→" if row is self.first else "" for row in self.rows]

    def __str__(self) -> str:
        shown = len(self.rows) if self.first is None else min(len(self.rows), self.rows.index(self.first) + 4)
        ours = max(len(r.learner) for r in self.rows) + 2
        theirs = max(len(r.reference) for r in self.rows) + 2
        lines = self.headline() + [f"   {'learner':<{ours}}{'reference':<{theirs}}{'kind':<10}{'status':<8}"
                                   f"{'max abs':>9}{'relative':>10}"]
        for mark, row in zip(self._marks()[:shown], self.rows[:shown], strict=True):
            lines.append(f"{mark:<3}{row.learner or '(model)':<{ours}}{row.reference or '(model)':<{theirs}}"
                         f"{row.kind:<10}{row.status:<8}{row.max_abs:>9.1e}{row.relative:>10.1e}")
        if shown < len(self.rows):
            lines.append(f"   … {len(self.rows) - shown} more")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        head = "".join(f"<p>{html.escape(line)}</p>" for line in self.headline())
        cells = []
        for mark, row in zip(self._marks(), self.rows, strict=True):
            style = ' style="background:#fdd;font-weight:bold"' if mark else ""
            values = (mark, row.learner or "(model)", row.reference or "(model)", row.kind, row.status,
                      f"{row.max_abs:.1e}", f"{row.relative:.1e}")
            cells.append(f"<tr{style}>" + "".join(f"<td>{html.escape(v)}</td>" for v in values) + "</tr>")
        header = "".join(f"<th>{h}</th>" for h in ("", "learner", "reference", "kind", "status", "max abs", "relative"))
        return f"{head}<table><tr>{header}</tr>{''.join(cells)}</table>"


def _row(name: str, reference_name: str, kind: str, ours: Call | None, theirs: Call | None) -> Row:
    if ours is None or theirs is None or ours.output is None or theirs.output is None:
        return Row(name, reference_name, kind, "not run")
    output = aligned(ours.output, theirs.output)
    if output.shape != theirs.output.shape:
        return Row(name, reference_name, kind, "differs", math.inf, math.inf)
    max_abs, relative = errors(output, theirs.output)
    return Row(name, reference_name, kind, "same" if agree(ours.output, theirs.output) else "differs", max_abs,
               relative)


def _ancestors(name: str, mapped: dict[str, str]) -> list[str]:
    """The mapped modules around ``name``, innermost first ('' is the model itself)."""
    parts = name.split(".") if name else []
    return [".".join(parts[:i]) for i in range(len(parts) - 1, -1, -1) if ".".join(parts[:i]) in mapped]


def compare_models(learner: nn.Module, reference: nn.Module, *inputs: Any, mapping: dict[str, str] | None = None,
                   **kwargs: Any) -> Comparison:
    """Run ``learner(*inputs, **kwargs)`` and ``reference(*inputs, **kwargs)`` without gradients, in the modes they
    are in, and compare every mapped sub-module (``mapping``: learner name -> reference name, default
    :func:`auto_mapping`). Returns the :class:`Comparison`; the hooks are removed even if a model raises."""
    mapping = _check_names(learner, reference, mapping if mapping is not None else auto_mapping(learner, reference))
    with torch.no_grad():
        with recording(learner, list(mapping)) as ours:
            learner(*inputs, **kwargs)
        with recording(reference, list(mapping.values())) as theirs:
            reference(*inputs, **kwargs)
        ran = [n for n in mapping if n in ours or mapping[n] in theirs]  # a module neither model called is left out
        order = sorted(ran, key=lambda n: theirs[mapping[n]].end if mapping[n] in theirs else math.inf)
        kinds = {n: module_kind(reference.get_submodule(mapping[n]), mapping[n] == "") for n in order}
        rows = [_row(n, mapping[n], kinds[n], ours.get(n), theirs.get(mapping[n])) for n in order]
        first = next((row for row in rows if row.status != "same"), None)
        comparison = Comparison(rows, first)
        if first is not None and first.status == "differs":
            _locate(comparison, learner, reference, mapping, kinds, Side(ours, {n: n for n in mapping}),
                    Side(theirs, mapping))
    return comparison


def _locate(comparison: Comparison, learner: nn.Module, reference: nn.Module, mapping: dict[str, str],
            kinds: dict[str, str], ours: Side, theirs: Side) -> None:
    """Fill in where the first difference arises, what it looks like and the mistakes that explain it."""
    first = comparison.first.learner
    comparison.looks_like = describe_difference(ours.output(first), theirs.output(first))
    culprit, child = first, None
    if not agree(ours.input(first), theirs.input(first)):
        child = first
        culprit = next((a for a in _ancestors(first, mapping) if agree(ours.input(a), theirs.input(a))), first)
    comparison.culprit, comparison.inside = culprit, child is None
    comparison.between = child if child != culprit else None
    candidates = _kind_candidates(culprit, kinds[culprit], learner, reference, mapping, ours.calls[culprit],
                                  theirs.calls[mapping[culprit]])
    children = [n for n in mapping if n.startswith(culprit + ".") and n in ours.calls] if culprit else [
        n for n in mapping if n and n in ours.calls]
    if children and culprit != child:
        until = ours.calls[child].start if comparison.between else ours.calls[culprit].end
        before = sorted((n for n in children if ours.calls[n].end < until and agree(ours.output(n), theirs.output(n))),
                        key=lambda n: ours.calls[n].end)
        candidates += [(m, d, "a relation between your recorded tensors that the reference's do not satisfy")
                       for m, d in relation_candidates(culprit, comparison.between, before, kinds, ours, theirs)]
    elif kinds[culprit] != "attention":
        rate = dropout_rate(ours.output(culprit), theirs.output(culprit))
        if rate is not None:
            candidates.append(("dropout-in-eval", f"P_drop ≈ {rate:.2f}", "your output is the reference's with "
                               "entries zeroed and the rest scaled"))
    merged: dict[str, Diagnosis] = {}
    for mistake, detail, evidence in candidates:  # one diagnosis per id, its details joined
        if mistake in merged:
            merged[mistake].detail += f", or {detail}"
        else:
            merged[mistake] = Diagnosis(mistake, detail, evidence)
    comparison.diagnoses = list(merged.values())


def _kind_candidates(name: str, kind: str, learner: nn.Module, reference: nn.Module, mapping: dict[str, str],
                     call: Call, reference_call: Call) -> list[tuple[str, str, str]]:
    """The reference module's re-runs, with one mistake planted each, that reproduce the learner's output."""
    module = reference.get_submodule(mapping[name])
    planters = {"attention": attention_candidates, "norm": norm_candidates, "linear": linear_candidates}
    if kind not in planters or call.input is None or call.output is None:
        return []
    evidence = "re-running the reference's {} with it planted, on your recorded input, reproduces your output"
    found = [(p.mistake, p.detail, evidence.format(mapping[name] or "model"))
             for p in planters[kind](module, call, reference_call)
             if agree(call.output, p.predicted, ignore_nan=p.mistake == "mask-inverted")]
    if kind == "linear":
        found += [(m, d, "your output layer computes with its own weight, and only one of the two models shares it "
                   "with the token embedding") for m, d in tying_candidates(name, learner, reference, mapping, call)]
    return found
