"""int8 weights: every linear layer's weight stored as 8-bit integers and one float scale per output channel.

Symmetric "absmax" quantization of a weight W (out_features, in_features), as ``nn.Linear`` stores it (lesson 03):
row o (output channel o) gets the scale ``s_o = max_i |W[o, i]| / 127``, and ``W[o, i] ≈ s_o · round(W[o, i] / s_o)``
with the integer in [-127, 127]. The rounding error of an entry is at most ``s_o / 2``, so a row of small weights
keeps its precision even when another row holds a large one; one scale for the whole matrix (per tensor) would give
every row the error of the largest.

:class:`Int8Linear` keeps the integers and the scales and dequantizes on the fly: each forward pass rebuilds the
float weight, ``int8 · scale``, and multiplies with it, so the memory of the stored state drops to about a quarter
while the arithmetic stays float, and each call holds one float32 copy of its layer's weight while it runs (a real
int8 kernel multiplies the integers directly and never builds that copy). :class:`AllocationPeak` measures it: the
most bytes that the operations run under it held allocated at once.

Shape legend: out = output features (rows of the weight), in = input features.
"""

from __future__ import annotations

import copy
import weakref

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

INT8_MAX = 127  # symmetric: -127 … 127, so that -W quantizes to -q


def int8_scales(weight: torch.Tensor, per_channel: bool = True) -> torch.Tensor:
    """The scale of :func:`quantize_int8`: ``absmax / 127`` of each row (out, 1), or of the whole tensor, shape ()."""
    if weight.dim() != 2:
        raise ValueError(f"expected a weight shaped (out_features, in_features), got {tuple(weight.shape)}")
    absmax = weight.abs().amax(dim=1, keepdim=True) if per_channel else weight.abs().max()  # (out, 1) or ()
    return absmax.clamp(min=torch.finfo(weight.dtype).tiny) / INT8_MAX  # an all-zero row gets a tiny scale, not 0


def quantize_int8(weight: torch.Tensor, per_channel: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """``weight`` (out, in) float -> int8 values (out, in) and the scales (out, 1), or one scale () per tensor."""
    scale = int8_scales(weight, per_channel)
    values = (weight / scale).round().clamp(-INT8_MAX, INT8_MAX).to(torch.int8)  # (out, in)
    return values, scale


def dequantize_int8(values: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """int8 ``values`` (out, in) times their ``scale`` -> a float weight (out, in) in ``dtype`` (one new tensor: the
    conversion allocates it, the multiplication works in place)."""
    return values.to(dtype).mul_(scale.to(dtype))


class Int8Linear(nn.Module):
    """``nn.Linear`` with its weight stored as int8 plus one float32 scale per output channel (buffers, not
    parameters: nothing here is trained). The bias stays float."""

    def __init__(self, linear: nn.Linear, per_channel: bool = True):
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        values, scale = quantize_int8(linear.weight.detach().float(), per_channel)
        self.register_buffer("weight_int8", values)  # (out, in) int8
        self.register_buffer("scale", scale.float())  # (out, 1) or ()
        bias = None if linear.bias is None else linear.bias.detach().clone()
        self.register_buffer("bias", bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(…, in) -> (…, out): the weight is rebuilt from its integers at every call."""
        weight = dequantize_int8(self.weight_int8, self.scale, x.dtype)  # (out, in)
        return F.linear(x, weight, None if self.bias is None else self.bias.to(x.dtype))

    def extra_repr(self) -> str:
        per = "per channel" if self.scale.dim() else "per tensor"
        return f"in_features={self.in_features}, out_features={self.out_features}, int8 weight, scales {per}"


def quantize_linear_layers(model: nn.Module, per_channel: bool = True) -> nn.Module:
    """A copy of ``model`` in which every ``nn.Linear`` is an :class:`Int8Linear` (the original is untouched).

    Embeddings and LayerNorms stay float. A linear layer whose weight is shared with another module (GPT-2's tied
    output layer) is refused: quantizing it would store the shared matrix twice.
    """
    model = copy.deepcopy(model)
    shared = {id(p) for m in model.modules() if not isinstance(m, nn.Linear) for p in m.parameters(recurse=False)}
    for name, module in list(model.named_modules()):
        for child_name, child in list(module.named_children()):
            if isinstance(child, nn.Linear):
                if id(child.weight) in shared:
                    raise ValueError(f"{name}.{child_name} shares its weight with another module (a tied output "
                                     "layer): build the model with tie_output=False to quantize it")
                setattr(module, child_name, Int8Linear(child, per_channel))
    return model


def state_nbytes(module: nn.Module, linear_weights_only: bool = False) -> int:
    """Bytes of a module's state (parameters and buffers, each shared tensor once), as ``state_dict`` holds it.

    ``linear_weights_only``: count only the linear layers' weights (float) or their int8 values and scales.
    """
    seen, total = set(), 0
    for owner in module.modules():
        if linear_weights_only and isinstance(owner, nn.Linear):
            tensors = [owner.weight]
        elif linear_weights_only and isinstance(owner, Int8Linear):
            tensors = [owner.weight_int8, owner.scale]
        elif linear_weights_only:
            continue
        else:
            tensors = [*owner.parameters(recurse=False), *owner.buffers(recurse=False)]
        for tensor in tensors:
            if tensor is not None and id(tensor) not in seen:
                seen.add(id(tensor))
                total += tensor.nbytes
    return total


class AllocationPeak(TorchDispatchMode):
    """Within ``with AllocationPeak() as peak:``, every tensor an operation allocates is counted while it lives;
    ``peak.bytes`` is the most bytes alive at once (tensors that existed before, such as the weights, not counted).

    It watches PyTorch's operations from Python (a ``TorchDispatchMode``), on any device: a new result counts its
    storage's bytes until the last tensor viewing that storage is freed; a view of an existing tensor counts nothing.
    Scratch memory a kernel uses inside one operation is not seen.
    """

    def __init__(self) -> None:
        super().__init__()
        self.bytes = 0  # the peak
        self.alive = 0  # bytes of the counted storages alive now
        self._views: dict[int, int] = {}  # storage -> tensors alive that view it
        self._sizes: dict[int, int] = {}  # storage -> its bytes

    def _release(self, storage: int) -> None:
        self._views[storage] -= 1
        if self._views[storage] == 0:
            del self._views[storage]
            self.alive -= self._sizes.pop(storage)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        given = {t.untyped_storage()._cdata for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)}
        for tensor in tree_leaves(result):
            if not isinstance(tensor, torch.Tensor):
                continue
            storage = tensor.untyped_storage()._cdata
            if storage in given and storage not in self._views:
                continue  # an input, or a view of one, made before: not a new allocation
            if storage not in self._views:
                self._views[storage], self._sizes[storage] = 0, tensor.untyped_storage().nbytes()
                self.alive += self._sizes[storage]
                self.bytes = max(self.bytes, self.alive)
            self._views[storage] += 1
            weakref.finalize(tensor, self._release, storage)
        return result
