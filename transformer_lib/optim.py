"""The optimiser's parts written out: AdamW's update, a warm-up and cosine learning-rate schedule, and gradient
clipping by the global norm. Each equals PyTorch's own (tests/test_optim.py):

- :class:`AdamW` equals ``torch.optim.AdamW`` (Loshchilov and Hutter's decoupled weight decay), and with
  ``decoupled=False`` ``torch.optim.Adam(weight_decay=λ)`` (the L2 penalty added to the gradient);
- :func:`cosine_with_warmup` equals ``LambdaLR`` with the same function, and ``LinearLR`` then ``CosineAnnealingLR``
  in a ``SequentialLR``; the other schedules are lesson 09's, in ``training``;
- :func:`clip_grad_norm` equals ``torch.nn.utils.clip_grad_norm_``.

Shape legend: every tensor here has its parameter's shape, written (*) on the lines.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch


class AdamW(torch.optim.Optimizer):
    """Adam with decoupled weight decay, one readable loop per step.

    Per parameter w with gradient g, at step t = 1, 2, …:

        w ← w − lr·λ·w                         (decoupled=True: the decay acts on the weights, not on g)
        m ← β1·m + (1 − β1)·g                  (first moment: a running mean of the gradient)
        v ← β2·v + (1 − β2)·g²                 (second moment: a running mean of its square)
        w ← w − lr · (m / (1 − β1^t)) / (√(v / (1 − β2^t)) + ε)

    The divisions by 1 − β^t undo the moments' start at 0; ε sits outside the square root, as in PyTorch.
    With ``decoupled=False`` there is no first line and g ← g + λ·w instead (Adam's L2 penalty), so the decay goes
    through the moments and is divided by √v like the gradient: that is ``torch.optim.Adam(weight_decay=λ)``.
    The defaults are ``torch.optim.AdamW``'s. Parameters whose ``.grad`` is None are skipped, as in PyTorch.
    """

    def __init__(
        self,
        params: Iterable[torch.nn.Parameter] | Iterable[dict],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        decoupled: bool = True,
    ) -> None:
        if not lr >= 0.0:
            raise ValueError(f"lr={lr} must be >= 0: pass a learning rate, e.g. 1e-3")
        if not all(0.0 <= beta < 1.0 for beta in betas):
            raise ValueError(f"betas={betas} must both be in [0, 1): pass e.g. (0.9, 0.999), PyTorch's default")
        if not eps >= 0.0:
            raise ValueError(f"eps={eps} must be >= 0: pass e.g. 1e-8, PyTorch's default")
        if not weight_decay >= 0.0:
            raise ValueError(f"weight_decay={weight_decay} must be >= 0: pass e.g. 0.01, or 0.0 for no decay")
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, decoupled=decoupled)
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self) -> None:
        """One update of every parameter that has a gradient, with each group's current ``lr`` (a scheduler may
        have changed it). Unlike PyTorch's, it takes no closure: backpropagate the loss before calling it."""
        for group in self.param_groups:
            lr, (beta1, beta2), eps, decay = group["lr"], group["betas"], group["eps"], group["weight_decay"]
            for w in group["params"]:
                if w.grad is None:
                    continue
                state = self.state[w]
                if not state:
                    state.update(step=0, m=torch.zeros_like(w), v=torch.zeros_like(w))
                state["step"] += 1
                t, m, v = state["step"], state["m"], state["v"]  # m, v: (*)
                g = w.grad  # (*)
                if group["decoupled"]:
                    w.mul_(1 - lr * decay)  # AdamW: shrink the weights themselves
                else:
                    g = g + decay * w  # Adam's L2 penalty: λ·w joins the gradient  (*)
                m.mul_(beta1).add_(g, alpha=1 - beta1)
                v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
                m_hat = m / (1 - beta1**t)  # (*)
                v_hat = v / (1 - beta2**t)  # (*)
                w.sub_(lr * m_hat / (v_hat.sqrt() + eps))


def cosine_with_warmup(
    step: int, *, peak_lr: float, warmup_steps: int, total_steps: int, min_lr: float = 0.0
) -> float:
    """The learning rate of the ``step``-th update (steps from 1, as lesson 09's schedules): a linear warm-up from 0
    to ``peak_lr`` at ``warmup_steps``, then half a cosine down to ``min_lr`` at ``total_steps``; ``min_lr`` after it.

        step <= warmup_steps:  peak_lr · step / warmup_steps       (the line from 0 at step 0, a step never taken)
        later:                 min_lr + (peak_lr − min_lr) · (1 + cos(π · (step − warmup_steps) /
                                                                         (total_steps − warmup_steps))) / 2

    With ``scheduler.step()`` after each ``optimizer.step()``, the scheduler's epoch e is step − 1, so this is
    ``LambdaLR(optimizer, lambda e: cosine_with_warmup(e + 1, ...) / peak_lr)`` with the optimiser's lr at
    ``peak_lr``; and, for warmup_steps >= 2, ``SequentialLR`` of ``LinearLR(start_factor=1 / warmup_steps,
    total_iters=warmup_steps - 1)`` and ``CosineAnnealingLR(T_max=total_steps - warmup_steps, eta_min=min_lr)``
    with ``milestones=[warmup_steps - 1]`` (``warmup_steps=1``: the ``CosineAnnealingLR`` alone), up to
    ``total_steps``, after which ``CosineAnnealingLR`` climbs again. ``warmup_steps=0``: the cosine from step 1.
    """
    if not 0 <= warmup_steps < total_steps:
        raise ValueError(
            f"warmup_steps={warmup_steps} must be at least 0 and less than total_steps={total_steps}: the cosine "
            f"needs steps after the warm-up; pass e.g. warmup_steps={total_steps // 10}"
        )
    if not 0.0 <= min_lr <= peak_lr:
        raise ValueError(f"min_lr={min_lr} must be in [0, peak_lr={peak_lr}]: pass e.g. min_lr={peak_lr / 10:g}")
    step = max(step, 1)
    if step <= warmup_steps:
        return peak_lr * step / warmup_steps
    if step >= total_steps:
        return min_lr
    progress = (step - warmup_steps) / (total_steps - warmup_steps)  # 0 at the peak, 1 at the end
    return min_lr + (peak_lr - min_lr) * (1 + math.cos(math.pi * progress)) / 2


def clip_grad_norm(parameters: Iterable[torch.nn.Parameter], max_norm: float) -> torch.Tensor:
    """Scale all gradients together so that their global L2 norm (of every gradient as one long vector) is at most
    ``max_norm``; return the norm before clipping, a 0-dim tensor. As ``torch.nn.utils.clip_grad_norm_``: the
    factor is max_norm / (norm + 1e-6), capped at 1 (a smaller norm leaves the gradients unchanged); parameters
    whose ``.grad`` is None are skipped, and with none the norm is 0."""
    if not max_norm > 0:
        raise ValueError(f"max_norm={max_norm} must be > 0: pass e.g. 1.0, or float('inf') to only measure the norm")
    grads = [p.grad for p in parameters if p.grad is not None]  # each (*)
    if not grads:
        return torch.tensor(0.0)
    total_norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))  # ()
    scale = torch.clamp(max_norm / (total_norm + 1e-6), max=1.0)  # ()
    for g in grads:
        g.mul_(scale)
    return total_norm
