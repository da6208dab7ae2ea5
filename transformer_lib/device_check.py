"""Does a device compute the library's building blocks right? ``check_device`` runs each block twice from the same
inputs: on the device in float32, and on the CPU in float64 (the reference), and compares the two.

Every input and weight is drawn on the CPU in float32 from a ``torch.Generator`` seeded with ``SEED`` (the global
random state is left as it was); the reference converts those same numbers to float64, so the difference measures
only the device's float32 arithmetic. A check passes when the largest absolute difference is at most its tolerance
and every value is finite: NaN or inf always fails.

Tolerances: float32 keeps about 7 significant digits (machine epsilon 1.2e-7) and these blocks work on values of
order 1 with short sums, so a correct device should differ from float64 by about 1e-6 at most. On the course's 2-core
CPU (torch 2.13.0; AVX-512, AVX2 and the portable kernels, one thread or two) the forward checks differ by at most
6e-7 and the training step by at most 1.5e-6. The forward checks allow 1e-4, over 150 times that, yet a real fault
exceeds it: rounding only the results to float16 already adds 2e-4 to 1e-3 here, to bfloat16 1e-3 to 8e-3, and
ignoring the causal mask changes the attention output by order 1. The training step allows 5e-4, over 300 times
its error: it adds the backward pass, and its updated parameters reach about 8, where float32's own rounding is 1e-6.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .attention import scaled_dot_product_attention, softmax
from .device import get_device
from .gpt import GPT, GPTConfig
from .layers import LayerNorm
from .masks import causal_mask
from .multi_head import MultiHeadAttention
from .training import optimiser_step

SEED = 0
FORWARD_TOLERANCE = 1e-4  # see the module docstring
TRAINING_TOLERANCE = 5e-4


@dataclass(frozen=True)
class DeviceCheckResult:
    """One check on one device: the largest absolute difference from the float64 CPU reference, and the verdict.

    ``note`` says why a check failed (NaN or inf, an exception, or which result differs most); empty when it passed.
    """

    name: str
    max_abs_error: float
    tolerance: float
    passed: bool
    note: str = ""

    def __str__(self) -> str:
        verdict = "PASS" if self.passed else "FAIL"
        line = f"{verdict}  {self.name:<34} error {self.max_abs_error:8.1e}  tolerance {self.tolerance:.0e}"
        return f"{line}  ({self.note})" if self.note else line


class DeviceTarget:
    """Where the checks compute: ``device`` for tensors and modules, ``fetch`` to bring a result back to the CPU.

    ``name`` labels reports (default: the device's name). A test simulates a faulty device by overriding ``fetch``,
    e.g. to add an error or return NaN.
    """

    def __init__(self, device: torch.device | str, name: str | None = None):
        self.device = torch.device(device)
        self.name = name or str(self.device)

    def send(self, x: torch.Tensor | nn.Module) -> torch.Tensor | nn.Module:
        """A CPU tensor or module moved to the device."""
        return x.to(self.device)

    def fetch(self, x: torch.Tensor) -> torch.Tensor:
        """A result computed on the device, back on the CPU."""
        return x.detach().cpu()


# A check computes its results from (inputs, modules) on the CPU in float64 or on a target; it returns
# label -> tensor, and the labels say which result differs most.
Results = dict[str, torch.Tensor]


def _random_module(build: Callable[[], nn.Module], generator: torch.Generator) -> nn.Module:
    """``build()`` with every parameter redrawn from ``generator``: normal, scaled by 1/√(last dimension) as
    ``nn.Linear``'s own initialisation, so activations stay of order 1. Construction consumes the global random
    state, so it runs inside ``fork_rng``, which restores it."""
    with torch.random.fork_rng(devices=[]):
        module = build()
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator) / math.sqrt(parameter.shape[-1]))
    return module


def _attention(target: DeviceTarget | None) -> Results:
    """Lesson 02's attention with a causal mask: the readable path (output and weights) and the fused kernel."""
    generator = torch.Generator().manual_seed(SEED)
    q, k, v = (torch.randn(2, 4, 16, 8, generator=generator) for _ in range(3))  # (batch, heads, T, d_k) each
    mask = causal_mask(16)  # (T, T)
    q, k, v, mask = _place((q, k, v, mask), target)
    output, weights = scaled_dot_product_attention(q, k, v, mask=mask)  # (2, 4, 16, 8), (2, 4, 16, 16)
    fused, _ = scaled_dot_product_attention(q, k, v, mask=mask, need_weights=False)
    return {"output": output, "weights": weights, "fused kernel's output": fused}


def _softmax(target: DeviceTarget | None) -> Results:
    """Softmax of rows of scores spanning from about ±3 to about ±300: exp overflows float32 beyond 88 unless the
    largest score is subtracted first."""
    generator = torch.Generator().manual_seed(SEED)
    scales = torch.logspace(0, 2, 8).unsqueeze(1)  # (rows, 1): 1 … 100
    scores = torch.randn(8, 64, generator=generator) * scales  # (rows, keys)
    (scores,) = _place((scores,), target)
    return {"weights": softmax(scores, dim=-1)}


def _layer_norm(target: DeviceTarget | None) -> Results:
    """Lesson 07's LayerNorm (random scale and shift) on features with mean 3 and standard deviation 4."""
    generator = torch.Generator().manual_seed(SEED)
    norm = _random_module(lambda: LayerNorm(32), generator)
    x = torch.randn(4, 16, 32, generator=generator) * 4 + 3  # (batch, T, d_model)
    norm, x = _place((norm, x), target)
    return {"output": norm(x)}


def _multi_head(target: DeviceTarget | None) -> Results:
    """Lesson 06's MultiHeadAttention (4 heads of width 8), self-attention with a causal mask."""
    generator = torch.Generator().manual_seed(SEED)
    attention = _random_module(lambda: MultiHeadAttention(32, 4), generator)
    x = torch.randn(2, 16, 32, generator=generator)  # (batch, T, d_model)
    attention, x, mask = _place((attention, x, causal_mask(16)), target)
    output, weights = attention(x, x, x, mask=mask)  # (2, 16, 32), (2, 4, 16, 16)
    return {"output": output, "weights": weights}


def _training_step(target: DeviceTarget | None) -> Results:
    """One training step of a tiny GPT (2 blocks, width 32): forward, cross-entropy, backward, plain SGD. Its
    gradients are of order 1e-2, so ``lr=100`` makes every update of order 1 and shows each gradient's error a
    hundredfold in the updated parameters."""
    generator = torch.Generator().manual_seed(SEED)
    config = GPTConfig(vocab_size=16, block_size=16, d_model=32, num_heads=4, num_layers=2, d_ff=64)
    model = _random_module(lambda: GPT(config), generator)
    tokens = torch.randint(config.vocab_size, (4, 17), generator=generator)  # (batch, T + 1)
    model, inputs, targets = _place((model, tokens[:, :-1], tokens[:, 1:]), target)
    model.train()
    logits = model(inputs)  # (batch, T, V)
    loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
    optimiser_step(model, torch.optim.SGD(model.parameters(), lr=100.0), loss)
    return {"loss": loss, **{f"updated {name}": parameter for name, parameter in model.named_parameters()}}


def _place(items: Sequence, target: DeviceTarget | None) -> list:
    """Tensors and modules for one run: on the CPU in float64 (``target`` None, the reference), or sent to the
    target as they are, in float32. Modules are copied, so both runs start from the same weights; masks and token
    ids keep their dtype.
    """
    placed = []
    for item in items:
        if isinstance(item, nn.Module):
            item = copy.deepcopy(item)
        if target is not None:
            placed.append(target.send(item))
        elif isinstance(item, nn.Module) or item.is_floating_point():
            placed.append(item.double())
        else:
            placed.append(item)
    return placed


CHECKS: dict[str, tuple[Callable[[DeviceTarget | None], Results], float]] = {  # name -> (computation, tolerance)
    "attention, causal mask": (_attention, FORWARD_TOLERANCE),
    "softmax, scores up to ±300": (_softmax, FORWARD_TOLERANCE),
    "layer norm": (_layer_norm, FORWARD_TOLERANCE),
    "multi-head attention": (_multi_head, FORWARD_TOLERANCE),
    "training step, tiny GPT (SGD)": (_training_step, TRAINING_TOLERANCE),
}
QUICK_CHECKS = ("attention, causal mask", "softmax, scores up to ±300", "layer norm")


def run_check(name: str, target: DeviceTarget) -> DeviceCheckResult:
    """Run one check of ``CHECKS`` on ``target`` and compare it with the float64 CPU reference.

    An exception on the device (an unsupported operation, say) is a failed check whose note names it.
    """
    compute, tolerance = CHECKS[name]
    reference = compute(None)
    try:
        results = {label: target.fetch(value) for label, value in compute(target).items()}
        errors = {label: (results[label].double() - reference[label]).abs().max().item() for label in reference}
    except Exception as error:  # any failure on the device is what the report must show
        return DeviceCheckResult(name, math.nan, tolerance, False, f"raised {type(error).__name__}: {error}")
    if not all(bool(torch.isfinite(value).all()) for value in results.values()):
        return DeviceCheckResult(name, math.nan, tolerance, False, "NaN or inf in the device's results")
    worst = max(errors, key=errors.__getitem__)  # the label of the result that differs most
    if errors[worst] > tolerance:
        return DeviceCheckResult(name, errors[worst], tolerance, False, f"largest error in the {worst}")
    return DeviceCheckResult(name, errors[worst], tolerance, True)


def check_device(
    device: DeviceTarget | torch.device | str | None = None, quick: bool = False
) -> list[DeviceCheckResult]:
    """Run the device checks on ``device`` (default ``get_device()``), each against float64 on the CPU.

    ``quick=True`` runs only attention, softmax and layer norm (well under a second on a CPU), for lesson 00;
    otherwise multi-head attention and one training step of a tiny GPT too. Print each result for one line per check::

        for result in check_device("cpu", quick=True):
            print(result)
    """
    if not isinstance(device, DeviceTarget):
        device = DeviceTarget(get_device() if device is None else device)
    return [run_check(name, device) for name in (QUICK_CHECKS if quick else CHECKS)]
