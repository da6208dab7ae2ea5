"""LoRA, low-rank adaptation (Hu et al., 2021): fine-tune a model by learning a small change to chosen weights.

A linear layer computes x Wᵀ + b with W of shape (out, in). LoRA keeps W frozen and learns two small matrices,
A (r, in) and B (out, r), with r far smaller than in and out; the layer then computes

    x (W + (α/r) · B A)ᵀ + b  =  x Wᵀ + b + (α/r) · (x Aᵀ) Bᵀ

so only r · (in + out) numbers per layer are trained. A starts random and B at zero: the product B A is zero and the
adapted model computes exactly what the base model does until the first step. α (``alpha``) sets the scale of the
update independently of r. After training, B A can be added into W (:meth:`LoRALinear.merged`), and the model runs
at the base's cost again.

The names and shapes follow Hugging Face PEFT's ``lora.Linear`` (``lora_A`` (r, in), ``lora_B`` (out, r), scale
``lora_alpha / r``, A drawn as ``nn.Linear`` draws a weight), so ``tests/test_lora.py`` copies our adapters into
PEFT's and compares the outputs.

Shape legend: ... = any leading axes (batch, T), in / out = the layer's input / output width, r = the rank.
"""

from __future__ import annotations

import copy
import math

import torch
from torch import nn

LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "out_proj", "linear1", "linear2")  # every linear layer of a GPT block


class LoRALinear(nn.Module):
    """``base`` (an ``nn.Linear``, frozen here) plus the low-rank update (α/r) · B A; A random, B zero."""

    def __init__(self, base: nn.Linear, rank: int, alpha: float):
        super().__init__()
        if not 1 <= rank <= min(base.in_features, base.out_features):
            raise ValueError(f"rank={rank} must lie between 1 and min(in, out) = "
                             f"{min(base.in_features, base.out_features)} for a layer {base.in_features} -> "
                             f"{base.out_features}: choose a small rank, e.g. 4")
        self.base = base.requires_grad_(False)
        self.rank, self.alpha = rank, alpha
        self.scale = alpha / rank
        weight = base.weight
        self.lora_A = nn.Parameter(torch.empty(rank, base.in_features, dtype=weight.dtype, device=weight.device))
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, rank, dtype=weight.dtype, device=weight.device))
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))  # as nn.Linear (and PEFT) draw a weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(..., in) -> (..., out): the frozen layer plus the scaled low-rank path."""
        down = x @ self.lora_A.T  # (..., r)
        return self.base(x) + self.scale * (down @ self.lora_B.T)  # (..., out)

    def delta_weight(self) -> torch.Tensor:
        """(α/r) · B A, shape (out, in): what training added to W."""
        return self.scale * (self.lora_B @ self.lora_A)  # (out, r) @ (r, in) -> (out, in)

    def merged(self) -> nn.Linear:
        """A new ``nn.Linear`` with weight W + (α/r) · B A and the base's bias; this layer is left unchanged."""
        base = self.base
        layer = nn.Linear(base.in_features, base.out_features, bias=base.bias is not None,
                          dtype=base.weight.dtype, device=base.weight.device)
        with torch.no_grad():
            layer.weight.copy_(base.weight + self.delta_weight())
            if base.bias is not None:
                layer.bias.copy_(base.bias)
        return layer

    def extra_repr(self) -> str:
        return f"rank={self.rank}, alpha={self.alpha:g}"


def add_lora(model: nn.Module, rank: int, alpha: float, targets: tuple[str, ...] = LORA_TARGETS) -> nn.Module:
    """Freeze every parameter of ``model`` and wrap each ``nn.Linear`` whose name ends in one of ``targets`` in a
    :class:`LoRALinear`, in place (A drawn from PyTorch's generator: seed it first). Returns ``model``."""
    model.requires_grad_(False)
    chosen = [(name, module) for name, module in model.named_modules()
              if isinstance(module, nn.Linear) and name.rsplit(".", 1)[-1] in targets]
    if not chosen:
        raise ValueError(f"no nn.Linear named {targets} in this model: pass the last part of the layers' names, "
                         "e.g. targets=('q_proj', 'v_proj')")
    for name, module in chosen:
        parent_name, _, child = name.rpartition(".")
        setattr(model.get_submodule(parent_name), child, LoRALinear(module, rank, alpha))
    return model


def merge_lora(model: nn.Module) -> nn.Module:
    """A copy of ``model`` with every :class:`LoRALinear` replaced by its merged ``nn.Linear``; ``model`` itself is
    left as it is."""
    merged = copy.deepcopy(model)
    adapted = [name for name, module in merged.named_modules() if isinstance(module, LoRALinear)]
    for name in adapted:
        parent_name, _, child = name.rpartition(".")
        parent = merged.get_submodule(parent_name)
        setattr(parent, child, getattr(parent, child).merged())
    return merged


def trainable_parameters(model: nn.Module) -> tuple[int, int]:
    """(parameters that train, all parameters) of ``model``, adapters included."""
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return trainable, sum(p.numel() for p in model.parameters())
